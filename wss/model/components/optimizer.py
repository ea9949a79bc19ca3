"""The optimizer coprocessor in MemoryX.

MemoryX receives each kernel's summed gradient and, once the last
micro-batch's gradient has arrived, updates the kernel's weights and state:
``time = max(state bytes moved / tier bandwidth, optimizer FLOPs / FLOP
rate)``.  Earlier micro-batches' gradients are accumulated (read and write
the fp32 gradient buffer, one add per weight).  Shards work on their slice of
every kernel in parallel, so the folded coprocessor runs at the shards'
aggregate rates.  Jobs run one at a time in arrival order.

For a flash-resident kernel the state is read over the shared flash channel
(contending with weight prefetch) and written back at the flash write rate.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from wss.model.components.optimizer_costs import SCALAR_BYTES, OptimizerCost

__all__ = ["OptimizerSettings", "UpdateJob", "OptimizerCoprocessor"]


@dataclass(frozen=True)
class OptimizerSettings:
    """What the optimizer coprocessor needs: its rates and the optimizer's per-parameter cost.

    Rates are those of the part being modelled: all MemoryX shards together
    when the shards are folded into one coprocessor.
    """

    dram_Bps: float
    flash_read_Bps: float
    flash_write_Bps: float
    flops_per_s: float
    cost: OptimizerCost
    name: str = "memoryx.optimizer"


@dataclass(eq=False)
class UpdateJob:
    """One update (or gradient accumulation) of one kernel."""

    kernel: int
    step: int
    micro_batch: int
    kind: str  # "update" or "accumulate"
    nnz: int
    tier: str
    arrived: float
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    flops: float = 0.0
    start: float = 0.0
    end: float = 0.0

    @property
    def queued_s(self) -> float:
        return self.start - self.arrived


class OptimizerCoprocessor:
    """The optimizer coprocessor (folded over the MemoryX shards by its settings' rates)."""

    def __init__(self, env: simpy.Environment, settings: OptimizerSettings, flash_channel: simpy.Resource):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.cost = settings.cost
        self.flash_channel = flash_channel
        self.dram_Bps = settings.dram_Bps
        self.flash_read_Bps = settings.flash_read_Bps
        self.flash_write_Bps = settings.flash_write_Bps
        self.flops_rate = settings.flops_per_s
        self.queue = simpy.Store(env)
        self.done: dict[tuple[int, int], simpy.Event] = {}
        self.jobs: list[UpdateJob] = []
        self.busy_s = 0.0
        self.flash_busy_s = 0.0
        self.current: UpdateJob | None = None

    def done_event(self, kernel: int, step: int) -> simpy.Event:
        """Event that fires when ``kernel``'s update of ``step`` is finished."""
        key = (kernel, step)
        if key not in self.done:
            self.done[key] = self.env.event()
        return self.done[key]

    def backlog(self) -> tuple[int, float]:
        """Jobs waiting, and how long the job in service has been running (for fold checks)."""
        running = self.env.now - self.current.start if self.current is not None else -1.0
        return len(self.queue.items), running

    def submit(self, job: UpdateJob, first: bool, accumulated: bool) -> None:
        """Queue a job.

        ``first``: an accumulation that starts the fp32 gradient buffer (write only).
        ``accumulated``: an update whose gradient sits in that buffer (read it too).
        """
        n = job.nnz
        if job.kind == "update":
            job.read_bytes = n * self.cost.read_scalars * SCALAR_BYTES + (n * SCALAR_BYTES if accumulated else 0)
            job.write_bytes = n * self.cost.write_scalars * SCALAR_BYTES
            job.flops = n * self.cost.flops
        else:  # add this gradient into the fp32 accumulator
            job.read_bytes = 0.0 if first else n * SCALAR_BYTES
            job.write_bytes = n * SCALAR_BYTES
            job.flops = 0.0 if first else float(n)
        self.queue.put(job)

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: execute jobs in arrival order."""
        env = self.env
        while True:
            job = yield self.queue.get()
            self.current = job
            job.start = env.now
            compute = job.flops / self.flops_rate
            if job.tier == "dram":
                yield env.timeout(max((job.read_bytes + job.write_bytes) / self.dram_Bps, compute))
            else:
                with self.flash_channel.request() as req:
                    yield req
                    read = job.read_bytes / self.flash_read_Bps
                    yield env.timeout(read)
                    self.flash_busy_s += read
                rest = max(job.write_bytes / self.flash_write_Bps, compute - (env.now - job.start))
                yield env.timeout(max(rest, 0.0))
            job.end = env.now
            self.current = None
            self.busy_s += job.end - job.start
            self.jobs.append(job)
            if job.kind == "update":
                self.done_event(job.kernel, job.step).succeed()
