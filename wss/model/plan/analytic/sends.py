"""Offloaded block inputs going out over the wafer's edge during the forward pass, block by block.

With ``activation_checkpointing: offload`` each block's forward pass begins by sending the block's input out
of the wafer (docs/model.md, "Activation offload").  SRAM holds one outgoing block input, so a block's forward
pass cannot begin until the previous block's input has left SRAM: until all of it is in the buffer in front of
the wafer's leaf edge going up (``hardware.swarmx.port_buffer_bytes``) or on the wire.  The sends are paced
block by block inside the forward pass, not over the micro-batch: where a block's input takes longer on the
edge than the block's forward pass, every later block starts late by the difference, however idle the edge
is in the backward sweep (a 90%-sparse GPT-3 6.7B of 64 sequences per wafer: 7.2 ms per block input on a
CS-2's edge, 3.6 ms per block's forward pass).

In fluid form, with ``f_k`` block ``k``'s forward seconds (each pass the longer of its paced compute and its
stream, as :meth:`~wss.model.plan.analytic.model.StepModel.forward_starts` takes them), ``a_k`` its input's
seconds on the edge and ``c_k`` the seconds of edge the buffer and the chunk on the wire hold: block ``k + 1``
starts at ``max(t_k + f_k, L_k - c_k)`` with ``L_k = max(L_{k-1}, t_k) + a_k`` when the edge is done with
block ``k``'s input.  The waits are what the forward pass adds.  Gradients still going up from an earlier
micro-batch and a slower activation store are left to the micro-batch's own terms
(:func:`~wss.model.plan.analytic.step._offload_s`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from wss.model.machine.figures import MIN_CHUNKS_BUFFERED

__all__ = ["Sends", "send_waits"]


class Sends:
    """The blocks of one schedule's forward pass whose inputs go out: where each starts and its input's bytes per
    token, found once per schedule (every micro-batch size then costs one cumulative sum and a line per block)."""

    def __init__(self, pos: np.ndarray, phase: np.ndarray, block_inputs: Mapping[int, float], edge_Bps: float,
                 buffer_bytes: int, chunk_bytes: float):
        """``pos`` and ``phase``: each pass's op position and phase (0 forward), in execution order;
        ``block_inputs`` maps the op starting each offloaded block to its input's bytes per token;
        ``buffer_bytes`` is the buffer in front of the edge going up and ``chunk_bytes`` an offload chunk's
        largest size."""
        self.forward = phase == 0
        fpos = pos[self.forward]
        starts = np.flatnonzero(np.isin(fpos, np.fromiter(block_inputs, dtype=np.int64, count=len(block_inputs))))
        self.starts = starts
        self.per_token = [block_inputs[p] for p in fpos[starts].tolist()]
        self.edge_Bps, self.buffer_bytes, self.chunk_bytes = edge_Bps, buffer_bytes, chunk_bytes

    def waits(self, took_s: np.ndarray, tokens: int) -> float:
        """Seconds a micro-batch of ``tokens`` tokens waits in its forward pass for its block inputs to leave SRAM
        (module docstring), each pass taking ``took_s`` (in execution order)."""
        starts = self.starts
        if starts.size < 2:
            return 0.0
        done = np.concatenate(([0.0], np.cumsum(took_s[self.forward])))
        work = (done[starts[1:]] - done[starts[:-1]]).tolist()  # each block's forward seconds but the last's
        edge_Bps, buffer_bytes, chunk_bytes = self.edge_Bps, self.buffer_bytes, self.chunk_bytes
        on_edge: dict[float, tuple[float, float]] = {}  # per size of block input: its seconds on the edge, and held
        for per_token in self.per_token:  # a model's blocks share a few sizes of input: each is worked out once
            if per_token not in on_edge:
                nbytes = per_token * tokens
                # The buffer admits at least MIN_CHUNKS_BUFFERED chunks, and the wire holds one more.
                chunk = nbytes / max(1, math.ceil(nbytes / chunk_bytes))
                on_edge[per_token] = (nbytes / edge_Bps,
                                      (max(buffer_bytes, MIN_CHUNKS_BUFFERED * chunk) + chunk) / edge_Bps)
        t = edge = waits = 0.0
        for k, per_token in enumerate(self.per_token[:-1]):
            sent, held = on_edge[per_token]
            edge = (edge if edge > t else t) + sent
            ready = t + work[k]
            late = edge - held
            t = late if late > ready else ready
            waits += t - ready
        return waits


def send_waits(pos: np.ndarray, phase: np.ndarray, took_s: np.ndarray, block_inputs: Mapping[int, float],
               tokens: int, edge_Bps: float, buffer_bytes: int, chunk_bytes: float) -> float:
    """Seconds a micro-batch's forward pass waits for its block inputs to leave SRAM (module docstring; see
    :class:`Sends` for the arguments, ``took_s`` each pass's seconds)."""
    return Sends(pos, phase, block_inputs, edge_Bps, buffer_bytes, chunk_bytes).waits(took_s, tokens)
