"""Folding identical layers: simulate a few transformer blocks of a run of identical ones, repeat the rest.

GPT-3 175B has 96 identical blocks.  Once the weight stream reaches its
steady state, one block's forward pass repeats the previous block's exactly
(the same chunks, the same compute, the same offloaded input), and so does
its recompute and backward pass, with its gradients and its update.  With
folding on, for a run of ``n`` identical consecutive blocks ``lo .. hi`` the
program keeps blocks ``lo .. lo+3`` and ``hi-3 .. hi`` and drops the
``n - 8`` between (:func:`~wss.model.plan.layer_runs.block_runs` finds the runs, :meth:`Plan.dropped_in
<wss.model.plan.types.Plan.dropped_in>` names what the program leaves out).  In every simulated micro-batch there are
then two *fold points* per run:

* forward: blocks ``lo``, ``lo+1`` settle, ``lo+2`` and ``lo+3`` are
  compared, and block ``lo+3``'s interval (from its first pass to the first
  pass of block ``hi-3``) is repeated ``n - 8`` times before block ``hi-3``;
* backward (in reverse order): ``hi``, ``hi-1`` settle, ``hi-2`` and ``hi-3``
  are compared, and ``hi-3``'s interval (its recompute, when checkpointing,
  and its backward passes) is repeated before block ``lo+3``.

Four blocks at each end is the run's ``settle`` (:class:`~wss.model.plan.layer_runs.BlockRun`) at first; where
wafers that differ (a straggler) take longer to fill the buffers between them, the ladder simulates more
(:mod:`wss.model.folding.ladder`), and the two compared blocks are then the last two of the longer stretch.
Where a later step's forward passes start behind the previous step's update backlog, the ladder simulates more
blocks at the low end only (the run's ``lead``): the forward fold then compares the last two of the ``head``
blocks there, and the backward fold's copies end before that head.  In a run of one simulated step, blocks the
forward passes alone need to settle (the run's ``forward_lead``) are simulated forward only: the backward fold's
copies stand for their backward passes too, and it runs on from the copies' end as it would from the end of any
shorter head (the forward passes of those blocks leave only their offloaded inputs behind, which no simulated
recompute reads).

The fold is checked, not assumed, as for micro-batches (:mod:`wss.model.folding.fold`):
at the starts of the two compared blocks and of the block after the copies,
everything queued or in flight must be the same, the two compared intervals
must be equally long and grow every counter and every cause of the wafer's
time alike (relative 1e-9).  Two dependencies reach across a fold point and
are checked too: a weight stream that waited for the previous step's update of
its kernel, where the copies lie between the update and the wait (the real run
has more slack there), and the wafer waiting for a later micro-batch's input
data (which arrives on its own schedule).  Either, or any difference, raises
:class:`~wss.model.folding.fold.FoldMismatch` and the caller simulates every block.

A part that falls further behind with every block (an optimizer whose updates run during the backward passes and
each outlast their kernel's share of a block: brain-120T without clipping) fails the check, and no longer stretch
settles it.  Its backlog repeats up to a shift, but comparing it so would not be exact: the updates share MemoryX's
flash channel and DRAM with the weight prefetch and the gradient intake, so what each takes depends on where it
falls against the block, and that moves from block to block (docs/model.md, "Known limits", identical layers).

After the run, :func:`unfold_layers` moves everything the run recorded (the
wafer's timeline and passes, the loss times, the optimizer's jobs, the
micro-batch snapshots) onto the axis with the copies in place, adding each
copy's timeline spans (marked with pass index :data:`COPY_PASS`), so the
micro-batch and step folds (:mod:`wss.model.folding.fold`, :mod:`wss.model.folding.step_fold`)
work on that axis unchanged.  A record of the copied block's passes (and of
its kernels' optimizer jobs) stands for itself and its copies (its
``repeats``), as a folded micro-batch's do.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wss.model.folding.fold import (
    REL_TOL,
    FoldMismatch,
    Snapshot,
    close,
    same_state,
    seconds_by_cause,
    state_differences,
)
from wss.model.plan.layer_runs import BlockRun
from wss.model.program import Pass, gradient_passes

if TYPE_CHECKING:
    from wss.model.components.optimizer import UpdateJob
    from wss.model.components.wafer import Wafer
    from wss.model.sim.cluster import Cluster

__all__ = ["FoldPoint", "LayerFold", "LayerFoldMismatch", "LayersFold", "COPY_PASS", "fold_points",
           "check_point", "check_wafer_blocks", "unfold_layers", "unfold_wafer", "unfold_jobs", "unfold_snapshots",
           "wafer_copies"]

#: Pass index of a timeline span that belongs to a folded copy (no simulated pass owns it).
COPY_PASS = -2


@dataclass(frozen=True)
class FoldPoint:
    """One place in the program where copies go: passes ``a`` and ``b`` start the two compared blocks,
    ``c`` is the first pass simulated after the copies (``[b, c)`` is the interval every copy repeats)."""

    step: int
    micro_batch: int
    direction: str  # "forward" or "backward"
    a: int
    b: int
    c: int
    copies: int


class LayerFoldMismatch(FoldMismatch):
    """Folded blocks do not give the real run's answer: a fold point's blocks do not repeat (``direction`` says in
    which passes, "forward" or "backward", and ``micro_batch`` in which micro-batch), or a wait reaches across
    copies (``direction`` "", ``micro_batch`` None).

    ``settled_late``: the first compared block started from other queues than the second, while the second's were
    those after the copies: the run settled, one block or more after the stretch simulated to let it settle, rather
    than drifting with every block (the ladder then simulates a longer stretch: :mod:`wss.model.folding.ladder`).
    ``step``: the step the fold point lay in.  ``drains_in``: where the queues differed, how many blocks after the
    second compared one its falling queued counts would take to empty at the pace they fell (:func:`_drains_in`),
    None where none fell.  ``settles``: in an uneven slot, smaller shards whose lead runs out within the stretch
    simulated or over the copies (:mod:`wss.model.folding.drift`): a longer stretch may see them back in step with
    the largest, where an ordinary fold holds (the ladder tries one).  ``fills``: the queued counts that differed
    only rose from one block's start to the next (:func:`_fills`): in the forward passes of a first step, buffers
    filling (block inputs leaving for a store slower than the wafer makes them), which stop rising once full.
    ``queued``: the blocks differed in what was queued at their starts (not in their lengths or what they spent),
    the way a stream's start settles."""

    def __init__(self, message: str, direction: str, micro_batch: int | None = None, settled_late: bool = False,
                 step: int | None = None, drains_in: int | None = None, settles: bool = False, fills: bool = False,
                 queued: bool = False):
        # All in args: SimPy re-raises a process's exception.
        super().__init__(message, direction, micro_batch, settled_late, step, drains_in, settles, fills, queued)
        self.message, self.direction, self.micro_batch = message, direction, micro_batch
        self.settled_late, self.step, self.drains_in, self.settles = settled_late, step, drains_in, settles
        self.fills, self.queued = fills, queued

    def __str__(self) -> str:
        return self.message


def fold_points(program: Sequence[Pass], ops: Sequence, runs: Sequence[BlockRun],
                directions: Sequence[str] = ("forward", "backward"),
                unfolded: Collection[int] = frozenset()) -> list[FoldPoint]:
    """Every fold point of the program in ``directions``, in program order; none in the micro-batches
    ``unfolded``, whose every block is simulated (:attr:`Plan.blocks_unfolded_in
    <wss.model.plan.types.Plan.blocks_unfolded_in>`)."""
    firsts: dict[tuple[int, int, str, int], int] = {}  # (step, mb, direction, block) -> its first pass
    for p in program:
        block = ops[p.op].block
        if block is not None:
            direction = "forward" if p.phase == "forward" else "backward"
            firsts.setdefault((p.step, p.micro_batch, direction, block), p.index)
    points = []
    for step, mb in dict.fromkeys((p.step, p.micro_batch) for p in program if p.micro_batch not in unfolded):
        for r in runs:
            h, hb, k = r.head, r.low_end("backward"), r.settle
            fw = [firsts.get((step, mb, "forward", b), -1) for b in (r.lo + h - 2, r.lo + h - 1, r.hi - k + 1)]
            bw = [firsts.get((step, mb, "backward", b), -1) for b in (r.hi - k + 2, r.hi - k + 1, r.lo + hb - 1)]
            if "forward" in directions:
                points.append(FoldPoint(step, mb, "forward", fw[0], fw[1], fw[2], r.copies_in("forward")))
            if "backward" in directions:
                points.append(FoldPoint(step, mb, "backward", bw[0], bw[1], bw[2], r.copies_in("backward")))
    return sorted(points, key=lambda f: f.c)


@dataclass(frozen=True)
class LayerFold:
    """The copies inserted at one fold point, measured on the simulated axis."""

    point: FoldPoint
    at: float  # simulated time of pass ``c``'s start, where the copies go
    period: float  # one copy's length
    deltas: dict[str, float]  # counter growth per copy
    spans: tuple[tuple[float, float, str], ...]  # the wafer's spans of one copy, from the copy's start

    @property
    def copies(self) -> int:
        return self.point.copies


@dataclass(frozen=True)
class LayersFold:
    """All fold points of a run, in program order."""

    folds: tuple[LayerFold, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "_at", [f.point.c for f in self.folds])
        cumulative, total = [], 0.0
        for f in self.folds:
            total += f.copies * f.period
            cumulative.append(total)
        object.__setattr__(self, "_shift", cumulative)

    def shift(self, pass_index: int) -> float:
        """How far a simulated pass (and all it caused) moves on the axis with the copies in place."""
        i = bisect_right(self._at, pass_index)  # type: ignore[attr-defined]
        return self._shift[i - 1] if i else 0.0  # type: ignore[attr-defined]

    def total_shift(self) -> float:
        return self._shift[-1] if self.folds else 0.0  # type: ignore[attr-defined]

    def extra(self, counter: str, before_pass: int | None = None) -> float:
        """Growth of a counter from the copies (of the fold points before ``before_pass``, if given)."""
        return sum(f.copies * f.deltas.get(counter, 0.0) for f in self.folds
                   if before_pass is None or f.point.c <= before_pass)

    def repeats(self, pass_index: int) -> int:
        """How many passes a simulated pass's record stands for (its copies too)."""
        for f in self.folds:
            if f.point.b <= pass_index < f.point.c:
                return 1 + f.copies
        return 1


def check_point(fp: FoldPoint, snapshots: Mapping[int, Snapshot],
                timeline: Sequence[tuple[float, float, str, int]],
                ignore: Callable[[str], bool] | None = None) -> LayerFold:
    """Measure a fold point's period from the copied block and check it against the block before.

    ``snapshots`` hold those taken as the wafer started passes ``a``, ``b`` and ``c``; called as the wafer
    starts ``c``, so that a run whose blocks do not repeat stops there.  Counters and queues ``ignore`` names are
    left out (a drift fold's drifting world, checked on its own axis: :mod:`wss.model.folding.drift`).
    """
    sa, sb, sc = snapshots[fp.a], snapshots[fp.b], snapshots[fp.c]
    if ignore is not None:
        sa, sb, sc = (_without(x, ignore) for x in (sa, sb, sc))
    p_ab, p_bc = sb.time - sa.time, sc.time - sb.time
    where = f"step {fp.step}, micro-batch {fp.micro_batch}, {fp.direction}"
    for x, y in ((sa, sb), (sb, sc)):
        if not same_state(x.state, y.state, p_bc):
            late = x is sa and same_state(sb.state, sc.state, p_bc)
            raise LayerFoldMismatch(f"{where}: queues differ at the starts of two blocks "
                                    f"({state_differences(x.state, y.state, p_bc)})", fp.direction, fp.micro_batch,
                                    settled_late=late, step=fp.step, drains_in=_drains_in(sa, sb),
                                    fills=_fills(x, y), queued=True)
    if not close(p_ab, p_bc):
        raise LayerFoldMismatch(f"{where}: one block took {p_ab!r} s, the next {p_bc!r} s", fp.direction,
                                fp.micro_batch, step=fp.step)
    deltas = {}
    for key, end in sc.counters.items():
        if key.startswith("inputs"):  # input data arrives once per micro-batch, on its own schedule
            continue
        d1, d2 = sb.counters[key] - sa.counters[key], end - sb.counters[key]
        if not close(d1, d2) and max(abs(d1), abs(d2)) > REL_TOL * max(p_bc, 1e-300):
            raise LayerFoldMismatch(f"{where}: {key} grew by {d1!r} in one block but {d2!r} in the next",
                                    fp.direction, fp.micro_batch, step=fp.step)
        deltas[key] = d2
    first, second = timeline[sa.timeline_len:sb.timeline_len], timeline[sb.timeline_len:sc.timeline_len]
    c1, c2 = seconds_by_cause(first), seconds_by_cause(second)
    for cause in sorted(c1.keys() | c2.keys()):
        if abs(c1.get(cause, 0.0) - c2.get(cause, 0.0)) > REL_TOL * max(p_bc, 1e-300):
            raise LayerFoldMismatch(f"{where}: the wafer spent {c1.get(cause, 0.0)!r} s on {cause} in one "
                                    f"block but {c2.get(cause, 0.0)!r} s in the next", fp.direction,
                                    fp.micro_batch, step=fp.step)
    spans = tuple((a - sb.time, b - sb.time, cause) for a, b, cause, _ in second)
    return LayerFold(fp, sc.time, p_bc, deltas, spans)


def _without(snap: Snapshot, ignore: Callable[[str], bool]) -> Snapshot:
    """A snapshot without the counters and queues ``ignore`` names."""
    return Snapshot(snap.time, snap.timeline_len, {k: v for k, v in snap.counters.items() if not ignore(k)},
                    {k: v for k, v in snap.state.items() if not ignore(k)})


def _counts(snap: Snapshot) -> dict[str, int]:
    """The counts of things queued in a snapshot: its entries compared exactly that are whole numbers."""
    return {name: h.value for name, h in snap.state.items()
            if h.tolerance == "exact" and isinstance(h.value, int) and not isinstance(h.value, bool)}


def _fills(sa: Snapshot, sb: Snapshot) -> bool:
    """Did some count of things queued rise from ``sa`` to ``sb``, and none fall?"""
    a, b = _counts(sa), _counts(sb)
    moved = [b[name] - a[name] for name in a.keys() & b.keys() if b[name] != a[name]]
    return bool(moved) and min(moved) > 0


def _drains_in(sa: Snapshot, sb: Snapshot) -> int | None:
    """Blocks after the second compared one (``sb``) that the counts of things queued (the entries compared
    exactly, whole numbers: jobs or chunks waiting) would take to empty at the pace they fell from the first
    (``sa``): the most over the counts that fell; None where none did.  A guess the ladder tries, not an answer:
    the check decides."""
    a, b = _counts(sa), _counts(sb)
    most = None
    for name, nb in b.items():
        na = a.get(name)
        if na is not None and na > nb > 0:
            most = max(most or 0, -(-nb // (na - nb)))
    return most


#: One wafer's copies at each fold point: where they go on its own simulated axis (its start of pass ``c``) and
#: its spans of one copy, from the copy's start.
WaferCopies = list[tuple[float, tuple[tuple[float, float, str], ...]]]


def unfold_layers(cluster: Cluster, layers: LayersFold) -> None:
    """Move what a finished run recorded onto the axis with every fold point's copies in place.

    The wafer's timeline gains each copy's spans; its passes, loss times, the optimizer's jobs and the
    micro-batch snapshots move by the shift of the pass they belong to (a job: its gradient's pass), and
    the snapshots' counters grow by the copies before them.
    """
    new_index = unfold_wafer(cluster.wafer, cluster.program, layers, [(f.at, f.spans) for f in layers.folds])
    unfold_jobs(cluster.optimizer.jobs, cluster.program, layers)
    unfold_snapshots(cluster.folding.snapshots, cluster.program, layers, new_index)


def wafer_copies(timeline: Sequence[tuple[float, float, str, int]], marks: Mapping[int, tuple[float, int]],
                 layers: LayersFold, where: str) -> WaferCopies:
    """Another wafer's copies, from its own ``marks`` (pass -> its start time and timeline length): its
    compared blocks must be as long as the representative's period and split alike by cause
    (:func:`check_wafer_blocks`)."""
    out = []
    for f in layers.folds:
        check_wafer_blocks(timeline, marks, f, where)
        (tb, lb), (tc, lc) = marks[f.point.b], marks[f.point.c]
        out.append((tc, tuple((a - tb, b - tb, cause) for a, b, cause, _ in timeline[lb:lc])))
    return out


def check_wafer_blocks(timeline: Sequence[tuple[float, float, str, int]], marks: Mapping[int, tuple[float, int]],
                       f: LayerFold, where: str) -> None:
    """Check another wafer's two compared blocks of fold point ``f`` from its own ``marks`` (pass -> its start time
    and timeline length, at least of ``f``'s three passes): both as long as the representative's period, and split
    alike by cause.  The timeline is only appended to, so the check reads the same once the wafer has started pass
    ``c`` as after the run: the probe makes it then, and a run whose wafers have not settled stops there.

    ``settled_late`` when the second block already has the period and the first not: the wafer settled one block or
    more after the stretch simulated for it, rather than drifting (the ladder then simulates a longer one)."""
    (ta, la), (tb, lb), (tc, lc) = marks[f.point.a], marks[f.point.b], marks[f.point.c]
    fp = f.point
    if not (close(tb - ta, f.period) and close(tc - tb, f.period)):
        raise LayerFoldMismatch(f"{where}: blocks took {tb - ta!r} s and {tc - tb!r} s, the representative "
                                f"wafer's {f.period!r} s", fp.direction, fp.micro_batch,
                                settled_late=close(tc - tb, f.period), step=fp.step)
    first, second = seconds_by_cause(timeline[la:lb]), seconds_by_cause(timeline[lb:lc])
    for cause in sorted(first.keys() | second.keys()):
        if abs(first.get(cause, 0.0) - second.get(cause, 0.0)) > REL_TOL * max(f.period, 1e-300):
            raise LayerFoldMismatch(f"{where}: {cause} differs between two blocks", fp.direction, fp.micro_batch,
                                    step=fp.step)


def unfold_wafer(wafer: Wafer, program: Sequence[Pass], layers: LayersFold, copies: WaferCopies) -> list[int]:
    """One wafer's timeline (with ``copies`` inserted), passes and loss times on the unfolded axis; returns the
    new position of each old timeline position."""
    shift = layers.shift
    timeline, new_index = _unfolded_timeline(wafer.timeline, layers, copies)
    wafer.timeline[:] = timeline
    for p, t in zip(program, wafer.passes):
        d = shift(p.index)
        t.start += d
        t.end += d
    loss_pass = {(p.step, p.micro_batch): p.index for p in program
                 if p.op == wafer.settings.loss_op and p.phase == "forward"}
    for key in wafer.loss_times:
        wafer.loss_times[key] += shift(loss_pass[key])
    return new_index


def unfold_jobs(jobs: Sequence[UpdateJob], program: Sequence[Pass], layers: LayersFold) -> None:
    """Each optimizer job moves with the pass that sent its gradient (with global-norm clipping, an update with
    the pass that sent the step's last one, which released it)."""
    grad_pass = gradient_passes(program)
    for j in jobs:
        at = j.released_by if j.released_by is not None else grad_pass[(j.kernel, j.step, j.micro_batch)]
        d = layers.shift(at)
        j.arrived += d
        j.start += d
        j.end += d


def unfold_snapshots(snapshots: dict[tuple[int, int], Snapshot], program: Sequence[Pass], layers: LayersFold,
                     new_index: Sequence[int]) -> None:
    """The micro-batch snapshots (taken as the wafer starts each micro-batch) on the unfolded axis."""
    first_pass: dict[tuple[int, int], int] = {}
    for p in program:
        first_pass.setdefault((p.step, p.micro_batch), p.index)
    for key, snap in list(snapshots.items()):
        at = first_pass[key]
        counters = {k: v + layers.extra(k, at) for k, v in snap.counters.items()}
        snapshots[key] = Snapshot(snap.time + layers.shift(at), new_index[snap.timeline_len], counters, snap.state)


def _unfolded_timeline(timeline: Sequence[tuple[float, float, str, int]], layers: LayersFold, copies: WaferCopies
                       ) -> tuple[list[tuple[float, float, str, int]], list[int]]:
    """The timeline with the copies' spans inserted, and the new position of each old position."""
    out: list[tuple[float, float, str, int]] = []
    new_index: list[int] = []
    folds = list(layers.folds)
    i, shift = 0, 0.0
    for a, b, cause, p in timeline:
        while i < len(folds) and (p >= folds[i].point.c or p == -1):
            f = folds[i]
            at, spans = copies[i]
            for n in range(f.copies):
                t0 = at + shift + n * f.period
                out.extend([(t0 + x, t0 + y, c, COPY_PASS) for x, y, c in spans])
            shift += f.copies * f.period
            i += 1
        new_index.append(len(out))
        out.append((a + shift, b + shift, cause, p))
    new_index.append(len(out))
    return out, new_index
