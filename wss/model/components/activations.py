"""The activation store: where offloaded block inputs wait between a micro-batch's forward and backward.

With ``activation_checkpointing: offload`` the wafer writes each transformer block's input out over
its I/O during the forward pass (the wafer's outlet; the leaf link ends those chunks at the wafer's
edge) and needs it back before the block's recompute in the backward pass.  This process sends
them back, in the order of the recomputes, into the wafer's leaf link, where they share the link
with the weight stream; the leaf link routes them to the wafer's activation intake, whose bytes
bound how far ahead they run.

Where the store sits is not published (the host or MemoryX): it is assumed to keep up, so only
the wafer's own edge, shared with weights and gradients, limits the traffic (docs/model.md,
"Activation offload").
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any

import simpy

from wss.model.components.links import Chunk

__all__ = ["ActivationReturn", "ActivationStoreSettings", "ActivationStore"]


@dataclass(frozen=True)
class ActivationReturn:
    """One block input to send back: for the recompute pass ``pass_index`` of ``(step, micro_batch)``."""

    step: int
    micro_batch: int
    pass_index: int
    bytes: float
    n_chunks: int


@dataclass(frozen=True)
class ActivationStoreSettings:
    """The returns in program order."""

    returns: tuple[ActivationReturn, ...]
    name: str = "activations"


class ActivationStore:
    """Sends offloaded block inputs back to the wafer once its forward pass of that micro-batch is done."""

    def __init__(self, env: simpy.Environment, settings: ActivationStoreSettings,
                 forward_done: Mapping[tuple[int, int], simpy.Event]):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.forward_done = forward_done
        self.inbox: simpy.Store | None = None
        self.bytes = 0.0

    def connect(self, inbox: simpy.Store) -> None:
        """Wire the leaf link's inbox the returns go into."""
        self.inbox = inbox

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: send every block input back, in the order the recomputes need them."""
        assert self.inbox is not None, f"{self.name} is not connected"
        for r in self.settings.returns:
            yield self.forward_done[(r.step, r.micro_batch)]
            per = r.bytes / r.n_chunks
            for c in range(r.n_chunks):
                yield self.inbox.put(Chunk(r.pass_index, c, r.n_chunks, per, ready_at=self.env.now,
                                           kind="activation"))
                self.bytes += per
