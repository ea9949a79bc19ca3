"""The optimizer coprocessor in MemoryX.

MemoryX receives each kernel's summed gradient and, once the last
micro-batch's gradient has arrived, updates the kernel's weights and state.
Earlier micro-batches' gradients are accumulated (read and write the fp32
gradient buffer, one add per weight).  With global-norm clipping the last
micro-batch's gradients go to norm jobs, and MemoryX queues the updates only
once the step's last gradient is in (:class:`~wss.model.components.memoryx.MemoryX`).
Shards work on their slice of every kernel in parallel, so the folded coprocessor runs at the shards' aggregate
rates.  Jobs run one at a time in arrival order.

Each component of the state (weights, gradient accumulator, moments) lives in
its own tier (:func:`~wss.model.machine.optimizer_costs.job_traffic`), and
a job's three kinds of work run side by side, so it lasts as long as the
longest: its DRAM bytes through the DRAM it shares with the weight stream and
the gradient intake (:class:`~wss.model.components.dram.SharedDram`); its
flash-resident state read over the flash channel (contending with weight
prefetch) and then written back at the flash write rate; and its FLOPs at the
coprocessor's rate.  An update then takes the runtime's fixed time per update
(``RuntimeConfig.update_overhead_s``, 0 unless set) before the next job starts.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from wss.model.components.dram import SharedDram
from wss.model.components.part import Held, Process, Reading
from wss.model.machine.optimizer_costs import JobTraffic, OptimizerCost, StateTiers, job_traffic

__all__ = ["OptimizerSettings", "UpdateJob", "OptimizerCoprocessor"]


@dataclass(frozen=True)
class OptimizerSettings:
    """What the optimizer coprocessor needs: its rates and the optimizer's per-parameter cost.

    Rates are those of the part being modelled: all MemoryX shards together
    when the shards are folded into one coprocessor.
    """

    flash_read_Bps: float
    flash_write_Bps: float
    flops_per_s: float
    cost: OptimizerCost
    incoming_bytes_per_param: float  # the summed gradient's wire precision, read back from DRAM by every job
    name: str = "memoryx.optimizer"
    #: Seconds each kernel's update takes after its work (``RuntimeConfig.update_overhead_s``).
    update_overhead_s: float = 0.0


@dataclass(eq=False)
class UpdateJob:
    """One update (or gradient accumulation, or share of the global norm) of one kernel.

    With global-norm clipping an update is released by the step's last gradient, not its own:
    ``released_by`` is that gradient's pass (None: the job's own gradient's).  A ``stand_in`` is the update of a
    kernel the program leaves out (a block folded away): it takes the optimizer's time in the step's run of
    updates and is recorded as its own update, but nothing waits for it.
    """

    kernel: int
    step: int
    micro_batch: int
    kind: str  # "update", "accumulate" or "norm"
    nnz: int
    tiers: StateTiers
    arrived: float
    released_by: int | None = None
    stand_in: bool = False
    traffic: JobTraffic | None = None
    flops: float = 0.0
    start: float = 0.0
    end: float = 0.0

    @property
    def queued_s(self) -> float:
        return self.start - self.arrived

    @property
    def read_bytes(self) -> float:
        """Bytes read from either tier (the incoming gradient included)."""
        t = self.traffic
        return t.dram_read_bytes + t.flash_read_bytes if t is not None else 0.0

    @property
    def write_bytes(self) -> float:
        """Bytes written to either tier."""
        t = self.traffic
        return t.dram_write_bytes + t.flash_write_bytes if t is not None else 0.0


class OptimizerCoprocessor:
    """The optimizer coprocessor (folded over the MemoryX shards by its settings' rates)."""

    def __init__(self, env: simpy.Environment, settings: OptimizerSettings, flash_channel: simpy.Resource,
                 dram: SharedDram):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.cost = settings.cost
        self.flash_channel = flash_channel
        self.dram = dram
        self.flash_read_Bps = settings.flash_read_Bps
        self.flash_write_Bps = settings.flash_write_Bps
        self.flops_rate = settings.flops_per_s
        self.queue = simpy.Store(env)
        self.done: dict[tuple[int, int], simpy.Event] = {}
        self.jobs: list[UpdateJob] = []
        self.busy_s = 0.0
        self.flash_busy_s = 0.0
        self.current: UpdateJob | None = None

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.run())]

    def counters(self) -> dict[str, float]:
        """Busy seconds (its flash time is counted on MemoryX's flash channel)."""
        return {self.name: self.busy_s}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of the run it spent on updates and accumulations."""
        return {self.name: at.total(self.name) / at.seconds}

    def waits(self) -> dict[int, str]:
        """The job queue (the update-done events are named by the cluster, which knows the kernels' names)."""
        return {id(self.queue): "the optimizer's job queue"}

    def state(self) -> dict[str, Held]:
        """Its :meth:`backlog`: the jobs waiting, and how long the job in service has run (to within the period)."""
        queued, running = self.backlog()
        return {f"{self.name}.queued": Held(queued), f"{self.name}.running": Held(running, "period")}

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

    def submit(self, job: UpdateJob, first: bool, accumulated: bool, clipped: bool = False) -> None:
        """Queue a job.

        ``first``: an accumulation that starts the fp32 gradient buffer (write only).
        ``accumulated``: an update whose gradient sits in that buffer (read it too).
        ``clipped``: the step's gradients are clipped to their global norm (``job_traffic``).
        """
        job.traffic = job_traffic(self.cost, job.kind, job.nnz, job.tiers, first=first, accumulated=accumulated,
                                  incoming_bytes=job.nnz * self.settings.incoming_bytes_per_param, clipped=clipped)
        job.flops = job.traffic.flops
        self.queue.put(job)

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: execute jobs in arrival order, each one's DRAM, flash and FLOPs side by side."""
        env = self.env
        while True:
            job = yield self.queue.get()
            self.current = job
            job.start = env.now
            t = job.traffic
            assert t is not None
            work: list[simpy.Event] = [env.timeout(t.flops / self.flops_rate)]
            if t.dram_bytes > 0:
                work.append(self.dram.transfer(t.dram_bytes))
            if t.flash_read_bytes + t.flash_write_bytes > 0:
                work.append(env.process(self._flash(t)))
            yield env.all_of(work)
            if job.kind == "update" and self.settings.update_overhead_s:
                yield env.timeout(self.settings.update_overhead_s)  # the update's fixed time, after its work
            job.end = env.now
            self.current = None
            self.busy_s += job.end - job.start
            self.jobs.append(job)
            if job.kind == "update" and not job.stand_in:
                self.done_event(job.kernel, job.step).succeed()

    def _flash(self, t: JobTraffic) -> Generator[simpy.Event, Any, None]:
        """A job's flash-resident state: read over the shared channel, then written back."""
        with self.flash_channel.request() as req:
            yield req
            read = t.flash_read_bytes / self.flash_read_Bps
            yield self.env.timeout(read)
            self.flash_busy_s += read
        yield self.env.timeout(t.flash_write_bytes / self.flash_write_Bps)
