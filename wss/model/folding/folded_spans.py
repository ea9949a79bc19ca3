"""A recorded folded run on the unfolded time axis: its spans placed, and the stretches its copies fill.

A folded run simulates a few blocks, micro-batches and steps and stands in for
the identical ones between with copies (:mod:`wss.model.folding.layer_fold`,
:mod:`wss.model.folding.fold`, :mod:`wss.model.folding.step_fold`).  Recording keeps folding,
so a trace of 96 blocks, 384 micro-batches or 1,000 steps costs little more
than the run; :class:`UnfoldedSpans` moves what it recorded onto the unfolded
axis of the Result:

* a span belongs to what it works for (a pass, a micro-batch, an optimizer
  job) and moves as the Result's records of that pass do, so the trace and
  ``result.json`` agree.  The links' and MemoryX's spans are on the simulated
  axis and move past the block copies before them too; the wafer's timeline
  and passes and the optimizer's jobs were moved past those by the run
  (:func:`~wss.model.folding.layer_fold.unfold_layers`), so only the micro-batch and
  step copies move them (:meth:`~wss.model.folding.step_fold.Unfolding.shift`);
* the copies fill :class:`FoldedStretch` es, where nothing was simulated: a
  view marks each stretch (how many copies of what, and their period) rather
  than drawing hundreds of identical copies;
* a quantity that accumulates over time (busy seconds, a buffer's
  chunk-seconds) is read on the unfolded axis with :meth:`UnfoldedSpans.cumulative`:
  each copy adds what the stretch it repeats added, spread evenly over the copy.

Each stretch repeats the stretch of one period just before it on the unfolded
axis (block ``lo+3`` or ``hi-3`` of a run, micro-batch 3 of its step, or step 3
with its own copies).  A new kind of fold adds its stretches in
:func:`folded_stretches`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from wss.model.folding.layer_fold import COPY_PASS, LayersFold
from wss.model.folding.step_fold import COPIED_STEP

if TYPE_CHECKING:  # only the type: the spans are read from a cluster that already ran
    from wss.model.sim.cluster import Cluster

__all__ = ["FoldedStretch", "UnfoldedSpans", "folded_stretches"]


@dataclass(frozen=True)
class FoldedStretch:
    """Where the folded copies of one block, micro-batch or step sit on the unfolded axis."""

    kind: str  # "block", "micro-batch" or "step": what each copy is
    copied: int  # the simulated block, micro-batch or step every copy repeats
    step: int | None  # for block and micro-batch copies: the (real) step they belong to
    copies: int
    period_s: float  # length of one copy
    start_s: float  # where the first copy starts (unfolded axis)
    micro_batch: int | None = None  # for block copies: the micro-batch they belong to
    direction: str | None = None  # for block copies: "forward" or "backward" (blocks in reverse order)

    @property
    def end_s(self) -> float:
        return self.start_s + self.copies * self.period_s

    @property
    def stands_for(self) -> tuple[int, int]:
        """The first and last real block, micro-batch or step the copies stand for."""
        if self.direction == "backward":
            return self.copied - self.copies, self.copied - 1
        return self.copied + 1, self.copied + self.copies

    @property
    def name(self) -> str:
        """'x379 folded copies of micro-batch 3 s0', 'x88 folded copies of block 3 forward mb0 s0'."""
        what = {"micro-batch": f"micro-batch {self.copied} s{self.step}", "step": f"step {self.copied}",
                "block": f"block {self.copied} {self.direction} mb{self.micro_batch} s{self.step}"}[self.kind]
        return f"x{self.copies} folded copies of {what}"


def folded_stretches(cluster: Cluster, layers: LayersFold | None = None) -> list[FoldedStretch]:
    """The stretches of the unfolded axis that the run's folded copies fill, in time order; ``layers``: the block
    copies of a drifting world (:mod:`wss.model.folding.drift`) instead of the run's."""
    unfold = cluster.folding.unfolding()
    out = []
    layers = layers if layers is not None else cluster.folding.layers
    if layers is not None:
        ops, program = cluster.plan.ops, cluster.program
        for lf in layers.folds:
            fp = lf.point  # the copies end where pass c starts, on the axis with every block copy in place
            end = lf.at + layers.shift(fp.c) + unfold.shift(fp.step, fp.micro_batch)
            block = ops[program[fp.b].op].block  # pass b starts the block every copy repeats
            assert block is not None
            out.append(FoldedStretch("block", block, unfold.step_of(fp.step), lf.copies, lf.period,
                                     end - lf.copies * lf.period, fp.micro_batch, fp.direction))
    mb = cluster.folding.fold
    if mb is not None:
        for k, f in enumerate(mb.steps):
            out.append(FoldedStretch("micro-batch", mb.copied_micro_batch, unfold.step_of(k), mb.copies, f.period,
                                     f.at + unfold.shift(k, mb.copied_micro_batch)))
    steps = cluster.folding.step_fold
    if steps is not None:
        after = COPIED_STEP + 1  # the first simulated step after the copies (the run's last)
        end = cluster.folding.snapshots[(after, 0)].time + unfold.shift(after, 0)
        out.append(FoldedStretch("step", COPIED_STEP, None, steps.copies, steps.period,
                                 end - steps.copies * steps.period))
    return sorted(out, key=lambda s: s.start_s)


class UnfoldedSpans:
    """Moves a recorded cluster's spans onto the unfolded axis (see the module docstring)."""

    def __init__(self, cluster: Cluster) -> None:
        self._cluster = cluster
        self.unfolding = unfold = cluster.folding.unfolding()
        self.program = program = cluster.program
        self.stretches = folded_stretches(cluster)
        self.layers = cluster.folding.layers
        #: Each pass's shift past the micro-batch and step copies, and its real step, by pass index.
        self.moved = [unfold.shift(p.step, p.micro_batch) for p in program]
        self.steps = [unfold.step_of(p.step) for p in program]
        #: Each pass's shift from the simulated axis (past the block copies too).
        layers = self.layers
        self.shifts = [d + layers.shift(p.index) for p, d in zip(program, self.moved)] if layers else self.moved
        first: dict[tuple[int, int], int] = {}
        for p in program:
            first.setdefault((p.step, p.micro_batch), p.index)
        self._first_pass = first

    def in_world(self, layers: LayersFold) -> UnfoldedSpans:
        """The same placement for the parts of a drifting world (:mod:`wss.model.folding.drift`), whose records
        are on its own axis and whose block copies are its own (``layers``): its links' spans move past those,
        and its stretches are where they lie.  Its wafers' timelines hold their own copies already, as every
        wafer's does."""
        out = copy.copy(self)
        out.layers = layers
        out.shifts = [d + layers.shift(p.index) for p, d in zip(self.program, self.moved)]
        out.stretches = sorted([s for s in self.stretches if s.kind != "block"] +
                               [s for s in folded_stretches(self._cluster, layers) if s.kind == "block"],
                               key=lambda s: s.start_s)
        return out

    def wafer_shift(self, pass_index: int) -> float:
        """How far a wafer pass (its timing) moves (none for the wafer's waits before its first pass)."""
        return self.moved[pass_index] if pass_index >= 0 else 0.0

    def step_of_pass(self, pass_index: int) -> int:
        """The real step of a pass."""
        return self.steps[pass_index] if pass_index >= 0 else 0

    def pass_spans(self, spans: Iterable[tuple[float, float, int, float]]) -> list[tuple[float, float, int, float]]:
        """(start, end, pass, bytes) spans of a link or of MemoryX, placed."""
        shifts = self.shifts
        return [(a + shifts[p], b + shifts[p], p, n) for a, b, p, n in spans]

    def timeline(self, timeline: Iterable[tuple[float, float, str, int]]) -> list[tuple[float, float, str, int]]:
        """A wafer's (start, end, cause, pass) timeline, placed; the spans of block copies are left out (their
        stretches mark them)."""
        out = []
        for a, b, cause, p in timeline:
            if p == COPY_PASS:
                continue
            d = self.wafer_shift(p)
            out.append((a + d, b + d, cause, p))
        return out

    def micro_batch_spans(self, spans: Iterable[tuple[float, float, int, int]]) -> list[tuple[float, float, int, int]]:
        """(start, end, step, micro-batch) spans (the input workers'), placed, with the real step.

        A transfer starts as the wafer starts the micro-batch before (``InputWorkers.run``), so it moves past
        the block copies before that one's first pass.
        """
        unfold, layers, first = self.unfolding, self.layers, self._first_pass
        out = []
        before: tuple[int, int] | None = None
        for a, b, step, mb in spans:
            d = unfold.shift(step, mb)
            if layers is not None and before is not None:
                d += layers.shift(first[before])
            out.append((a + d, b + d, unfold.step_of(step), mb))
            before = (step, mb)
        return out

    def shift(self, step: int, micro_batch: int) -> float:
        """How far what the run moved past its block copies (an optimizer job, a loss) moves on."""
        return self.unfolding.shift(step, micro_batch)

    def _stretches(self, moved: bool) -> list[FoldedStretch]:
        return [s for s in self.stretches if not (moved and s.kind == "block")]

    def to_simulated(self, t: np.ndarray, moved: bool = False) -> np.ndarray:
        """Unfolded times -> simulated ones (``moved``: on the axis with the block copies in place, the wafer
        timeline's); a time inside a stretch maps to where its copies were left out."""
        t = np.asarray(t, dtype=float)
        left_out = np.zeros_like(t)
        for s in self._stretches(moved):
            left_out += np.clip(t - s.start_s, 0.0, s.end_s - s.start_s)
        return t - left_out

    def cumulative(self, simulated: Callable[[np.ndarray], np.ndarray], t: Sequence[float] | np.ndarray,
                   moved: bool = False) -> np.ndarray:
        """A quantity accumulated up to each unfolded time ``t``, from its accumulation as recorded.

        ``simulated(times)`` gives the quantity accumulated up to recorded ``times`` (busy seconds of
        spans, a buffer's chunk-seconds): simulated times, or with ``moved`` those of the wafer's
        timeline, which holds its block copies already.  Each copy in a stretch adds what one period
        before the stretch added, spread evenly over the copy, so the total is the unfolded run's (as
        ``Cluster.total`` extrapolates counters) and the rate inside a stretch is the copied one's.
        """
        t = np.asarray(t, dtype=float)
        out = np.asarray(simulated(self.to_simulated(t, moved)), dtype=float)
        done: list[tuple[FoldedStretch, float]] = []  # each earlier stretch and one copy's growth

        def added(x: np.ndarray) -> np.ndarray:
            """What the copies of the stretches in ``done`` add up to unfolded times ``x``."""
            extra = np.zeros_like(x)
            for s, w in done:
                extra += w * np.clip((x - s.start_s) / s.period_s, 0.0, s.copies)
            return extra

        for s in self._stretches(moved):
            edges = np.array([s.start_s - s.period_s, s.start_s])
            before = np.asarray(simulated(self.to_simulated(edges, moved)), dtype=float) + added(edges)
            done.append((s, float(before[1] - before[0])))
        return out + added(t)
