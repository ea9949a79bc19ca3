"""A recorded folded run on the unfolded time axis: its spans placed, and the stretches its copies fill.

A folded run simulates a few micro-batches (and steps) and stands in for the
identical ones between with copies (:mod:`wss.model.fold`,
:mod:`wss.model.step_fold`).  Recording keeps folding, so a trace of 384
micro-batches or 1,000 steps costs little more than the run; the spans it
records are on the simulated axis, and :class:`UnfoldedSpans` moves them onto
the unfolded axis of the Result:

* a span belongs to what it works for (a pass, a micro-batch, an optimizer
  job) and moves as the Result's records of that pass do
  (:meth:`~wss.model.step_fold.Unfolding.shift`), so the trace and
  ``result.json`` agree;
* the copies fill :class:`FoldedStretch` es, where nothing was simulated: a
  view marks each stretch (how many copies of what, and their period) rather
  than drawing hundreds of identical copies;
* a quantity that accumulates over time (busy seconds, a buffer's
  chunk-seconds) is read on the unfolded axis with :meth:`UnfoldedSpans.cumulative`:
  each copy adds what the stretch it repeats added, spread evenly over the copy.

Each stretch repeats the stretch of one period just before it on the unfolded
axis (micro-batch 3 of its step, or step 3 with its own copies).  A new kind
of fold adds its stretches in :func:`folded_stretches`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from wss.model.step_fold import COPIED_STEP

if TYPE_CHECKING:  # only the type: the spans are read from a cluster that already ran
    from wss.model.cluster import Cluster

__all__ = ["FoldedStretch", "UnfoldedSpans", "folded_stretches"]


@dataclass(frozen=True)
class FoldedStretch:
    """Where the folded copies of one micro-batch (or one step) sit on the unfolded axis."""

    kind: str  # "micro-batch" or "step": what each copy is
    copied: int  # the simulated micro-batch or step every copy repeats (3)
    step: int | None  # for micro-batch copies: the (real) step they belong to
    copies: int
    period_s: float  # length of one copy
    start_s: float  # where the first copy starts (unfolded axis)

    @property
    def end_s(self) -> float:
        return self.start_s + self.copies * self.period_s

    @property
    def first(self) -> int:
        """The real micro-batch (or step) the first copy stands for; the last is ``first + copies - 1``."""
        return self.copied + 1

    @property
    def name(self) -> str:
        """'x379 folded copies of micro-batch 3 s0', 'x996 folded copies of step 3'."""
        what = f"micro-batch {self.copied} s{self.step}" if self.kind == "micro-batch" else f"step {self.copied}"
        return f"x{self.copies} folded copies of {what}"


def folded_stretches(cluster: Cluster) -> list[FoldedStretch]:
    """The stretches of the unfolded axis that the run's folded copies fill, in time order."""
    unfold = cluster.unfolding()
    out = []
    mb = cluster.fold
    if mb is not None:
        for k, f in enumerate(mb.steps):
            out.append(FoldedStretch("micro-batch", mb.copied_micro_batch, unfold.step_of(k), mb.copies, f.period,
                                     f.at + unfold.shift(k, mb.copied_micro_batch)))
    steps = cluster.step_fold
    if steps is not None:
        after = COPIED_STEP + 1  # the first simulated step after the copies (the run's last)
        end = cluster.snapshots[(after, 0)].time + unfold.shift(after, 0)
        out.append(FoldedStretch("step", COPIED_STEP, None, steps.copies, steps.period,
                                 end - steps.copies * steps.period))
    return sorted(out, key=lambda s: s.start_s)


class UnfoldedSpans:
    """Moves a recorded cluster's spans onto the unfolded axis (see the module docstring)."""

    def __init__(self, cluster: Cluster) -> None:
        self.unfolding = unfold = cluster.unfolding()
        self.program = cluster.program
        self.stretches = folded_stretches(cluster)
        #: Each pass's shift and real step, by pass index.
        self.shifts = [unfold.shift(p.step, p.micro_batch) for p in cluster.program]
        self.steps = [unfold.step_of(p.step) for p in cluster.program]

    def shift_of_pass(self, pass_index: int) -> float:
        """How far the spans of a pass move (none for the wafer's waits before its first pass)."""
        return self.shifts[pass_index] if pass_index >= 0 else 0.0

    def step_of_pass(self, pass_index: int) -> int:
        """The real step of a pass."""
        return self.steps[pass_index] if pass_index >= 0 else 0

    def pass_spans(self, spans: Iterable[tuple[float, float, int, float]]) -> list[tuple[float, float, int, float]]:
        """(start, end, pass, bytes) spans of a link or of MemoryX, placed."""
        shifts = self.shifts
        return [(a + shifts[p], b + shifts[p], p, n) for a, b, p, n in spans]

    def timeline(self, timeline: Iterable[tuple[float, float, str, int]]) -> list[tuple[float, float, str, int]]:
        """A wafer's (start, end, cause, pass) timeline, placed."""
        out = []
        for a, b, cause, p in timeline:
            d = self.shift_of_pass(p)
            out.append((a + d, b + d, cause, p))
        return out

    def micro_batch_spans(self, spans: Iterable[tuple[float, float, int, int]]) -> list[tuple[float, float, int, int]]:
        """(start, end, step, micro-batch) spans (the input workers'), placed, with the real step."""
        unfold = self.unfolding
        out = []
        for a, b, step, mb in spans:
            d = unfold.shift(step, mb)
            out.append((a + d, b + d, unfold.step_of(step), mb))
        return out

    def shift(self, step: int, micro_batch: int) -> float:
        """How far the spans of simulated (step, micro-batch) move (e.g. an optimizer job's)."""
        return self.unfolding.shift(step, micro_batch)

    def to_simulated(self, t: np.ndarray) -> np.ndarray:
        """Unfolded times -> simulated ones; a time inside a stretch maps to where its copies were left out."""
        t = np.asarray(t, dtype=float)
        left_out = np.zeros_like(t)
        for s in self.stretches:
            left_out += np.clip(t - s.start_s, 0.0, s.end_s - s.start_s)
        return t - left_out

    def cumulative(self, simulated: Callable[[np.ndarray], np.ndarray], t: Sequence[float] | np.ndarray
                   ) -> np.ndarray:
        """A quantity accumulated up to each unfolded time ``t``, from its accumulation on the simulated axis.

        ``simulated(times)`` gives the quantity accumulated up to simulated ``times`` (busy seconds of
        spans, a buffer's chunk-seconds).  Each copy in a stretch adds what one period before the stretch
        added, spread evenly over the copy, so the total is the unfolded run's (as ``Cluster.total``
        extrapolates counters) and the rate inside a stretch is the copied one's.
        """
        t = np.asarray(t, dtype=float)
        out = np.asarray(simulated(self.to_simulated(t)), dtype=float)
        done: list[tuple[FoldedStretch, float]] = []  # each earlier stretch and one copy's growth

        def added(x: np.ndarray) -> np.ndarray:
            """What the copies of the stretches in ``done`` add up to unfolded times ``x``."""
            extra = np.zeros_like(x)
            for s, w in done:
                extra += w * np.clip((x - s.start_s) / s.period_s, 0.0, s.copies)
            return extra

        for s in self.stretches:
            edges = np.array([s.start_s - s.period_s, s.start_s])
            before = np.asarray(simulated(self.to_simulated(edges)), dtype=float) + added(edges)
            done.append((s, float(before[1] - before[0])))
        return out + added(t)
