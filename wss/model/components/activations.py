"""The activation store: where offloaded block inputs wait between a micro-batch's forward and backward.

With ``activation_checkpointing: offload`` the wafer writes each transformer block's input out over
its I/O during the forward pass (the wafer's outlet) and needs it back before the block's recompute
in the backward pass.  :meth:`ActivationStore.run` sends them back, in the order of the recomputes,
into the wafer's leaf link, where they share the link with the weight stream; the leaf link routes
them to the wafer's activation intake, whose bytes bound how far ahead they run.

Where the store sits and how fast it is is ``hardware.activation_store``:

* unlimited (the default, an ASSUMPTION): the block inputs end at the wafer's edge going out and
  come back as soon as the micro-batch's forward pass is done; only the wafer's edge, shared with
  weights and gradients, limits the traffic;
* limited: every byte going in or coming back also crosses the store's bandwidths
  (:class:`~wss.model.components.shared_bandwidth.SharedBandwidth`, each transfer through all of them
  at once).  For a store on the wafer's hosts that is one bandwidth of its own, shared by both
  directions; for MemoryX, its network ports (one per direction, shared with the weight stream and
  the gradient intake) and its DRAM, shared by every wafer.  A block input comes back only once all
  of it is stored.  ``copies`` is how many wafers' traffic the simulated wafer's bytes stand for on
  those shared parts (a folded cluster's one wafer stands for all of them).

The store's room is checked before the run (:mod:`wss.model.plan.activation_store`): a micro-batch's
block inputs leave the store before the next micro-batch's arrive, so the peak is one micro-batch.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import simpy

from wss.model.components.links import ByteStore, Chunk
from wss.model.components.part import Held, Process
from wss.model.components.shared_bandwidth import SharedBandwidth

__all__ = ["ActivationReturn", "ActivationStoreSettings", "ActivationStore"]


@dataclass(frozen=True)
class ActivationReturn:
    """One block input to send back: for the recompute pass ``pass_index`` of ``(step, micro_batch)``, the
    input the wafer sent out at the forward pass ``sent_pass``."""

    step: int
    micro_batch: int
    pass_index: int
    bytes: float
    n_chunks: int
    sent_pass: int = -1


@dataclass(frozen=True)
class ActivationStoreSettings:
    """The returns in program order; with a limited store, its intake buffer and the copies its bytes stand for.

    Parameters
    ----------
    returns
        The block inputs to send back, in program order.
    intake_bytes
        The buffer in front of a limited store for block inputs arriving (credit flow control).
    copies
        Wafers whose traffic each byte stands for on the store's bandwidths (1 for a store per wafer).
    """

    returns: tuple[ActivationReturn, ...]
    name: str = "activations"
    intake_bytes: int = 1
    copies: float = 1.0


class ActivationStore:
    """Keeps offloaded block inputs and sends them back once the wafer's forward pass of that micro-batch is done.

    ``writes`` and ``reads`` are the bandwidths a byte going in and a byte coming back cross (empty: an
    unlimited store, which keeps no intake and needs only :meth:`run`).
    """

    def __init__(self, env: simpy.Environment, settings: ActivationStoreSettings,
                 forward_done: Mapping[tuple[int, int], simpy.Event],
                 writes: tuple[SharedBandwidth, ...] = (), reads: tuple[SharedBandwidth, ...] = ()):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.forward_done = forward_done
        self.writes, self.reads = writes, reads
        self.inbox: simpy.Store | None = None
        self.bytes = 0.0  # bytes sent back to the wafer
        self.bytes_stored = 0.0  # bytes taken in (a limited store only)
        #: A limited store's intake: the wafer's leaf link delivers offloaded chunks here.
        self.intake: ByteStore | None = ByteStore(env, settings.intake_bytes) if self.limited else None
        #: forward pass index -> succeeds when that block input is all stored (a limited store only).
        self.stored: dict[int, simpy.Event] = (
            {r.sent_pass: env.event() for r in settings.returns if r.sent_pass >= 0} if self.limited else {}
        )

    @property
    def limited(self) -> bool:
        """Does the store have bandwidths of its own (else only the wafer's edge limits offload)?"""
        return bool(self.writes or self.reads)

    def processes(self) -> list[tuple[str, Process]]:
        """Sending back, and (a limited store) taking in."""
        sending = [(self.name, self.run())]
        return [*sending, (self.name + ".absorb", self.absorb())] if self.limited else sending

    def counters(self) -> dict[str, float]:
        """Bytes taken in and sent back (a limited store only: the default store keeps the counters it had)."""
        if not self.limited:
            return {}
        return {self.name + ".bytes_stored": self.bytes_stored, self.name + ".bytes_returned": self.bytes}

    def waits(self) -> dict[int, str]:
        names = {id(self.intake): f"the intake of {self.name}'s store"} if self.intake is not None else {}
        for index, ev in self.stored.items():
            names[id(ev)] = f"{self.name}'s store to hold the block input of pass {index}"
        return names

    def state(self) -> dict[str, Held]:
        """A limited store's :meth:`waiting` (the default store's state is its wafer's edge's)."""
        return {self.name + ".intake": Held(self.waiting())} if self.limited else {}

    def connect(self, inbox: simpy.Store) -> None:
        """Wire the leaf link's inbox the returns go into."""
        self.inbox = inbox

    def _cross(self, via: tuple[SharedBandwidth, ...], nbytes: float) -> simpy.Event:
        """Move ``nbytes`` through every bandwidth of ``via`` at once, for each of the copies (one fair share each)."""
        copies = self.settings.copies
        if len(via) == 1:
            return via[0].transfer(nbytes * copies, copies)
        return self.env.all_of([bw.transfer(nbytes * copies, copies) for bw in via])

    def absorb(self) -> Generator[simpy.Event, Any, None]:
        """Process (a limited store): take in arriving chunks through the store's bandwidths."""
        env, intake = self.env, self.intake
        assert intake is not None, f"{self.name} keeps no intake"
        while True:
            chunk: Chunk = yield intake.get()
            if chunk.ready_at > env.now:
                yield env.timeout(chunk.ready_at - env.now)
            yield self._cross(self.writes, chunk.bytes)
            self.bytes_stored += chunk.bytes
            if chunk.last and chunk.pass_index in self.stored:
                self.stored[chunk.pass_index].succeed()

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: send every block input back, in the order the recomputes need them."""
        assert self.inbox is not None, f"{self.name} is not connected"
        limited = self.limited
        for r in self.settings.returns:
            yield self.forward_done[(r.step, r.micro_batch)]
            # A block input whose forward pass a layer fold left out was sent by a copy: nothing to wait for.
            waits = limited and r.sent_pass in self.stored
            if waits:
                yield self.stored[r.sent_pass]
            per = r.bytes / r.n_chunks
            for c in range(r.n_chunks):
                if limited:
                    yield self._cross(self.reads, per)
                yield self.inbox.put(Chunk(r.pass_index, c, r.n_chunks, per, ready_at=self.env.now,
                                           kind="activation"))
                self.bytes += per

    def waiting(self) -> int:
        """Chunks waiting in the intake (part of the state fold checks compare).

        How many block inputs the store holds is not: it grows block by block through a forward pass and
        shrinks through the backward, and changes no timing (every one a return waits for is stored, or in
        the intake, a link or a transfer, which the checks compare).
        """
        return len(self.intake.items) if self.intake is not None else 0
