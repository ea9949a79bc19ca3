"""What each optimizer costs MemoryX per parameter.

State (capacity): fp32 scalars kept per parameter, the blog's count for Adam
being weight, gradient, m and v = 16 B (M. James, "Scaling Up and Out:
Training Massive Models on Cerebras Systems using Weight Streaming", Cerebras
blog, 2021: 100T parameters need 1.6 PB).  Traffic per update: scalars read
and written by the coprocessor, not counting the incoming gradient (it
arrives from SwarmX).  FLOPs per update: elementwise operations counted by
hand (a declared assumption):

* SGD: ``w -= lr * g`` -> 2;
* momentum: ``u = mu u + g`` (2), ``w -= lr u`` (2) -> 4;
* Adam: ``m = b1 m + (1-b1) g`` (3), ``v = b2 v + (1-b2) g^2`` (4),
  ``w -= lr m_hat / (sqrt(v_hat) + eps)`` with bias corrections folded into
  ``lr`` (5) -> 12;
* AdamW: Adam plus decoupled decay ``w -= lr wd w`` (2) -> 14;
* LAMB (You et al., "Large Batch Optimization for Deep Learning: Training
  BERT in 76 minutes", 2019, Algorithm 2): Adam's moments ``m`` (3) and
  ``v`` (4); the Adam ratio ``r = m_hat / (sqrt(v_hat) + eps)`` with the
  bias corrections folded in as for Adam (3: sqrt, add, divide); decoupled
  decay ``u = r + wd w`` (2); the two norms of the per-layer trust ratio,
  ``||w||^2`` and ``||u||^2`` accumulated (2 each); the update
  ``w -= (lr ||w|| / ||u||) u`` (2) -> 18.  The ratio needs both norms over
  the whole kernel before any weight changes, so the update is two passes:
  the first reads ``w, m, v``, writes ``m, v`` and ``u`` (into the gradient's
  slot, so the state stays Adam's 16 B), the second reads ``w`` and ``u``
  again and writes ``w``: 5 reads and 4 writes against Adam's 3 and 3.
  The per-kernel work (two square roots and a divide, and summing each
  shard's partial norms across MemoryX's shards) is a few scalars per
  kernel and not counted.

The state has three components that MemoryX may keep in different tiers
(:class:`StateTiers`): the fp32 master ``weights`` (read by every stream
pass), the fp32 ``gradient`` accumulator, and the optimizer's ``moments``
(none for SGD, ``u`` for momentum, ``m`` and ``v`` for Adam, AdamW and
LAMB).  Each optimizer's reads and writes are counted per component, so a
job costs each component's traffic at its own tier (:func:`job_traffic`).
Every job also reads the incoming summed gradient, which the network lands
in DRAM (the gradient intake writes it there first).

Global-norm gradient clipping (``training.gradient_clipping: global_norm``;
PyTorch's ``clip_grad_norm_``, the Cerebras modelzoo's ``max_gradient_norm``)
scales every gradient of the step by ``min(1, c / ||g||)``, so no weight may
change before the norm of all of them is known.  Its work, counted by hand
(a declared assumption): a **norm** job per kernel as its step's gradient
arrives (the last micro-batch's), summing the squares of the kernel's
gradient (2 FLOPs per parameter: a multiply and an add); with micro-batches
(or a tied kernel's shared accumulator) it first adds the incoming gradient
into the fp32 accumulator (read and write it, 1 FLOP), because the norm is
that of the whole step's gradient.  The update then scales the gradient (1
FLOP per parameter) and, where the norm job folded it into the accumulator,
reads only the accumulator, not the incoming gradient again.  Summing the
shards' partial sums across MemoryX's nodes is one scalar each and not
counted.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "OptimizerCost", "OPTIMIZER_COSTS", "SCALAR_BYTES", "NORM_FLOPS", "CLIP_SCALE_FLOPS", "STATE_COMPONENTS",
    "StateTiers", "JobTraffic", "job_traffic", "job_seconds",
]

#: MemoryX keeps master weights and optimizer state in fp32.
SCALAR_BYTES = 4

#: FLOPs per parameter of the global norm's sum of squares (a multiply and an add), and of scaling the gradient
#: by the clipping factor before the update (a multiply): counted by hand, an ASSUMPTION (module docstring).
NORM_FLOPS = 2.0
CLIP_SCALE_FLOPS = 1.0

#: The parts of a kernel's MemoryX state that placement may put in different tiers, hottest first:
#: the weights are read by every stream pass, the gradient accumulator by every micro-batch's
#: accumulation, the moments once per step by the update.
STATE_COMPONENTS = ("weights", "gradient", "moments")


@dataclass(frozen=True)
class OptimizerCost:
    """Per-parameter cost of one optimizer in MemoryX.

    ``reads`` and ``writes`` are the fp32 scalars an update moves per parameter, by state component
    (weights, gradient slot, moments), not counting the gradient accumulator's read when micro-batches
    accumulate, nor the incoming gradient.
    """

    moment_scalars: int
    reads: tuple[int, int, int]
    writes: tuple[int, int, int]
    flops: float

    @property
    def state_scalars(self) -> int:
        """Scalars kept per parameter: the weight, the gradient accumulator and the moments."""
        return 2 + self.moment_scalars

    @property
    def state_bytes(self) -> int:
        return self.state_scalars * SCALAR_BYTES

    @property
    def read_scalars(self) -> int:
        return sum(self.reads)

    @property
    def write_scalars(self) -> int:
        return sum(self.writes)

    @property
    def moved_bytes(self) -> int:
        return (self.read_scalars + self.write_scalars) * SCALAR_BYTES

    def component_scalars(self) -> dict[str, int]:
        """Scalars per parameter of each state component (what capacity counts)."""
        return {"weights": 1, "gradient": 1, "moments": self.moment_scalars}


OPTIMIZER_COSTS: dict[str, OptimizerCost] = {
    "sgd": OptimizerCost(moment_scalars=0, reads=(1, 0, 0), writes=(1, 0, 0), flops=2.0),
    "momentum": OptimizerCost(moment_scalars=1, reads=(1, 0, 1), writes=(1, 0, 1), flops=4.0),
    "adam": OptimizerCost(moment_scalars=2, reads=(1, 0, 2), writes=(1, 0, 2), flops=12.0),
    "adamw": OptimizerCost(moment_scalars=2, reads=(1, 0, 2), writes=(1, 0, 2), flops=14.0),
    # First pass: read w, m, v; write m, v and u (into the gradient slot).  Second: read w, u; write w.
    "lamb": OptimizerCost(moment_scalars=2, reads=(2, 1, 2), writes=(1, 1, 2), flops=18.0),
}


@dataclass(frozen=True)
class StateTiers:
    """The tier (``'dram'`` or ``'flash'``) of each component of one kernel's MemoryX state."""

    weights: str = "dram"
    gradient: str = "dram"
    moments: str = "dram"

    def of(self, component: str) -> str:
        return str(getattr(self, component))

    @property
    def any_flash(self) -> bool:
        return "flash" in (self.weights, self.gradient, self.moments)


@dataclass(frozen=True)
class JobTraffic:
    """What one optimizer job moves, by tier and direction, and its FLOPs."""

    dram_read_bytes: float
    dram_write_bytes: float
    flash_read_bytes: float
    flash_write_bytes: float
    flops: float

    @property
    def dram_bytes(self) -> float:
        """Everything the job moves through DRAM, reads and writes together (one shared bandwidth)."""
        return self.dram_read_bytes + self.dram_write_bytes


def job_traffic(
    cost: OptimizerCost, kind: str, nnz: float, tiers: StateTiers, *, first: bool, accumulated: bool,
    incoming_bytes: float, clipped: bool = False,
) -> JobTraffic:
    """The traffic of one job on one kernel of ``nnz`` non-zeros, each component at its tier.

    ``kind`` is ``'update'``, ``'accumulate'`` or ``'norm'``.  An accumulation adds the incoming gradient
    into the fp32 accumulator (``first``: it starts it, write only; one add per weight otherwise).  An
    update moves the optimizer's scalars, plus the accumulator's read when ``accumulated``.  Both read the
    ``incoming_bytes`` of the summed gradient from DRAM, where the network landed it.  With global-norm
    clipping (``clipped``, see the module docstring) the last micro-batch's gradient first goes to a norm
    job (when ``accumulated``, a finishing accumulation too), and the update scales the gradient and reads
    only the accumulator where the norm job folded the incoming gradient into it.
    """
    moved: dict[str, list[float]] = {"dram": [0.0, 0.0], "flash": [0.0, 0.0]}  # tier -> [read, write] scalars
    if kind == "update":
        reads = list(cost.reads)
        reads[1] += 1 if accumulated else 0
        for comp, r, w in zip(STATE_COMPONENTS, reads, cost.writes):
            moved[tiers.of(comp)][0] += r
            moved[tiers.of(comp)][1] += w
        flops = nnz * (cost.flops + (CLIP_SCALE_FLOPS if clipped else 0.0))
        if clipped and accumulated:
            incoming_bytes = 0.0  # the norm job added it into the accumulator
    elif kind == "norm":
        if accumulated:  # the step's gradient is the accumulator plus this one: finish the sum first
            moved[tiers.gradient][0] += 1
            moved[tiers.gradient][1] += 1
        flops = nnz * (NORM_FLOPS + (1.0 if accumulated else 0.0))
    else:
        moved[tiers.gradient][0] += 0 if first else 1
        moved[tiers.gradient][1] += 1
        flops = 0.0 if first else float(nnz)
    per = nnz * SCALAR_BYTES
    return JobTraffic(
        dram_read_bytes=per * moved["dram"][0] + incoming_bytes,
        dram_write_bytes=per * moved["dram"][1],
        flash_read_bytes=per * moved["flash"][0],
        flash_write_bytes=per * moved["flash"][1],
        flops=flops,
    )


def job_seconds(
    t: JobTraffic, dram_Bps: float, flash_read_Bps: float, flash_write_Bps: float, flops_per_s: float
) -> tuple[float, float]:
    """A job's service time when it has MemoryX to itself, and the part of it that holds the flash channel.

    Its DRAM traffic, its flash read then write, and its FLOPs run side by side:
    ``max(DRAM bytes / DRAM rate, flash read / read rate + flash write / write rate, FLOPs / FLOP rate)``.
    The simulator's coprocessor takes exactly this when nothing else uses DRAM or the flash channel.
    """
    channel = t.flash_read_bytes / flash_read_Bps
    seconds = max(t.dram_bytes / dram_Bps, channel + t.flash_write_bytes / flash_write_Bps, t.flops / flops_per_s)
    return seconds, channel
