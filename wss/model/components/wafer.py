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
``input``      waiting for the input workers' data;
``switch``     switching the wafer to the next weight kernel (a fixed cost per
               kernel pass: its program and routes; MemoryX streams meanwhile);
``runtime``    the runtime's fixed costs at the start of every step and
               micro-batch (host synchronisation, loss and metric reporting);
``offload``    sending a block's input out over the wafer's I/O, or waiting for
               it to come back before the block's recompute (activation offload).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any

import simpy

from wss.model.components.links import ByteStore, Chunk
from wss.model.components.part import Held, Process, Reading
from wss.model.kernels.cycles import KernelCycles
from wss.model.program import Pass

__all__ = ["KernelWork", "WaferSettings", "Wafer", "PassTiming"]


@dataclass(frozen=True)
class KernelWork:
    """What the wafer does for one streamed kernel.

    ``cycles[tokens]`` are the kernel's forward and backward cycles on a
    micro-batch of ``tokens`` tokens (from :mod:`wss.model.kernels.cycles`);
    the weights arrive in ``n_chunks`` chunks and the backward pass sends
    ``grad_bytes`` of weight gradients in as many chunks.
    """

    n_chunks: int
    grad_bytes: float
    cycles: Mapping[int, KernelCycles]


@dataclass(frozen=True)
class WaferSettings:
    """What a wafer needs to execute the program.

    Parameters
    ----------
    clock_Hz
        Core clock: cycles become seconds at this rate.
    kernels
        One :class:`KernelWork` per streamed kernel, by kernel index.
    op_seconds
        ``(op position, tokens) -> (forward s, backward s)`` of each on-wafer
        (non-weight) operation.
    loss_op
        Position of the last operation; its forward end is when the loss is known.
    ingress_buffer_bytes
        Bytes the intake (the wafer's ingress buffer for weight chunks) holds.
    kernel_switch_s, micro_batch_overhead_s, step_overhead_s
        Fixed costs: per pass of a weight kernel, at the start of every micro-batch, at the
        start of every step (the runtime's; see ``RuntimeConfig``).
    kernel_pass_min_s
        The shortest time from one weight kernel's pass to the next (from the start of one's work, after its
        switch, to the next one's switch): the next pass waits out the rest, recorded as ``switch``
        (``RuntimeConfig.kernel_pass_min_s``).
    offload_bytes_per_token
        With activation offload: for the op position that starts each block, the bytes per token of
        the block's input, written out at its forward pass and read back before its recompute.
    offload_chunk_bytes
        Size of one chunk of offloaded activations.
    compute_factors
        A factor on the compute seconds of each step (per-step noise, ``faults.jitter``); empty: none.
    offload_buffer_bytes
        SRAM for one block input arriving back (the planner's SRAM budget for offload holds two: the one
        being recomputed and the next); a block input leaving is sent from where it is while the
        wafer goes on, one block at a time.
    """

    clock_Hz: float
    kernels: tuple[KernelWork, ...]
    op_seconds: Mapping[tuple[int, int], tuple[float, float]]
    loss_op: int
    ingress_buffer_bytes: int
    kernel_switch_s: float = 0.0
    kernel_pass_min_s: float = 0.0
    micro_batch_overhead_s: float = 0.0
    step_overhead_s: float = 0.0
    offload_bytes_per_token: Mapping[int, float] = field(default_factory=dict)
    offload_chunk_bytes: float = 64 * 2**20
    offload_buffer_bytes: int = 1
    name: str = "wafer"
    compute_factors: tuple[float, ...] = ()

    def offload_chunks(self, total_bytes: float) -> int:
        """Chunks one offloaded block input travels in."""
        return max(1, math.ceil(total_bytes / self.offload_chunk_bytes))


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
    """A wafer (the representative one when wafers are folded): intake, compute, outlet."""

    def __init__(self, env: simpy.Environment, settings: WaferSettings, program: list[Pass],
                 input_ready: dict[tuple[int, int], simpy.Event], mb_started: dict[tuple[int, int], simpy.Event]):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.program = program
        self.clock = settings.clock_Hz
        self.intake = ByteStore(env, settings.ingress_buffer_bytes)
        #: Offloaded block inputs coming back (its own share of the ingress buffer).
        self.act_intake = ByteStore(env, settings.offload_buffer_bytes)
        self._sending: simpy.Process | None = None  # the block input being sent out, if any
        self._kernel_began = -math.inf  # when the last weight kernel's pass began (kernel_pass_min_s)
        #: (step, micro_batch) -> succeeds when that micro-batch's forward pass is done (its loss is known).
        self.forward_done = {(p.step, p.micro_batch): env.event() for p in program
                             if p.op == settings.loss_op and p.phase == "forward"}
        self.outlet: simpy.Store | None = None
        self.input_ready = input_ready
        self.mb_started = mb_started
        #: (start, end, cause, pass_index): every compute span and stall, in order.
        self.timeline: list[tuple[float, float, str, int]] = []
        self._pass = -1
        self.passes: list[PassTiming] = []
        self.compute_s = 0.0
        self._factor = 1.0  # this step's factor on compute (compute_factors)
        self.loss_times: dict[tuple[int, int], float] = {}
        #: Called with the fraction of passes done after each pass (creates no SimPy events).
        self.progress: Callable[[float], None] | None = None

    @property
    def current_pass(self) -> int:
        """Index of the pass the wafer is in (-1 before the first)."""
        return self._pass

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.run())]

    def counters(self) -> dict[str, float]:
        return {f"{self.name}.compute": self.compute_s}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of the run it computed, under the Result's name for the representative wafer (whose
        counter both clusters keep as ``wafer.compute``)."""
        return {"wafer.compute": at.total("wafer.compute") / at.seconds}

    def waits(self) -> dict[int, str]:
        names = {id(self.intake): "the wafer's intake",
                 id(self.act_intake): "the wafer's intake of offloaded activations"}
        for (step, mb), ev in self.forward_done.items():
            names[id(ev)] = f"the forward pass of step {step}, micro-batch {mb}"
        return names

    def state(self) -> dict[str, Held]:
        """The chunks waiting in its two intakes (weights, and offloaded activations coming back)."""
        return {f"{self.name}.intake": Held(len(self.intake.items)),
                f"{self.name}.act_intake": Held(len(self.act_intake.items))}

    def connect(self, outlet: simpy.Store) -> None:
        self.outlet = outlet

    def _wait(self, t0: float, cause: str, timing: PassTiming) -> None:
        self._span(t0, self.env.now, cause, timing)

    def _span(self, a: float, b: float, cause: str, timing: PassTiming) -> None:
        if b > a:
            self.timeline.append((a, b, cause, self._pass))
            timing.stall_s += b - a
            timing.stall_by[cause] = timing.stall_by.get(cause, 0.0) + b - a

    def _compute(self, seconds: float, timing: PassTiming) -> Generator[simpy.Event, Any, None]:
        seconds *= self._factor
        if seconds > 0:
            t0 = self.env.now
            yield self.env.timeout(seconds)
            self.timeline.append((t0, self.env.now, "compute", self._pass))
            timing.compute_s += seconds
            self.compute_s += seconds

    def _overhead(self, seconds: float, cause: str, timing: PassTiming) -> Generator[simpy.Event, Any, None]:
        """Spend a fixed cost on the wafer, recorded under ``cause``."""
        if seconds > 0:
            t0 = self.env.now
            yield self.env.timeout(seconds)
            self._span(t0, self.env.now, cause, timing)

    def start_pass(self, p: Pass) -> PassTiming:
        """Begin pass ``p``: the wafer's pass boundary, before it waits for anything of the pass.

        An observer from outside (a probe: :mod:`wss.model.folding.probe`) wraps this method on the wafer it
        watches; the wafer itself calls no one, so a wafer that nobody watches pays nothing for it.
        """
        self._pass = p.index
        if self.settings.compute_factors:
            self._factor = self.settings.compute_factors[p.step]
        timing = PassTiming()
        self.passes.append(timing)
        timing.start = self.env.now
        return timing

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: execute the program."""
        env, cfg = self.env, self.settings
        for p in self.program:
            timing = self.start_pass(p)
            if p.op == 0 and p.phase == "forward":
                self.mb_started[(p.step, p.micro_batch)].succeed()
                runtime = cfg.micro_batch_overhead_s + (cfg.step_overhead_s if p.micro_batch == 0 else 0.0)
                yield from self._overhead(runtime, "runtime", timing)
                t0 = env.now
                yield self.input_ready[(p.step, p.micro_batch)]
                self._wait(t0, "input", timing)
            if p.op in cfg.offload_bytes_per_token and p.phase != "backward":
                yield from self._offload(p, timing)
            if p.kernel is None:
                fwd, bwd = cfg.op_seconds[(p.op, p.tokens)]
                yield from self._compute(bwd if p.phase == "backward" else fwd, timing)
                if p.op == cfg.loss_op and p.phase == "forward":
                    self.loss_times[(p.step, p.micro_batch)] = env.now
                    self.forward_done[(p.step, p.micro_batch)].succeed()
            else:
                yield from self._kernel(p, timing)
            timing.end = env.now
            if self.progress is not None:
                self.progress((p.index + 1) / len(self.program))

    def _offload(self, p: Pass, timing: PassTiming) -> Generator[simpy.Event, Any, None]:
        """At a block's start: send its input out (forward) or wait for it to come back (recompute).

        Sending runs beside the wafer's work; the wafer waits only if the previous block's input is still
        leaving (SRAM holds one outgoing block input).
        """
        env = self.env
        total = self.settings.offload_bytes_per_token[p.op] * p.tokens
        n = self.settings.offload_chunks(total)
        t0 = env.now
        if p.phase == "forward":
            if self._sending is not None and not self._sending.triggered:
                yield self._sending
            self._sending = env.process(self._send(p.index, total, n))
        else:
            for _ in range(n):
                chunk: Chunk = yield self.act_intake.get()
                if chunk.ready_at > env.now:
                    yield env.timeout(chunk.ready_at - env.now)
                timing.bytes_in += chunk.bytes
        self._wait(t0, "offload", timing)

    def _send(self, pass_index: int, total: float, n: int) -> Generator[simpy.Event, Any, None]:
        """Process: put one block input's chunks into the outlet."""
        assert self.outlet is not None
        for c in range(n):
            yield self.outlet.put(Chunk(pass_index, c, n, total / n, ready_at=self.env.now, kind="activation"))

    def _kernel(self, p: Pass, timing: PassTiming) -> Generator[simpy.Event, Any, None]:
        env, outlet = self.env, self.outlet
        assert p.kernel is not None and outlet is not None
        work = self.settings.kernels[p.kernel]
        n = work.n_chunks
        backward = p.phase == "backward"
        cycles = work.cycles[p.tokens]
        per_chunk_cycles = (cycles.backward if backward else cycles.forward) / n
        grad_c = work.grad_bytes / n
        # The runtime readies a weight kernel's pass while the one before it runs: the pass begins no sooner
        # than kernel_pass_min_s after that one began (a shorter pass, and what followed it, wait for it).
        yield from self._overhead(self._kernel_began + self.settings.kernel_pass_min_s - env.now, "switch", timing)
        yield from self._overhead(self.settings.kernel_switch_s, "switch", timing)
        self._kernel_began = env.now
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
                yield outlet.put(Chunk(p.index, c, n, grad_c, ready_at=env.now))
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
