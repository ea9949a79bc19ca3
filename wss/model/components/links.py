"""Links: store-and-forward hops with bounded buffers.

A :class:`Link` takes chunks from its inbox, serialises each at the link's
bandwidth, and hands it to the next stage's inbox stamped to arrive one hop
latency later.  Serialisation occupies the link; flight latency does not, so
chunks pipeline through a chain of links.  Inboxes are buffers of a given
size in bytes (:class:`ByteStore`, credit flow control): a chunk waits until
its bytes fit, which is how back-pressure reaches MemoryX.  Buffers are
hardware (a SwarmX port's, a wafer's ingress), so how finely the simulation
cuts a kernel into chunks does not change how much data can be in flight.

A chain of ``L`` equal links carrying ``n`` chunks of ``c`` bytes at
bandwidth ``B`` and latency ``h`` finishes at ``L (h + c/B) + (n - 1) c/B``.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, Protocol

import simpy

from wss.model.components.part import Held, Process, Reading, Track
from wss.model.components.shared_bandwidth import SharedBandwidth
from wss.model.components.simpy_internals import FastResource, FastStore
from wss.model.machine.figures import MIN_CHUNKS_BUFFERED

__all__ = ["ByteStore", "Chunk", "Inlet", "Link"]


class Inlet(Protocol):
    """Where a link delivers: a buffer (a :class:`ByteStore`), or a SwarmX node's broadcast or reduction
    (:mod:`wss.model.components.swarmx_tree`).  The put's event succeeds when the chunk is taken."""

    def put(self, item: Any) -> simpy.Event: ...


@dataclass(eq=False)
class Chunk:
    """A piece of one pass in flight: weights down, gradients up, or offloaded activations either way.

    ``kind`` is ``'weights'`` (weights or gradients, which follow the tree) or ``'activation'`` (a block
    input offloaded from the wafer or returning to it, which only crosses the wafer's own edge).
    """

    pass_index: int
    seq: int
    n_chunks: int
    bytes: float
    cause: str = "stream"
    cause_wait_s: float = 0.0
    queued_s: float = 0.0
    ready_at: float = 0.0
    kind: str = "weights"

    @property
    def last(self) -> bool:
        return self.seq == self.n_chunks - 1

    def copy(self) -> Chunk:
        """A copy of this chunk (as ``dataclasses.replace(self)``, without its per-field machinery: a tree node
        copies every chunk once per child)."""
        twin = Chunk.__new__(Chunk)
        twin.__dict__.update(self.__dict__)
        return twin


class ByteStore(FastStore):
    """A FIFO buffer of ``capacity_bytes``: a put waits until the item's bytes fit.

    Items carry ``.bytes``; the level counts whole bytes (rounded up), so no sum of
    fractions can leave a put blocked for ever.  Whatever their size, up to
    :data:`MIN_CHUNKS_BUFFERED` items are admitted (see there).  Its ``put`` and ``get``
    are :class:`~wss.model.components.simpy_internals.FastStore`'s: they are on every chunk of every hop.
    """

    def __init__(self, env: simpy.Environment, capacity_bytes: int):
        if capacity_bytes <= 0:
            raise ValueError("a buffer needs a positive size in bytes")
        super().__init__(env)
        self.capacity_bytes = int(capacity_bytes)
        self.level = 0

    def _admit(self, item: Any) -> bool:
        need = math.ceil(item.bytes)
        if len(self.items) < MIN_CHUNKS_BUFFERED or self.level + need <= self.capacity_bytes:
            self.items.append(item)
            self.level += need
            return True
        return False

    def _take(self) -> Any:
        item = self.items.pop(0)
        self.level -= math.ceil(item.bytes)
        return item


class Link:
    """One direction of one link class, folded over identical parallel links.

    Parameters
    ----------
    name
        Dotted scope name, e.g. ``swarmx.down.l2``.
    bandwidth_Bps
        Serialisation rate of one link, bytes/s.
    latency_s
        Flight time added after serialisation.
    buffer_bytes
        Bytes the inbox (the buffer in front of the link) holds.
    """

    def __init__(self, env: simpy.Environment, name: str, bandwidth_Bps: float, latency_s: float,
                 buffer_bytes: int):
        self.env = env
        self.name = name
        self.bandwidth_Bps = bandwidth_Bps
        self.latency_s = latency_s
        self.inbox = ByteStore(env, buffer_bytes)
        self.out: Inlet | None = None
        self.routes: dict[str, Inlet | None] = {}
        #: The physical wire, when another Link (a second channel on the same edge) shares it.
        self.wire: simpy.Resource | None = None
        #: Ports shared fairly with other traffic (processor sharing), when set: they replace ``bandwidth_Bps``.
        self.shared: SharedBandwidth | None = None
        self.busy_s = 0.0
        self.bytes = 0.0
        self.chunks = 0
        #: (start, end, pass_index, bytes) of every serialisation, when recording activity.
        self.spans: list[tuple[float, float, int, float]] | None = None
        #: (time, chunks waiting in the inbox) sampled at every take, when recording activity.
        self.occupancy: list[tuple[float, int]] | None = None
        #: Pass -> [busy seconds, bytes] of its chunks, when counting by pass (a drift fold's links: their copies
        #: repeat a block's passes, not a stretch of time).
        self.tally: dict[int, list[float]] | None = None
        #: The drifting world it belongs to (0: none; :mod:`wss.model.folding.drift`): its spans are on that world's
        #: axis, placed by the world's own block copies.
        self.world = 0

    def record(self) -> None:
        """Keep spans and buffer occupancy (for traces); off by default to save memory."""
        self.spans, self.occupancy = [], []

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.run())]

    def counters(self) -> dict[str, float]:
        return {self.name: self.busy_s, self.name + ".bytes": self.bytes}

    def waits(self) -> dict[int, str]:
        return {id(self.inbox): f"the inbox of {self.name}"}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of the run it was sending (a level's view: its busiest member's)."""
        return {self.name: at.total(self.name) / at.seconds}

    def track(self, process: str, thread: str) -> Track:
        """Its recorded chunk transfers as a trace's thread, with its busy and buffer counters under its name."""
        return Track(process, thread, self.spans or [], self.name, self.occupancy or ())

    def state(self) -> dict[str, Held]:
        """The chunks waiting in its inbox."""
        return {self.name + ".inbox": Held(len(self.inbox.items))}

    def connect(self, out: Inlet) -> None:
        """Wire the store (or the node) this link delivers into."""
        self.out = out

    def share_wire(self, other: Link) -> None:
        """Make this link and ``other`` two channels of one wire: they take turns serialising, in the
        order they ask, and neither blocks the other while it waits for room downstream."""
        wire = self.wire or other.wire or FastResource(self.env, capacity=1)
        self.wire = other.wire = wire

    def route(self, kind: str, out: Inlet | None) -> None:
        """Deliver chunks of ``kind`` into ``out`` instead (``None``: they end here, e.g. offloaded activations
        leaving the wafer's edge for the activation store)."""
        self.routes[kind] = out

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: forward chunks for ever (the loop for how it is wired, chosen as it starts: wire it first)."""
        assert self.out is not None, f"{self.name} is not connected"
        if self.wire is None and self.shared is None and not self.routes:
            return self._run_plain(self.out)
        return self._run_any(self.out)

    def _run_plain(self, out: Inlet) -> Generator[simpy.Event, Any, None]:
        """:meth:`_run_any` for a link with a wire of its own, its own bandwidth and one destination (every SwarmX
        edge): the same events, with less to decide per chunk."""
        env, items = self.env, self.inbox.items
        get, timeout, bandwidth, latency = self.inbox.get, env.timeout, self.bandwidth_Bps, self.latency_s
        while True:
            chunk = yield get()
            if self.occupancy is not None:
                self.occupancy.append((env.now, len(items)))
            moved = chunk.bytes
            dt = moved / bandwidth
            # Wait out the flight of the previous hop and serialise in one event.
            flight = chunk.ready_at - env.now
            yield timeout((flight if flight > 0.0 else 0.0) + dt)
            now = env.now
            self.busy_s += dt
            self.bytes += moved
            if self.spans is not None:
                self.spans.append((now - dt, now, chunk.pass_index, moved))
            if self.tally is not None:
                self._count(chunk.pass_index, dt, moved)
            self.chunks += 1
            chunk.ready_at = now + latency
            yield out.put(chunk)

    def _count(self, pass_index: int, dt: float, moved: float) -> None:
        """Add a transfer to :attr:`tally`."""
        assert self.tally is not None
        t = self.tally.get(pass_index)
        if t is None:
            self.tally[pass_index] = [dt, moved]
        else:
            t[0] += dt
            t[1] += moved

    def _run_any(self, out: Inlet) -> Generator[simpy.Event, Any, None]:
        """Forward chunks for ever, over a wire shared with another channel, ports shared fairly or routes by kind."""
        env = self.env
        get, timeout, bandwidth, latency = self.inbox.get, env.timeout, self.bandwidth_Bps, self.latency_s
        while True:
            chunk = yield get()
            if self.occupancy is not None:
                self.occupancy.append((env.now, len(self.inbox.items)))
            dt = chunk.bytes / bandwidth
            wire, shared = self.wire, self.shared
            if wire is None and shared is None:
                # Wait out the flight of the previous hop and serialise in one event.
                flight = chunk.ready_at - env.now
                yield timeout((flight if flight > 0.0 else 0.0) + dt)
            elif shared is not None:  # ports other traffic shares fairly: as long as the transfer takes
                if chunk.ready_at > env.now:
                    yield timeout(chunk.ready_at - env.now)
                t0 = env.now
                yield shared.transfer(chunk.bytes)
                dt = env.now - t0
            elif wire is not None:  # a shared wire: serialise only while holding it (each channel has its own buffers)
                if chunk.ready_at > env.now:
                    yield timeout(chunk.ready_at - env.now)
                with wire.request() as req:
                    yield req
                    yield timeout(dt)
            now = env.now
            self.busy_s += dt
            self.bytes += chunk.bytes
            if self.spans is not None:
                self.spans.append((now - dt, now, chunk.pass_index, chunk.bytes))
            if self.tally is not None:
                self._count(chunk.pass_index, dt, chunk.bytes)
            self.chunks += 1
            chunk.ready_at = now + latency
            if self.routes and chunk.kind in self.routes:
                target = self.routes[chunk.kind]
                if target is not None:
                    yield target.put(chunk)
                continue
            yield out.put(chunk)
