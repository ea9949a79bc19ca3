"""The way between MemoryX and the wafer as the analytic level sees it: every stage's rate and what its buffers hold.

Per kernel (:class:`Way`): ``S``, its stream over the slowest stage down (MemoryX's DRAM read and network,
which overlap, then each SwarmX level, the last capped by the wafer's I/O); ``U``, its gradients over the
slowest stage up; the chunks that can wait past the slowest stage down and before the slowest stage up
(each SwarmX port buffer and the wafer's intake hold :func:`~wss.model.machine.figures.chunks_buffered`
chunks); a chunk's crossing of the stages the slowest does not hide (the fill) and a gradient chunk's
climb to MemoryX.  A hop whose latency outlasts its ``b`` buffered chunks paces them: ``b + 1`` chunks
per latency plus chunk (credit flow control).
"""

from __future__ import annotations

from dataclasses import dataclass

from wss.model.machine.figures import chunks_buffered, offload_chunk_bytes
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.machine.swarmx_path import swarmx_path
from wss.model.plan.types import KernelPlan
from wss.model.scenario import Scenario

__all__ = ["Way", "Path"]


@dataclass(frozen=True)
class Way:
    """One kernel's figures on the way down and up."""

    stream_s: float  # S: one pass over the slowest stage down
    up_s: float  # U: one backward pass's gradients over the slowest stage up
    slots_down: int  # chunks that can wait past the slowest stage down
    slots_up: int  # chunks that can wait before (and on) the slowest stage up
    slots_in: int  # chunks the wafer's intake holds
    fill_s: float  # a chunk's crossing beyond the slowest stage, plus hop latencies
    climb_s: float  # a gradient chunk's crossing to MemoryX, hop latencies included
    up_chunk_s: float  # a gradient chunk on the slowest stage up
    bottleneck: str


@dataclass(frozen=True)
class Path:
    """Bandwidths of every stage between MemoryX and the wafer, and the hop latency."""

    down: tuple[tuple[str, float], ...]  # SwarmX levels, root to leaf; the last capped by the wafer's I/O
    up: tuple[tuple[str, float], ...]  # SwarmX levels, leaf to root, then MemoryX's network ports
    dram_Bps: float
    net_Bps: float
    flash_read_Bps: float
    flash_write_Bps: float
    opt_flops: float
    hop_s: float
    port_buffer_bytes: int
    ingress_buffer_bytes: int
    offload_chunk_bytes: float  # a chunk of an offloaded block input

    @property
    def edge_Bps(self) -> float:
        """The wafer's leaf edge (the last level down), which offloaded block inputs share with the weights."""
        return self.down[-1][1]

    @classmethod
    def of(cls, scenario: Scenario) -> Path:
        hw = scenario.hardware
        tree = swarmx_path(hw)
        levels = tuple((f"swarmx.l{lv}", bw) for lv, bw in enumerate(tree.level_Bps, start=1))
        rates = memoryx_rates(scenario)  # the shards' rates added up, each at the slowest shard's (faults.shards)
        return cls(
            down=levels,
            up=tuple(reversed(levels)) + (("memoryx.network", rates.network_Bps),),
            dram_Bps=rates.dram_Bps,
            net_Bps=rates.network_Bps,
            flash_read_Bps=rates.flash_read_Bps,
            flash_write_Bps=rates.flash_write_Bps,
            opt_flops=rates.optimizer_flops,
            hop_s=tree.hop_latency_s,
            port_buffer_bytes=tree.port_buffer_bytes,
            ingress_buffer_bytes=hw.wafer.ingress_buffer_bytes,
            offload_chunk_bytes=offload_chunk_bytes(scenario.simulation.chunk_bytes),
        )

    def way(self, kp: KernelPlan) -> Way:
        """The kernel's way down and up (kernels of equal bytes and chunks have equal ways)."""
        n = kp.n_chunks
        b = chunks_buffered(self.port_buffer_bytes, kp.stream_bytes / n)
        b_in = chunks_buffered(self.ingress_buffer_bytes, kp.stream_bytes / n)
        b_up = chunks_buffered(self.port_buffer_bytes, kp.grad_bytes / n)
        # Down: MemoryX reads (DRAM) and sends (network) each chunk at once, then every SwarmX level.
        names = ["memoryx"] + [name for name, _ in self.down]
        per_chunk = [max(kp.read_bytes / self.dram_Bps, kp.stream_bytes / self.net_Bps) / n]
        per_chunk += [kp.stream_bytes / bw / n for _, bw in self.down]
        # A level starts a chunk only after its flight from the level above, and only b chunks wait
        # in its inbox: when a hop's latency outlasts b chunks, b + 1 chunks cross per latency + chunk.
        paced = [per_chunk[0]] + [max(t, (self.hop_s + t) / (b + 1)) for t in per_chunk[1:]]
        slow = max(range(len(paced)), key=lambda i: (paced[i], i))  # the last of equals
        # What has crossed the slowest stage: the chunk it holds while blocked, each later level's
        # inbox and wire, the wafer's intake.  Chunks before it still have to cross it.
        slots_down = 1 + (len(paced) - 1 - slow) * (b + 1) + b_in
        fill = sum(per_chunk) - per_chunk[slow] + (len(self.down) + 1) * self.hop_s
        # Up: the wafer's outlet feeds the leaf level; gradients queue up to the slowest stage.
        up_chunk = [kp.grad_bytes / bw / n for _, bw in self.up]
        up_paced = [max(t, (self.hop_s + t) / (b_up + 1)) for t in up_chunk]
        slow_up = min(range(len(up_paced)), key=lambda i: (-up_paced[i], i))  # the first of equals
        # ... and lands in MemoryX's DRAM (the gradient intake's write) before the optimizer can use it.
        climb = sum(t + self.hop_s for t in up_chunk) + kp.grad_bytes / n / self.dram_Bps
        return Way(n * paced[slow], n * up_paced[slow_up], slots_down, (slow_up + 1) * (b_up + 1), b_in, fill, climb,
                   up_paced[slow_up], names[slow])
