"""Offloaded block inputs coming back over the wafer's edge, on the wire the weights stream over.

With ``activation_checkpointing: offload`` the store sends a micro-batch's block inputs back once its forward
pass is done, one block ahead of the recomputes: the last block's input at once, each earlier one when the wafer
takes the input before it (its intake holds one block input).  They come on a second channel of the wafer's leaf
edge, and the two channels take turns on one wire, a chunk each (docs/model.md, "Activation offload").  So
while a block input is on its way the weights lose the wire for one activation chunk after each of theirs: a
stream-bound pass (a mixture-of-experts block's experts, recomputed just after the block's input was taken)
slows by up to an activation chunk per weight chunk, and only the time the weights leave the wire idle (their
buffers full) is free.  Priced over a whole micro-batch, as the spare time of the edge, the returns look free
wherever the backward sweep is compute-bound; they are not, because they come when the recompute needs the
wire.

In fluid form, per pass, with ``s`` a weight chunk's time on the slowest stage down, ``e`` its time on the
wire and ``a`` an activation chunk's time on the wire: while block inputs wait, a weight chunk takes
``s + slow`` with ``slow = max(0, e + a - s)`` (the activation chunk fits in the gap a slower stage upstream
leaves, or delays the next weight chunk), so the stream moves at ``q = s / (s + slow)`` of its pace and the
block inputs at ``r = (s + slow - e) / (s + slow)`` of the wire's.  Stream work ``X`` then takes
``X + min(X k1, R k2)`` with ``R`` the block inputs' wire time still to go, ``k1 = slow / s`` and
``k2 = slow / (s + slow - e)`` (the slowdown lasts while they do); the block inputs have every moment of the
wire the weights do not use (``e / s`` of each second of stream progress).  A pass that begins a block's
recompute first waits for the rest of its block's input.  A pass with nothing to stream takes the figures of
the next pass that streams (its stream is the one running ahead).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["WIRE", "wire_figures", "wire_source", "streaming", "returns_per_token", "returns_matter"]

#: The per-pass figures of the shared wire (:func:`wire_figures`): the stream's extra seconds per second of
#: stream work (k1) and per second of block input (k2) while block inputs wait, the stream's rate (q) and the
#: block inputs' (r) while both send, and the weights' seconds on the wire per second of stream progress.
WIRE = ("wire_k1", "wire_k2", "wire_q", "wire_r", "wire_share")


def wire_figures(stream_s: np.ndarray, chunks: np.ndarray, stream_bytes: np.ndarray, edge_Bps: float,
                 act_chunk_s: float) -> dict[str, np.ndarray]:
    """Per pass, how block inputs on the wafer's edge slow its stream (:data:`WIRE`; see the module docstring).

    ``stream_s``, ``chunks`` and ``stream_bytes`` are each pass's (zero where nothing streams), ``edge_Bps``
    the wafer's leaf edge and ``act_chunk_s`` an activation chunk's time on it."""
    n = chunks.size
    streams = streaming(stream_s, chunks)
    s = np.divide(stream_s, chunks, out=np.ones(n), where=streams)
    e = np.divide(stream_bytes / edge_Bps, chunks, out=np.zeros(n), where=streams)
    slow = np.where(streams, np.maximum(0.0, e + act_chunk_s - s), 0.0)
    out = {"wire_k1": slow / s, "wire_k2": slow / (s + slow - e),
           "wire_q": s / (s + slow), "wire_r": (s + slow - e) / (s + slow), "wire_share": e / s}
    source = wire_source(stream_s, chunks)  # a pass with nothing to stream runs ahead on the next one's figures
    return {k: v[source] for k, v in out.items()}


def streaming(stream_s: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """The passes that stream weights."""
    return (chunks > 0) & (stream_s > 0)


def wire_source(stream_s: np.ndarray, chunks: np.ndarray) -> np.ndarray:
    """Per pass, the pass whose figures on the wire it has: itself if it streams, else the next that does (the
    stream running ahead is that one's; micro-batches repeat, so the last passes wrap round to the first)."""
    at = np.flatnonzero(streaming(stream_s, chunks))
    if not at.size:
        return np.arange(chunks.size)
    return at[np.searchsorted(at, np.arange(chunks.size)) % at.size]


def returns_per_token(pos: np.ndarray, phase: np.ndarray, block_inputs: Mapping[int, float],
                      edge_Bps: float) -> tuple[np.ndarray, np.ndarray]:
    """Per pass (its op's position and its phase, in execution order): the edge seconds per token of block input
    that start coming back as it begins, and whether it waits for its block's input (the first op of a block,
    recomputed).

    ``block_inputs`` maps the op starting each offloaded block to its input's bytes per token.  The first input
    back is the first recomputed block's, as the forward pass ends; each later one when the wafer takes the
    one before it."""
    added = np.zeros(pos.size)
    takes = (phase == 1) & np.isin(pos, np.fromiter(block_inputs, dtype=np.int64, count=len(block_inputs)))
    at = np.flatnonzero(takes)
    if at.size:
        starts = np.concatenate(([np.flatnonzero(phase != 0)[0]], at[:-1]))
        added[starts] = np.array([block_inputs[p] for p in pos[at].tolist()]) / edge_Bps
    return added, takes


def returns_matter(wire: tuple[np.ndarray, ...], return_s: np.ndarray, takes: np.ndarray,
                   compute_s: np.ndarray) -> bool:
    """Could the block inputs coming back change any pass of a micro-batch with these passes' seconds?

    Not if no pass slows while they do (``k1 = 0``: each activation chunk fits in a gap of the stream) and each
    block input is back before its recompute even if every pass took only its compute (the block inputs drain
    at least at ``r`` of every second of every pass): then the sweep is the one without offload, exactly.
    ``return_s`` is in seconds (this micro-batch's tokens), ``wire`` the :data:`WIRE` figures."""
    k1, _, _, r, _ = wire
    if (k1 > 0).any():
        return True
    drained = np.concatenate(([0.0], np.cumsum(r * compute_s)))
    added, needed = np.flatnonzero(return_s > 0), np.flatnonzero(takes)  # one of each per block, in order
    return bool((return_s[added] > drained[needed[:added.size]] - drained[added]).any())
