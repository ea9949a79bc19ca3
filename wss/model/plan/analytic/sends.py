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

__all__ = ["send_waits"]


def send_waits(pos: np.ndarray, phase: np.ndarray, took_s: np.ndarray, block_inputs: Mapping[int, float],
               tokens: int, edge_Bps: float, buffer_bytes: int, chunk_bytes: float) -> float:
    """Seconds a micro-batch's forward pass waits for its block inputs to leave SRAM (module docstring).

    ``pos``, ``phase`` and ``took_s`` are each pass's op position, phase (0 forward) and seconds, in execution
    order; ``block_inputs`` maps the op starting each offloaded block to its input's bytes per token;
    ``buffer_bytes`` is the buffer in front of the edge going up and ``chunk_bytes`` an offload chunk's
    largest size."""
    forward = phase == 0
    fpos = pos[forward]
    starts = np.flatnonzero(np.isin(fpos, np.fromiter(block_inputs, dtype=np.int64, count=len(block_inputs))))
    if starts.size < 2:
        return 0.0
    done = np.concatenate(([0.0], np.cumsum(took_s[forward])))
    work = (done[starts[1:]] - done[starts[:-1]]).tolist()  # each block's forward seconds but the last's
    sent = [block_inputs[p] * tokens for p in fpos[starts].tolist()]
    t = edge = waits = 0.0
    for k, nbytes in enumerate(sent[:-1]):
        # The buffer admits at least MIN_CHUNKS_BUFFERED chunks, and the wire holds one more.
        chunk = nbytes / max(1, math.ceil(nbytes / chunk_bytes))
        held = (max(buffer_bytes, MIN_CHUNKS_BUFFERED * chunk) + chunk) / edge_Bps
        edge = max(edge, t) + nbytes / edge_Bps
        ready = t + work[k]
        t = max(ready, edge - held)
        waits += t - ready
    return waits
