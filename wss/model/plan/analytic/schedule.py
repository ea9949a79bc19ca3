"""The passes of one micro-batch in execution order, and what about them does not depend on its size.

The order is the rule of :mod:`wss.model.program`, written again rather than imported so that a slip in
either copy shows as a disagreement with the simulator: forward 1..L, then backward L..1 with each
checkpointed block recomputed just before its backward.  A :class:`Schedule` holds, per pass, its kernel
(or none: a non-weight op), its stream and gradient times, its chunks, and the caps the buffers put on the
stream's lead and the gradients' lag (they follow the stream, not the micro-batch's size); and it cuts the
passes into segments, one per block and direction, numbered by class: two segments of one class (identical
blocks away from the ends) take the same time from the same lead and lag, which the sweep uses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from wss.model.plan.analytic.path import Path, Way
from wss.model.plan.analytic.returns import WIRE, returns_per_token, wire_figures, wire_source
from wss.model.plan.types import KernelPlan
from wss.model.workload import Op, WaferOp

__all__ = ["Schedule", "schedule", "pass_order"]


@dataclass(frozen=True)
class Schedule:
    """Per pass of one micro-batch (arrays in execution order), and its segments."""

    pos: np.ndarray  # op position
    kernel: np.ndarray  # kernel index, -1 for a non-weight op
    phase: np.ndarray  # 0 forward, 1 recompute, 2 backward
    stream_s: np.ndarray  # S (0 when nothing streams); a flash-resident kernel no faster than it is read
    up_s: np.ndarray  # U (0 unless gradients go up)
    chunks: np.ndarray  # chunks streamed (0 when nothing streams)
    up_chunks: np.ndarray  # gradient chunks sent up (0 unless backward)
    slots_in: np.ndarray  # chunks the wafer's intake holds (1 where nothing streams)
    flash_s: np.ndarray  # flash-channel seconds to prefetch this pass's weights
    flash_share: np.ndarray  # the part of a stream wait due to the prefetch (flash slower than the stream)
    lead_cap: np.ndarray  # the cap of the stream's lead when this pass begins
    lag_cap: np.ndarray  # the cap of the gradients' lag at this pass
    climb_s: np.ndarray  # a gradient chunk's delay to MemoryX beyond the pass's end (backward passes)
    up_chunk_s: np.ndarray
    segments: tuple[tuple[int, int, int], ...]  # (first pass, end, class)
    runs: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # consecutive segments of one class: (class, spans)
    backward_kernels: np.ndarray  # the kernel of each backward pass of a kernel, in execution order
    streamed_bytes: float  # weight bytes streamed into a wafer in one micro-batch
    # With activation offload (:mod:`~wss.model.plan.analytic.returns`): the edge seconds per token of block
    # input that start coming back as the pass begins, whether it waits for its block's input, and how block
    # inputs on the wire slow its stream (the WIRE figures, in that order).
    return_s: np.ndarray
    takes_input: np.ndarray
    wire: tuple[np.ndarray, ...]
    keys: np.ndarray  # each pass's class of pass (what makes it take the time it takes), numbered
    # With offload: the classes of segments that neither bring a block input back nor wait for one -> their
    # class without offload (entered with no block input on the wire, they are those segments)
    plain_classes: Mapping[int, int] = dataclasses.field(default_factory=dict)


def pass_order(ops: Sequence[Op], recompute: bool) -> list[tuple[int, int]]:
    """(op position, phase) of every pass of one micro-batch: 0 forward, 1 recompute, 2 backward."""
    out = [(pos, 0) for pos in range(len(ops))]
    blocks: dict[int, list[int]] = {}
    for pos, op in enumerate(ops):
        if op.block is not None:
            blocks.setdefault(op.block, []).append(pos)
    done: set[int] = set()
    for pos in range(len(ops) - 1, -1, -1):
        b = ops[pos].block
        if recompute and b is not None and b not in done:
            done.add(b)
            out += [(r, 1) for r in blocks[b]]
        out.append((pos, 2))
    return out


#: Windows up to this many chunks are summed chunk by chunk (equal windows give equal sums, so identical blocks
#: get identical caps); longer ones (very deep buffers) from prefix sums.
DIRECT_WINDOW = 256


def _windows(times: np.ndarray, slots: np.ndarray, at: np.ndarray, ahead: bool) -> np.ndarray:
    """Sum of chunk times over a window of ``slots[at]`` chunks for each index in ``at``.

    ``ahead``: the window begins at the chunk and looks forward; otherwise it ends at the chunk
    and looks back.  Micro-batches repeat, so the sequence of chunks wraps around."""
    if not times.size:
        return np.zeros(len(at))
    n = times.size
    reps = int(slots.max()) // n + 1
    tiled = np.tile(times, 2 * reps + 1)
    i = reps * n + at % n  # a copy of each chunk with room on both sides
    k = slots[i % n]
    width = int(k.max())
    if width <= DIRECT_WINDOW:
        j = np.arange(width)
        idx = i[:, None] + j[None, :] if ahead else i[:, None] - j[None, :]
        return np.where(j[None, :] < k[:, None], tiled[idx], 0.0).sum(axis=1)
    prefix = np.concatenate(([0.0], np.cumsum(tiled)))
    return prefix[i + k] - prefix[i] if ahead else prefix[i + 1] - prefix[i + 1 - k]


def _caps(sched: dict[str, np.ndarray], slots_down: np.ndarray, slots_up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What the buffers can hold, per pass: the stream work past the slowest stage down from its first chunk on
    (the cap of the lead), and the gradient work up to the slowest stage up ending with its last gradient chunk
    (the cap of the lag).  Buffers count chunks, so with chunks of different sizes the caps follow the chunks
    actually queued."""
    chunks, up_chunks = sched["chunks"], sched["up_chunks"]
    per_chunk = np.divide(sched["stream_s"], chunks, out=np.zeros(chunks.size), where=chunks > 0)
    per_up = np.divide(sched["up_s"], up_chunks, out=np.zeros(chunks.size), where=up_chunks > 0)
    starts_down = np.concatenate(([0], np.cumsum(chunks)[:-1]))
    ends_up = np.cumsum(up_chunks) - 1
    lead = _windows(np.repeat(per_chunk, chunks), np.repeat(slots_down, chunks), starts_down, ahead=True)
    lag = _windows(np.repeat(per_up, up_chunks), np.repeat(slots_up, up_chunks), ends_up, ahead=False)
    return lead, lag


def _segments(ops: Sequence[Op], order: list[tuple[int, int]], keys: list[int]) -> tuple[tuple[int, int, int], ...]:
    """Cut the passes at every change of block or direction (a block's recompute goes with its backward), and
    number each segment by its class: the sequence of its passes' keys (each key numbered)."""
    classes: dict[tuple, int] = {}
    out = []
    start = 0
    for i in range(1, len(order) + 1):
        if i < len(order):
            (pos0, ph0), (pos, ph) = order[i - 1], order[i]
            same = ops[pos].block == ops[pos0].block and (ph == ph0 or (ph0 == 1 and ph == 2))
            if same:
                continue
        cls = classes.setdefault(tuple(keys[start:i]), len(classes))
        out.append((start, i, cls))
        start = i
    return tuple(out)


def _runs(segments: tuple[tuple[int, int, int], ...]) -> tuple[tuple[int, tuple[tuple[int, int], ...]], ...]:
    """Consecutive segments of one class, as (class, their spans): a run of identical blocks in one direction."""
    out: list[tuple[int, list[tuple[int, int]]]] = []
    for a, b, cls in segments:
        if out and out[-1][0] == cls:
            out[-1][1].append((a, b))
        else:
            out.append((cls, [(a, b)]))
    return tuple((cls, tuple(spans)) for cls, spans in out)


_COLUMNS = ("kernel", "stream_s", "up_s", "chunks", "up_chunks", "slots_in", "flash_s", "flash_share", "climb_s",
            "up_chunk_s", "slots_down", "slots_up", "bytes")


def _pass_row(op: Op, k: int, phase: int, kernels: Sequence[KernelPlan], ways: Sequence[Way], path: Path,
              retain_output: bool) -> dict[str, float]:
    """One pass's size-free figures (:data:`_COLUMNS`)."""
    row = dict.fromkeys(_COLUMNS, 0.0)
    row.update(kernel=k, slots_in=1, slots_down=1, slots_up=1)
    if isinstance(op, WaferOp):
        return row
    kp, w = kernels[k], ways[k]
    backward = phase == 2
    streamed = not (backward and retain_output and op.is_output)
    flash = kp.read_bytes / path.flash_read_Bps if streamed and kp.tier == "flash" else 0.0
    row.update(slots_down=w.slots_down, slots_up=w.slots_up, climb_s=w.climb_s, up_chunk_s=w.up_chunk_s)
    if streamed:  # a flash-resident kernel streams no faster than it is read
        row.update(stream_s=max(w.stream_s, flash), chunks=kp.n_chunks, slots_in=w.slots_in, flash_s=flash,
                   flash_share=max(0.0, 1.0 - w.stream_s / flash) if flash > 0 else 0.0, bytes=kp.stream_bytes)
    if backward:
        row.update(up_s=w.up_s, up_chunks=kp.n_chunks)
    return row


def _rows(ops: Sequence[Op], order: list[tuple[int, int]], kernel_of: dict[int, int], kernels: Sequence[KernelPlan],
          ways: Sequence[Way], path: Path, retain_output: bool) -> list[dict[str, float]]:
    """Every pass's :func:`_pass_row`, each distinct one worked out once (a model's blocks repeat: passes of
    one phase whose kernels share a way, a tier and their bytes have equal rows but for the kernel's index)."""
    made: dict[tuple, dict[str, float]] = {}
    rows = []
    for at, phase in order:
        op, k = ops[at], kernel_of.get(at, -1)
        if k < 0:
            key: tuple = (phase,)
        else:
            kp = kernels[k]
            key = (phase, id(ways[k]), kp.read_bytes, kp.stream_bytes, kp.grad_bytes, kp.n_chunks, kp.tier,
                   kp.kernel.is_output)
        if key not in made:
            made[key] = _pass_row(op, k, phase, kernels, ways, path, retain_output)
        row = dict(made[key])
        row["kernel"] = k
        rows.append(row)
    return rows


def schedule(ops: Sequence[Op], kernels: Sequence[KernelPlan], ways: Sequence[Way], path: Path, recompute: bool,
             retain_output: bool) -> Schedule:
    """The passes of one micro-batch with their size-free figures (see the module docstring); no block inputs
    come back (:func:`offloaded` adds them)."""
    order = pass_order(ops, recompute)
    kernel_of: dict[int, int] = {}
    for at, op in enumerate(ops):
        if not isinstance(op, WaferOp):
            kernel_of[at] = len(kernel_of)
    rows = _rows(ops, order, kernel_of, kernels, ways, path, retain_output)
    arr = {c: np.array([r[c] for r in rows], dtype=float) for c in _COLUMNS}
    for c in ("kernel", "chunks", "up_chunks", "slots_in", "slots_down", "slots_up"):
        arr[c] = arr[c].astype(np.int64)
    lead, lag = _caps(arr, arr["slots_down"], arr["slots_up"])
    lead_next = np.roll(lead, -1)  # the lead after a pass is capped by what the next pass's buffers hold
    phases = np.array([ph for _, ph in order], dtype=np.int64)
    wire = wire_figures(arr["stream_s"], arr["chunks"], arr["bytes"], path.edge_Bps,
                        path.offload_chunk_bytes / path.edge_Bps)
    ids: dict[tuple, int] = {}  # each pass's key as a small number, so that segments compare cheaply
    keys = [ids.setdefault(key, len(ids)) for key in _pass_keys(ops, kernels, order, arr, lead_next, lag)]
    segments = _segments(ops, order, keys)
    backward_kernel = (phases == 2) & (arr["kernel"] >= 0)
    return Schedule(
        pos=np.array([at for at, _ in order], dtype=np.int64), kernel=arr["kernel"], phase=phases,
        stream_s=arr["stream_s"], up_s=arr["up_s"], chunks=arr["chunks"], up_chunks=arr["up_chunks"],
        slots_in=arr["slots_in"], flash_s=arr["flash_s"], flash_share=arr["flash_share"], lead_cap=lead,
        lag_cap=lag, climb_s=arr["climb_s"], up_chunk_s=arr["up_chunk_s"], segments=segments, runs=_runs(segments),
        backward_kernels=arr["kernel"][backward_kernel], streamed_bytes=float(arr["bytes"].sum()),
        return_s=np.zeros(len(order)), takes_input=np.zeros(len(order), dtype=bool),
        wire=tuple(wire[c] for c in WIRE), keys=np.array(keys, dtype=np.int64),
    )


def offloaded(sched: Schedule, block_inputs: Mapping[int, float], edge_Bps: float) -> Schedule:
    """``sched`` (with recompute) with its blocks' inputs offloaded: they come back over the wafer's edge beside
    the weights (:mod:`~wss.model.plan.analytic.returns`).  ``block_inputs``: the op starting each offloaded
    block -> its input's bytes per token.  The passes and the segments' cuts stay; a pass's class now also
    follows the block inputs it brings back or waits for and its figures on the wire, which are those of the
    pass they come from (:func:`~wss.model.plan.analytic.returns.wire_source`), a function of its class."""
    return_s, takes = returns_per_token(sched.pos, sched.phase, block_inputs, edge_Bps)
    base = sched.keys
    n_keys = int(base.max()) + 1 if base.size else 1
    keys = (base * n_keys + base[wire_source(sched.stream_s, sched.chunks)]) * 2 + takes
    fetched = np.unique(return_s, return_inverse=True)[1].ravel()  # the few sizes of block input, numbered
    keys = (keys * (int(fetched.max()) + 1 if fetched.size else 1) + fetched).tolist()
    classes: dict[tuple, int] = {}
    segments = tuple((a, b, classes.setdefault(tuple(keys[a:b]), len(classes))) for a, b, _ in sched.segments)
    quiet = np.concatenate(([0], np.cumsum((return_s > 0) | takes)))  # passes that bring back or wait, so far
    plain = {cls: old for (a, b, cls), (_, _, old) in zip(segments, sched.segments) if quiet[b] == quiet[a]}
    return dataclasses.replace(sched, return_s=return_s, takes_input=takes, segments=segments, runs=_runs(segments),
                               keys=np.array(keys, dtype=np.int64), plain_classes=plain)


def _pass_keys(ops: Sequence[Op], kernels: Sequence[KernelPlan], order: list[tuple[int, int]],
               arr: dict[str, np.ndarray], lead_next: np.ndarray, lag: np.ndarray) -> list[tuple]:
    """What makes a pass take the time it takes from a given lead and lag, whatever the micro-batch's size:
    its phase, what it computes (a kernel's kind and non-zero profile, an op's FLOPs), its stream (bytes
    included) and gradient figures and its caps."""
    figures = np.stack([arr[c] for c in ("stream_s", "up_s", "chunks", "up_chunks", "slots_in", "flash_s",
                                          "flash_share", "climb_s", "up_chunk_s", "bytes")], axis=1)
    rows = [tuple(r) for r in figures.tolist()]
    caps = list(zip(lead_next.tolist(), lag.tolist()))
    keys = []
    for i, (pos, phase) in enumerate(order):
        op = ops[pos]
        if isinstance(op, WaferOp):
            work: tuple = ("op", op.flops_per_token, op.backward_factor)
        else:
            p = kernels[int(arr["kernel"][i])].profile
            dense = p.col_counts is None and p.row_counts is None
            kind = (op.kind, op.computed_share, op.tokens_per_input)  # what the profile computes on: see StepModel
            work = (*kind, p.out_features, p.in_features, p.nnz) if dense else (*kind, id(p))
        keys.append((phase, work, rows[i], caps[i]))
    return keys
