"""MemoryX: weight and optimizer-state store, streaming weights out and taking gradients in.

Three processes:

* ``prefetch`` walks the stream order and reads chunks of flash-resident
  kernels from flash into a bounded DRAM staging area ahead of use (the
  access order is known ahead of time: Cerebras, "Weight Streaming" white paper, 2021);
* ``stream`` walks the streamed passes in program order, waits where a pass
  depends on the previous step's update (the iteration boundary) or on a
  prefetch, reads each chunk from DRAM and sends it to SwarmX: per chunk
  ``max(bytes read / DRAM bandwidth, bytes sent / network bandwidth)`` with
  all shards in parallel, the read sharing DRAM with the other users;
* ``receive`` takes summed gradient chunks, writes each into DRAM and, once
  a kernel pass is complete, hands an accumulation or update job to the
  optimizer; with global-norm clipping the last micro-batch's gradient gets a
  norm job, and the step's updates are queued after its last gradient.

One DRAM serves them all (:class:`~wss.model.components.dram.SharedDram`):
the stream's reads, the gradient intake's writes, flash prefetch's writes
into the staging area, and the optimizer's DRAM-resident state.  The weights
stream from the tier placement put the kernel's weights in; the optimizer
finds each state component where placement put it.

Shards hold an even slice of every kernel, so they are folded into one
stream at their aggregate bandwidth.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

import simpy

from wss.model.components.dram import SharedDram
from wss.model.components.links import Chunk, Inlet
from wss.model.components.optimizer import OptimizerCoprocessor, UpdateJob
from wss.model.components.part import Carried, Held, PowerDraw, Process, Reading, Track
from wss.model.components.shared_bandwidth import SharedBandwidth
from wss.model.machine.optimizer_costs import StateTiers
from wss.model.program import Pass

__all__ = ["MEMORYX_ACTIVITIES", "FlashPrefetch", "KernelStore", "MemoryXSettings", "MemoryX", "memoryx_busy"]


@dataclass(frozen=True)
class KernelStore:
    """What MemoryX knows of one streamed kernel.

    ``stream_bytes`` go out per pass (to one wafer link) in ``n_chunks``
    chunks; ``read_bytes`` are read per pass from ``tier`` ("dram" or
    "flash"), where the weights live; ``state_tiers`` says where each state
    component lives, for the optimizer.  A tied kernel streams its
    ``state_owner``'s weights and adds its gradient into the owner's
    accumulator.
    """

    index: int
    nnz: int
    n_chunks: int
    stream_bytes: float
    read_bytes: float
    tier: str
    state_owner: int
    shares_accumulator: bool
    state_tiers: StateTiers = field(default_factory=StateTiers)

    @property
    def owns_state(self) -> bool:
        return self.state_owner == self.index


#: The utilisation entries whose largest is a MemoryX node's busy fraction: its stream, its optimizer, its flash
#: channel, its network intake and its DRAM.  They overlap, so the largest is a lower bound on the time the node
#: does anything (docs/model.md, "Energy").
MEMORYX_ACTIVITIES = ("memoryx.stream", "memoryx.optimizer", "memoryx.flash", "memoryx.net.in", "memoryx.dram")


def memoryx_busy(utilisation: dict[str, float]) -> float:
    """A MemoryX node's busy fraction: the largest of its activities' (:data:`MEMORYX_ACTIVITIES`)."""
    return max(utilisation.get(k, 0.0) for k in MEMORYX_ACTIVITIES)


@dataclass(frozen=True)
class MemoryXSettings:
    """What MemoryX needs: its rates, its staging area and its kernels.

    Rates are those of the part being modelled: all shards together when they
    are folded into one stream.  ``latency_s`` is the hop from MemoryX to the
    SwarmX root; ``micro_batches`` is the number of micro-batches per step
    (the last one's gradient triggers the update, or with ``global_norm`` its
    share of the norm); ``shards`` how many nodes
    the one stream stands for (each with its own link to the SwarmX root),
    each drawing ``power_busy_W`` while busy and ``power_idle_W`` otherwise.
    """

    network_Bps: float
    flash_read_Bps: float
    latency_s: float
    staging_bytes: float
    micro_batches: int
    kernels: tuple[KernelStore, ...]
    global_norm: bool = False  # clip the step's gradients to their global norm: updates wait for every gradient
    name: str = "memoryx"
    shards: int = 1
    power_busy_W: float | None = None
    power_idle_W: float | None = None


class MemoryX:
    """MemoryX (all shards folded into one stream by its settings' rates)."""

    def __init__(self, env: simpy.Environment, settings: MemoryXSettings, program: list[Pass],
                 optimizer: OptimizerCoprocessor, flash_channel: simpy.Resource, dram: SharedDram):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.kernels = settings.kernels
        self.program = program
        self.streamed = [p for p in program if p.streamed]
        self.optimizer = optimizer
        self.flash_channel = flash_channel
        self.latency_s = settings.latency_s
        self.dram = dram
        self.net_Bps = settings.network_Bps
        #: MemoryX's network ports toward SwarmX, when other traffic shares them (block inputs going back to
        #: the wafers from an activation store in MemoryX); None: the stream has them to itself.
        self.net_out: SharedBandwidth | None = None
        self.flash_read_Bps = settings.flash_read_Bps
        self.out: Inlet | None = None
        self.grad_inbox = simpy.Store(env)
        # The staging area counts whole bytes: with float levels, rounding in the sum of gets and puts can
        # leave a put that "exceeds" the capacity by 1e-6 B blocked for ever.
        staging = int(settings.staging_bytes)
        self.staging = simpy.Container(env, capacity=staging, init=staging) if staging > 0 else None
        #: whole bytes of DRAM staging one chunk of each flash-resident kernel holds (same for get and put)
        self.staged_chunk_bytes = {
            k.index: min(math.ceil(k.read_bytes / k.n_chunks), staging) for k in settings.kernels if k.tier == "flash"
        }
        self.prefetched: dict[tuple[int, int], simpy.Event] = {}
        self.stream_busy_s = 0.0
        self.flash_busy_s = 0.0
        self.bytes_out = 0.0
        self.bytes_in = 0.0
        self.bytes_read = 0.0
        self.flash_bytes_read = 0.0
        self.stream_start: dict[int, float] = {}
        #: (start, end, pass_index, bytes) spans of streaming and of flash prefetch, when recording.
        self.stream_spans: list[tuple[float, float, int, float]] | None = None
        self.prefetch_spans: list[tuple[float, float, int, float]] | None = None
        #: (pass index, kernel, step) of every stream pass or prefetch that had to wait for that step's update.
        self.update_waits: list[tuple[int, int, int]] = []
        #: Each flash read's factor on its time, called once per read in order (slow reads); None: all at rate.
        self.flash_read_factor: Callable[[], float] | None = None
        #: With global-norm clipping: per step, the kernels whose norm jobs are in and whose updates wait.
        self.held: dict[int, list[int]] = {}
        self._awaited, self._left_out = _norm_kernels(program, settings)

    def _kernel(self, p: Pass) -> KernelStore:
        assert p.kernel is not None
        return self.kernels[p.kernel]

    def record(self) -> None:
        self.stream_spans, self.prefetch_spans = [], []

    def tracks(self) -> list[Track]:
        """The weight stream (with its busy counter) and, where flash staged chunks, the prefetch."""
        if self.stream_spans is None:
            return []
        stream = Track("MemoryX", "weight stream", self.stream_spans, f"{self.name}.stream")
        return [stream, Track("MemoryX", "prefetch", self.prefetch_spans)] if self.prefetch_spans else [stream]

    def processes(self) -> list[tuple[str, Process]]:
        """The stream and the gradient intake (the flash prefetch is :class:`FlashPrefetch`'s, started later)."""
        return [(f"{self.name}.stream", self.stream()), (f"{self.name}.receive", self.receive())]

    def counters(self) -> dict[str, float]:
        """The stream's, DRAM's and flash's (the flash channel's busy time includes the optimizer's flash updates)."""
        n = self.name
        return {
            f"{n}.stream": self.stream_busy_s,
            f"{n}.bytes_out": self.bytes_out,
            f"{n}.bytes_read": self.bytes_read,
            f"{n}.flash": self.flash_busy_s + self.optimizer.flash_busy_s,
            f"{n}.dram": self.dram.busy_s,
            f"{n}.dram.bytes": self.dram.bytes_moved,
        }

    def waits(self) -> dict[int, str]:
        return {id(self.grad_inbox): "MemoryX's gradient inbox", id(self.flash_channel): "the flash channel"}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of the run it was streaming weights."""
        return {f"{self.name}.stream": at.total(f"{self.name}.stream") / at.seconds}

    def power_draw(self, utilisation: dict[str, float]) -> PowerDraw:
        """Its nodes, each busy the largest fraction of its activities (:func:`memoryx_busy`)."""
        s = self.settings
        return PowerDraw("memoryx", s.shards, memoryx_busy(utilisation), s.power_busy_W, s.power_idle_W)

    def carried(self, at: Reading) -> dict[str, Carried]:
        """The weight bytes it streamed, over each shard's link to the SwarmX root."""
        shards = self.settings.shards
        return {f"{self.name}->swarmx": Carried(shards, at.total(f"{self.name}.bytes_out") / shards)}

    def state(self) -> dict[str, Held]:
        """The gradient chunks waiting to be received, the bytes staged from flash in DRAM, and the bytes left
        of each DRAM transfer under way."""
        staged = self.staging.level if self.staging is not None else 0.0
        return {f"{self.name}.grad_inbox": Held(len(self.grad_inbox.items)),
                f"{self.name}.staged": Held(staged, "relative"),
                f"{self.name}.dram": Held(self.dram.remaining(), "transfers")}

    def connect(self, out: Inlet) -> None:
        """Wire where the weight chunks go: the root of the tree (``SwarmX.root``)."""
        self.out = out

    def _prefetch_event(self, key: tuple[int, int]) -> simpy.Event:
        if key not in self.prefetched:
            self.prefetched[key] = self.env.event()
        return self.prefetched[key]


    def prefetch(self) -> Generator[simpy.Event, Any, None]:
        """Process: read flash-resident chunks into DRAM staging, in stream order."""
        env, staging = self.env, self.staging
        assert staging is not None
        for p in self.streamed:
            kp = self._kernel(p)
            if kp.tier != "flash":
                continue
            if p.waits_for_update:  # never read weights the optimizer is still updating
                done = self.optimizer.done_event(kp.state_owner, p.step - 1)
                if not done.triggered:
                    self.update_waits.append((p.index, kp.state_owner, p.step - 1))
                yield done
            per_chunk = kp.read_bytes / kp.n_chunks
            for c in range(kp.n_chunks):
                yield staging.get(self.staged_chunk_bytes[kp.index])
                with self.flash_channel.request() as req:
                    yield req
                    dt = per_chunk / self.flash_read_Bps
                    if self.flash_read_factor is not None:
                        dt *= self.flash_read_factor()
                    t0 = env.now
                    yield env.all_of([env.timeout(dt), self.dram.transfer(per_chunk)])  # lands in DRAM staging
                    dt = env.now - t0
                    self.flash_busy_s += dt
                    self.flash_bytes_read += per_chunk
                    if self.prefetch_spans is not None:
                        self.prefetch_spans.append((env.now - dt, env.now, p.index, per_chunk))
                self._prefetch_event((p.index, c)).succeed()

    def stream(self) -> Generator[simpy.Event, Any, None]:
        """Process: send every streamed pass's chunks down, in program order."""
        env, out = self.env, self.out
        assert out is not None
        for p in self.streamed:
            kp = self._kernel(p)
            n = kp.n_chunks
            cause, cause_wait, queued = "stream", 0.0, 0.0
            if p.waits_for_update:
                done = self.optimizer.done_event(kp.state_owner, p.step - 1)
                if not done.triggered:
                    self.update_waits.append((p.index, kp.state_owner, p.step - 1))
                    t0 = env.now
                    yield done
                    cause, cause_wait = "update", env.now - t0
                    job = next(
                        j for j in reversed(self.optimizer.jobs) if j.kernel == kp.state_owner and j.kind == "update"
                    )
                    queued = job.queued_s
            self.stream_start[p.index] = env.now
            bytes_c = kp.stream_bytes / n
            read_c = kp.read_bytes / n
            for c in range(n):
                if kp.tier == "flash":
                    ev = self._prefetch_event((p.index, c))
                    if not ev.triggered:
                        t0 = env.now
                        yield ev
                        if cause == "stream":
                            cause, cause_wait = "flash", env.now - t0
                t0 = env.now
                if self.net_out is None:
                    yield env.all_of([self.dram.transfer(read_c), env.timeout(bytes_c / self.net_Bps)])
                else:
                    yield env.all_of([self.dram.transfer(read_c), self.net_out.transfer(bytes_c)])
                dt = env.now - t0
                self.stream_busy_s += dt
                self.bytes_out += bytes_c
                if self.stream_spans is not None:
                    self.stream_spans.append((env.now - dt, env.now, p.index, bytes_c))
                self.bytes_read += read_c
                if kp.tier == "flash":
                    assert self.staging is not None
                    yield self.staging.put(self.staged_chunk_bytes[kp.index])
                chunk = Chunk(p.index, c, n, bytes_c, cause, cause_wait, queued, env.now + self.latency_s)
                cause, cause_wait, queued = "stream", 0.0, 0.0
                yield out.put(chunk)

    def receive(self) -> Generator[simpy.Event, Any, None]:
        """Process: collect summed gradient chunks; hand complete kernels to the optimizer."""
        env = self.env
        n_mb = self.settings.micro_batches
        while True:
            g = yield self.grad_inbox.get()
            if g.ready_at > env.now:
                yield env.timeout(g.ready_at - env.now)
            yield self.dram.transfer(g.bytes)  # the gradient intake lands the chunk in DRAM
            self.bytes_in += g.bytes
            if not g.last:
                continue
            p = self.program[g.pass_index]
            kp = self._kernel(p)
            # A tied kernel's gradient adds into its owner's accumulator; the owner's last one updates.
            kind = "update" if p.micro_batch == n_mb - 1 and kp.owns_state else "accumulate"
            first = p.micro_batch == 0 and not kp.shares_accumulator
            accumulated = n_mb > 1 or kp.shares_accumulator
            if kind == "update" and self.settings.global_norm:
                self._norm(p, kp)
                continue
            self.optimizer.submit(
                UpdateJob(kp.index, p.step, p.micro_batch, kind, kp.nnz, kp.state_tiers, env.now), first, accumulated
            )

    def _accumulated(self, kp: KernelStore) -> bool:
        """Whether the kernel's step gradient sits in the fp32 accumulator (micro-batches, or a tied kernel's)."""
        return self.settings.micro_batches > 1 or kp.shares_accumulator

    def _norm(self, p: Pass, kp: KernelStore) -> None:
        """Global-norm clipping: the kernel's share of the norm now; once every kernel's is in, its updates.

        The updates go in the order of the model's parameters (the order PyTorch's ``optimizer.step()`` walks
        them, and the order the next step streams them: an ASSUMPTION, docs/model.md), with a stand-in for each
        kernel the program leaves out (:class:`~wss.model.components.optimizer.UpdateJob`)."""
        env = self.env
        self.optimizer.submit(UpdateJob(kp.index, p.step, p.micro_batch, "norm", kp.nnz, kp.state_tiers, env.now),
                              False, self._accumulated(kp), clipped=True)
        held = self.held.setdefault(p.step, [])
        held.append(kp.index)
        if len(held) < self._awaited[p.step]:
            return
        del self.held[p.step]
        updates = sorted([(k, False) for k in held] + [(k, True) for k in self._left_out[p.step]])
        for k, stand_in in updates:
            ks = self.kernels[k]
            job = UpdateJob(k, p.step, p.micro_batch, "update", ks.nnz, ks.state_tiers, env.now, released_by=p.index,
                            stand_in=stand_in)
            self.optimizer.submit(job, False, self._accumulated(ks), clipped=True)


def _norm_kernels(program: list[Pass], settings: MemoryXSettings) -> tuple[dict[int, int], dict[int, tuple[int, ...]]]:
    """Per step: how many kernels' norm jobs the updates wait for (the state owners whose last micro-batch's
    gradient the program sends), and the owners it leaves out (folded blocks), whose updates are stand-ins."""
    last = settings.micro_batches - 1
    sent: dict[int, set[int]] = {}
    for p in program:
        if p.phase == "backward" and p.kernel is not None and p.micro_batch == last:
            sent.setdefault(p.step, set()).add(p.kernel)
    owners = [k.index for k in settings.kernels if k.owns_state]
    awaited = {step: sum(k in ks for k in owners) for step, ks in sent.items()}
    left_out = {step: tuple(k for k in owners if k not in ks) for step, ks in sent.items()}
    return awaited, left_out


class FlashPrefetch:
    """MemoryX's flash prefetch as a part of its own: a process reading flash-resident chunks into DRAM staging.

    It is MemoryX's (:meth:`MemoryX.prefetch`, its counters are MemoryX's), but starts after the links, so
    that SimPy runs the events due at the same time in the order the shipped baselines were recorded with.
    """

    def __init__(self, memoryx: MemoryX):
        self.memoryx = memoryx
        self.name = f"{memoryx.name}.prefetch"

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.memoryx.prefetch())] if self.memoryx.staging is not None else []

    def counters(self) -> dict[str, float]:
        return {}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of the run MemoryX's flash channel was busy (the prefetch's and the optimizer's flash
        updates: MemoryX counts them as ``<memoryx>.flash``)."""
        key = f"{self.memoryx.name}.flash"
        return {key: at.total(key) / at.seconds}

    def state(self) -> dict[str, Held]:
        return {}  # what it staged is MemoryX's (its DRAM's staging area)

    def waits(self) -> dict[int, str]:
        mx = self.memoryx
        names = {id(mx.staging): "MemoryX's DRAM staging area"} if mx.staging is not None else {}
        for (pass_index, chunk), ev in mx.prefetched.items():
            names[id(ev)] = f"the flash prefetch of chunk {chunk} of pass {pass_index}"
        return names
