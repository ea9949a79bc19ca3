"""Links: store-and-forward hops with bounded buffers.

A :class:`Link` takes chunks from its inbox, serialises each at the link's
bandwidth, and hands it to the next stage's inbox stamped to arrive one hop
latency later.  Serialisation occupies the link; flight latency does not, so
chunks pipeline through a chain of links.  Inboxes hold a bounded number of
chunks (credit flow control): a full inbox blocks the sender, which is how
back-pressure reaches MemoryX.

A chain of ``L`` equal links carrying ``n`` chunks of ``c`` bytes at
bandwidth ``B`` and latency ``h`` finishes at ``L (h + c/B) + (n - 1) c/B``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

__all__ = ["Chunk", "Link"]


@dataclass(eq=False)
class Chunk:
    """A piece of one kernel pass in flight (weights down or gradients up)."""

    pass_index: int
    seq: int
    n_chunks: int
    bytes: float
    cause: str = "stream"
    cause_wait_s: float = 0.0
    queued_s: float = 0.0
    ready_at: float = 0.0

    @property
    def last(self) -> bool:
        return self.seq == self.n_chunks - 1


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
    capacity
        Chunks the inbox can hold.
    """

    def __init__(self, env: simpy.Environment, name: str, bandwidth_Bps: float, latency_s: float, capacity: int):
        self.env = env
        self.name = name
        self.bandwidth_Bps = bandwidth_Bps
        self.latency_s = latency_s
        self.inbox = simpy.Store(env, capacity=capacity)
        self.out: simpy.Store | None = None
        self.busy_s = 0.0
        self.bytes = 0.0
        self.chunks = 0
        #: (start, end, pass_index, bytes) of every serialisation, when recording activity.
        self.spans: list[tuple[float, float, int, float]] | None = None
        #: (time, chunks waiting in the inbox) sampled at every take, when recording activity.
        self.occupancy: list[tuple[float, int]] | None = None

    def record(self) -> None:
        """Keep spans and buffer occupancy (for traces); off by default to save memory."""
        self.spans, self.occupancy = [], []

    def connect(self, out: simpy.Store) -> None:
        """Wire the store this link delivers into."""
        self.out = out

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: forward chunks for ever."""
        env, out = self.env, self.out
        assert out is not None, f"{self.name} is not connected"
        while True:
            chunk = yield self.inbox.get()
            if self.occupancy is not None:
                self.occupancy.append((env.now, len(self.inbox.items)))
            dt = chunk.bytes / self.bandwidth_Bps
            # Wait out the flight of the previous hop and serialise in one event.
            yield env.timeout(max(chunk.ready_at - env.now, 0.0) + dt)
            self.busy_s += dt
            self.bytes += chunk.bytes
            if self.spans is not None:
                self.spans.append((env.now - dt, env.now, chunk.pass_index, chunk.bytes))
            self.chunks += 1
            chunk.ready_at = env.now + self.latency_s
            yield out.put(chunk)
