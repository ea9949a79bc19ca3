"""Folding watches a run from outside: a probe on the wafers' pass boundaries, and the fold state it keeps.

The parts know nothing of folding.  As in desmod's probes (desmod, a SimPy modelling library, 2016), an
observer is hooked onto a part's events from outside: :func:`observe_passes` wraps a wafer's
:meth:`~wss.model.components.wafer.Wafer.start_pass` on that one wafer, so a run that folds nothing
attaches nothing and its wafers run exactly the code they would without folding.

:class:`FoldProbe` is what the runner attaches (:meth:`FoldProbe.attach`) and owns: the snapshots it takes
as the representative wafer starts each micro-batch (:mod:`~wss.model.folding.fold`,
:mod:`~wss.model.folding.step_fold`) and each fold point's passes (:mod:`~wss.model.folding.layer_fold`),
the marks of every wafer, and after the run the folds proved from them.  A snapshot reads the cluster's
counters and queues and schedules nothing, so watching a run does not change it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from wss.model.components.wafer import PassTiming, Wafer
from wss.model.folding.fold import Fold, Snapshot
from wss.model.folding.layer_fold import (
    FoldPoint,
    LayerFold,
    LayersFold,
    check_point,
    check_wafer_blocks,
    fold_points,
)
from wss.model.folding.step_fold import StepsFold, Unfolding
from wss.model.program import Pass

if TYPE_CHECKING:
    from wss.model.folding.drift import DriftWorld
    from wss.model.sim.cluster import Cluster

__all__ = ["FoldProbe", "observe_passes"]


def observe_passes(wafer: Wafer, observer: Callable[[Pass], None]) -> None:
    """Call ``observer(p)`` as ``wafer`` starts each pass ``p`` (after its own bookkeeping, before it waits for
    anything): the wafer's pass boundary, wrapped on this wafer alone.  Observers attached one after another are
    called in that order."""
    start = wafer.start_pass

    def observed(p: Pass) -> PassTiming:
        timing = start(p)
        observer(p)
        return timing

    wafer.start_pass = observed  # type: ignore[method-assign]  # shadows the method on this instance only


#: One wafer's marks at the fold points' passes: pass -> (start time, timeline length, compute seconds).
WaferMarks = dict[int, tuple[float, int, float]]


@dataclass
class FoldProbe:
    """What folding observed of one run and what it proved; empty for a run that folds nothing."""

    #: (step, micro-batch) -> the cluster as the representative wafer started it (micro-batch and step folds).
    snapshots: dict[tuple[int, int], Snapshot] = field(default_factory=dict)
    #: (step, micro-batch) -> each wafer's timeline length then (a wafer stood for by another: its stand-in's).
    marks: dict[tuple[int, int], list[int]] = field(default_factory=dict)
    #: The fold points of identical blocks, in program order.
    layer_points: list[FoldPoint] = field(default_factory=list)
    #: Pass -> the cluster as the representative wafer started it, at the fold points' passes.
    layer_snapshots: dict[int, Snapshot] = field(default_factory=dict)
    #: Each fold point, proved as the representative wafer reached its last pass.
    layer_folds: list[LayerFold] = field(default_factory=list)
    #: Each simulated wafer's marks at the fold points' passes, by wafer name.
    wafer_marks: dict[str, WaferMarks] = field(default_factory=dict)
    #: After the run: the folds proved (micro-batches, steps, blocks), or None.
    fold: Fold | None = None
    step_fold: StepsFold | None = None
    layers: LayersFold | None = None
    #: The drifting world of an unfolded run whose smaller shards may drift ahead (:mod:`~wss.model.folding.drift`).
    drift: DriftWorld | None = None

    def attach(self, cluster: Cluster, wafers: Sequence[Wafer], simulated: Sequence[Wafer],
               drift: DriftWorld | None = None) -> None:
        """Watch ``cluster``'s run as far as its plan folds: the representative wafer (``cluster.wafer``) snapshots
        the cluster at each micro-batch start, noting where every wafer of ``wafers`` (one per wafer, by number)
        is; with identical blocks, every wafer of ``simulated`` marks the fold points' passes and the
        representative snapshots and checks them.  Nothing is attached where nothing folds.

        With ``drift`` worlds, their crossings with the pacing world are put in place first (delay lines and pauses:
        :meth:`~wss.model.folding.drift.DriftWorld.install`); at each fold point the representative checks the
        pacing world without the worlds that drift there, whose wafers' blocks are checked on their own axis
        (:meth:`~wss.model.folding.drift.DriftWorld.at_fold`), and the drifting wafers also mark the blocks after
        each fold point, checked as they reach them (:meth:`~wss.model.folding.drift.DriftWorld.at_mark`)."""
        plan, env, rep = cluster.plan, cluster.env, cluster.wafer
        checks: dict[int, FoldPoint] = {}
        marked: frozenset[int] = frozenset()
        self.drift = drift
        drifted: set[tuple[str, int]] = set()  # (wafer, pass c) of the drifting wafers at each drift fold
        if plan.layer_runs:
            self.layer_points = fold_points(cluster.program, plan.ops, plan.layer_runs, plan.layer_directions,
                                            plan.blocks_unfolded_in)
            checks = {f.c: f for f in self.layer_points}
            marked = frozenset(i for f in self.layer_points for i in (f.a, f.b, f.c))
            if drift is not None:
                marked |= {i for f in self.layer_points for i in drift.marked_passes(f)}
                drift.install(env, self.layer_points, self.wafer_marks, rep.name)
        starts = bool(plan.fold_copies or plan.step_fold_copies)

        def snapshot() -> Snapshot:
            return Snapshot(env.now, len(rep.timeline), cluster.counters(), cluster.state())

        proved: dict[int, LayerFold] = {}  # pass c -> the fold the representative proved there

        def check_wafer(wafer: Wafer, fold: LayerFold) -> None:
            marks = {i: m[:2] for i, m in self.wafer_marks[wafer.name].items()}
            check_wafer_blocks(wafer.timeline, marks, fold, wafer.name)

        drifting = {id(w) for w in drift.wafers} if drift is not None else set()

        def at_block(wafer: Wafer, marks: WaferMarks, p: Pass) -> None:
            marks[p.index] = (env.now, len(wafer.timeline), wafer.compute_s)
            if drift is not None:
                drift.marked()
            if id(wafer) in drifting:
                assert drift is not None
                drift.at_mark(wafer, p.index, marks)
            if wafer is rep:
                self.layer_snapshots[p.index] = snapshot()
                if p.index in checks:  # a run whose blocks do not repeat stops here (LayerFoldMismatch)
                    ignore = drift.ignorer(p.index) if drift is not None else None
                    fold = check_point(checks[p.index], self.layer_snapshots, rep.timeline, ignore)
                    self.layer_folds.append(fold)
                    proved[p.index] = fold
                    if drift is not None:
                        drifted.update((name, p.index) for name in drift.at_fold(fold))
                    for other in simulated:  # those that started pass c already: checked now, not after the run
                        if other is not rep and p.index in self.wafer_marks[other.name] and \
                                (other.name, p.index) not in drifted:
                            check_wafer(other, fold)
            elif p.index in proved and (wafer.name, p.index) not in drifted:
                check_wafer(wafer, proved[p.index])

        def at_micro_batch(p: Pass) -> None:
            self.snapshots[(p.step, p.micro_batch)] = snapshot()
            self.marks[(p.step, p.micro_batch)] = [len(w.timeline) for w in wafers]

        for wafer in simulated if marked else ():
            marks = self.wafer_marks.setdefault(wafer.name, {})
            starting = starts and wafer is rep

            def observer(p: Pass, wafer: Wafer = wafer, marks: WaferMarks = marks, starting: bool = starting) -> None:
                if p.index in marked:
                    at_block(wafer, marks, p)
                if starting and p.op == 0 and p.phase == "forward":
                    at_micro_batch(p)

            observe_passes(wafer, observer)
        if starts and not marked:
            observe_passes(rep, lambda p: at_micro_batch(p) if p.op == 0 and p.phase == "forward" else None)

    def unfolded(self, counter: str, value: float) -> float:
        """A counter's simulated value plus what the folded blocks, micro-batches and steps add to it."""
        value += self.layers.extra(counter) if self.layers is not None else 0.0
        value += self.fold.extra(counter) if self.fold is not None else 0.0
        return value + self.step_fold.extra(counter) if self.step_fold is not None else value

    def layer_repeats(self, pass_index: int) -> int:
        """How many block passes the record of a simulated pass stands for (with layer folding)."""
        return self.layers.repeats(pass_index) if self.layers is not None else 1

    def unfolding(self) -> Unfolding:
        """The maps from the simulated axis to the unfolded one (micro-batches and steps)."""
        return Unfolding(self.fold, self.step_fold)
