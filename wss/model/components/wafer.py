"""A CS-X wafer executing the program one pass at a time.

Activations stay on the wafer; weights arrive as chunks on the intake.  For
a streamed kernel the wafer computes on each chunk as it arrives (the cycles
of its non-zeros, from :mod:`wss.model.kernels.cycles`), and in the backward pass
sends the chunk's weight gradients to the outlet.  Non-weight work runs at a
configured fraction of peak.  Identical wafers are folded: this object is
the busiest wafer (the largest shard), which sets the cluster's pace.

Every idle moment is recorded with its cause, so the step's time splits
exactly into compute and stalls:

``compute``    the wafer is computing;
``stream``     waiting for a weight chunk that the links or MemoryX
               bandwidth have not delivered yet, or blocked on the outlet;
``flash``      the chunk waited for a flash prefetch;
``bubble``     the chunk waited for the previous step's update of its kernel
               (the iteration-boundary bubble);
``optimizer``  the part of that wait the update spent queued behind others;
``input``      waiting for the input workers' data.
"""

from __future__ import annotations

import simpy

from wss.model.components.links import Chunk
from wss.model.plan import Plan
from wss.model.program import Pass

__all__ = ["Wafer", "PassTiming"]


class PassTiming:
    """What happened during one pass on the wafer (filled in as it runs)."""

    __slots__ = ("bytes_in", "bytes_out", "compute_s", "cycles", "end", "stall_by", "stall_s", "start")

    def __init__(self) -> None:
        self.start = 0.0
        self.end = 0.0
        self.compute_s = 0.0
        self.stall_s = 0.0
        self.stall_by: dict[str, float] = {}
        self.bytes_in = 0.0
        self.bytes_out = 0.0
        self.cycles = 0.0


class Wafer:
    """The folded wafer: intake, compute, outlet."""

    name = "wafer"

    def __init__(self, env: simpy.Environment, plan: Plan, program: list[Pass], capacity: int,
                 input_ready: dict[tuple[int, int], simpy.Event], mb_started: dict[tuple[int, int], simpy.Event]):
        self.env = env
        self.plan = plan
        self.program = program
        self.clock = plan.scenario.hardware.wafer.clock_Hz
        self.intake = simpy.Store(env, capacity=capacity)
        self.outlet: simpy.Store | None = None
        self.input_ready = input_ready
        self.mb_started = mb_started
        #: (start, end, cause, pass_index): every compute span and stall, in order.
        self.timeline: list[tuple[float, float, str, int]] = []
        self._pass = -1
        self.passes: list[PassTiming] = []
        self.compute_s = 0.0
        self.loss_times: dict[tuple[int, int], float] = {}
        #: Called with (step, micro_batch) as the wafer starts each micro-batch (before waiting for input).
        self.on_micro_batch_start = None
        #: Called with the fraction of passes done after each pass (creates no SimPy events).
        self.progress = None

    def connect(self, outlet: simpy.Store) -> None:
        self.outlet = outlet

    def _wait(self, t0: float, cause: str, timing: PassTiming) -> None:
        self._span(t0, self.env.now, cause, timing)

    def _span(self, a: float, b: float, cause: str, timing: PassTiming) -> None:
        if b > a:
            self.timeline.append((a, b, cause, self._pass))
            timing.stall_s += b - a
            timing.stall_by[cause] = timing.stall_by.get(cause, 0.0) + b - a

    def _compute(self, seconds: float, timing: PassTiming):
        if seconds > 0:
            t0 = self.env.now
            yield self.env.timeout(seconds)
            self.timeline.append((t0, self.env.now, "compute", self._pass))
            timing.compute_s += seconds
            self.compute_s += seconds

    def run(self):
        """Process: execute the program."""
        env, plan = self.env, self.plan
        last_loss_op = len(plan.ops) - 1
        for p in self.program:
            self._pass = p.index
            timing = PassTiming()
            self.passes.append(timing)
            timing.start = env.now
            if p.op == 0 and p.phase == "forward":
                if self.on_micro_batch_start is not None:
                    self.on_micro_batch_start(p.step, p.micro_batch)
                self.mb_started[(p.step, p.micro_batch)].succeed()
                yield self.input_ready[(p.step, p.micro_batch)]
                self._wait(timing.start, "input", timing)
            if p.kernel is None:
                fwd, bwd = plan.wafer_op_seconds[(p.op, p.tokens)]
                yield from self._compute(bwd if p.phase == "backward" else fwd, timing)
                if p.op == last_loss_op and p.phase == "forward":
                    self.loss_times[(p.step, p.micro_batch)] = env.now
            else:
                yield from self._kernel(p, timing)
            timing.end = env.now
            if self.progress is not None:
                self.progress((p.index + 1) / len(self.program))

    def _kernel(self, p: Pass, timing: PassTiming):
        env = self.env
        kp = self.plan.kernels[p.kernel]
        n = kp.n_chunks
        backward = p.phase == "backward"
        cycles = kp.cycles[p.tokens]
        per_chunk_cycles = (cycles.backward if backward else cycles.forward) / n
        grad_c = kp.grad_bytes / n
        for c in range(n):
            if p.streamed:
                t0 = env.now
                chunk: Chunk = yield self.intake.get()
                if chunk.ready_at > env.now:
                    yield env.timeout(chunk.ready_at - env.now)
                self._attribute_wait(t0, chunk, timing)
                timing.bytes_in += chunk.bytes
            yield from self._compute(per_chunk_cycles / self.clock, timing)
            timing.cycles += per_chunk_cycles
            if backward:
                t0 = env.now
                yield self.outlet.put(Chunk(p.index, c, n, grad_c, ready_at=env.now))
                self._wait(t0, "stream", timing)
                timing.bytes_out += grad_c

    def _attribute_wait(self, t0: float, chunk: Chunk, timing: PassTiming) -> None:
        """Split a wait for a chunk by what held the chunk back."""
        now = self.env.now
        wait = now - t0
        if wait <= 0:
            return
        if chunk.cause == "update":
            queued = min(wait, chunk.queued_s)
            self._span(t0, t0 + queued, "optimizer", timing)
            self._span(t0 + queued, now, "bubble", timing)
        else:
            self._span(t0, now, chunk.cause, timing)
