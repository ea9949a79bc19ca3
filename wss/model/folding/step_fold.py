"""Folding identical steps: simulate a few, repeat the measured period of one.

A run of many training steps repeats itself once the first update has
settled the iteration boundary: the same passes, the same stream, the same
updates, one step after another.  With folding on (and at least
:data:`~wss.model.plan.micro_batching.FOLD_MIN_COPIES` steps to remove), the
plan simulates steps 0, 1, 2, 3 and the last (:func:`~wss.model.plan.
micro_batching.simulated_steps`); the steps between are inserted as copies of
step 3: every counter grows by step 3's delta per copy, and everything from
the last step on moves later by step 3's period per copy.  Micro-batch folding
(:mod:`wss.model.folding.fold`) works inside each simulated step; this module works on
its unfolded axis, so the two compose.

The fold is checked, not assumed, exactly as for micro-batches: at the starts
of steps 2, 3 and the last (the wafer starting micro-batch 0), everything
queued or in flight must be the same, and steps 2 and 3 must be equally long,
grow every counter alike, split the wafer's time alike by cause, and end
(their last update done) at the same offset from their start (relative 1e-9).
Otherwise :func:`analyse_steps` raises :class:`~wss.model.folding.fold.FoldMismatch`
and the caller simulates every step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from wss.model.folding.fold import (
    REL_TOL,
    Fold,
    FoldMismatch,
    Snapshot,
    close,
    same_state,
    seconds_by_cause,
    state_difference,
)

__all__ = ["COPIED_STEP", "StepsFold", "Unfolding", "analyse_steps"]

#: The simulated step whose period every copy repeats (steps 0 and 1 settle, 2 and 3 are compared).
COPIED_STEP = 3


@dataclass(frozen=True)
class StepsFold:
    """The inserted copies of whole steps, on the axis with micro-batches unfolded."""

    copies: int
    period: float  # length of one copy (step 3's, its folded micro-batches included)
    deltas: dict[str, float]  # counter growth per copy (likewise)

    def shift_of(self, step: int) -> float:
        """How far a simulated step moves: the steps after the copied one come after the copies."""
        return self.copies * self.period if step > COPIED_STEP else 0.0

    def step_of(self, step: int) -> int:
        """The real step number of a simulated step (the last simulated step is the run's last)."""
        return step + self.copies if step > COPIED_STEP else step

    def repeats(self, step: int) -> int:
        """How many steps the records of a simulated step stand for."""
        return 1 + self.copies if step == COPIED_STEP else 1

    def extra(self, counter: str) -> float:
        """Total growth of a counter from all copies."""
        return self.copies * self.deltas.get(counter, 0.0)


@dataclass(frozen=True)
class Unfolding:
    """Both folds of a run, as the maps from the simulated axis to the unfolded one."""

    micro_batches: Fold | None = None
    steps: StepsFold | None = None

    def shift(self, step: int, micro_batch: int) -> float:
        """How far everything of simulated (step, micro-batch) moves on the unfolded axis."""
        mb = self.micro_batches.shift_of(step, micro_batch) if self.micro_batches is not None else 0.0
        return mb + self.steps.shift_of(step) if self.steps is not None else mb

    def step_of(self, step: int) -> int:
        return self.steps.step_of(step) if self.steps is not None else step

    def repeats(self, step: int, micro_batch: int) -> int:
        """How many (step, micro-batch) pairs the records of a simulated one stand for."""
        mb = self.micro_batches
        n = 1 + mb.copies if mb is not None and micro_batch == mb.copied_micro_batch else 1
        return n * self.steps.repeats(step) if self.steps is not None else n

    def real_steps(self, simulated: list[float] | list[dict[str, float]]) -> list:
        """Expand one value per simulated step into one per real step: each copy gets step 3's."""
        if self.steps is None:
            return list(simulated)
        k = COPIED_STEP
        return [*simulated[: k + 1], *(simulated[k] for _ in range(self.steps.copies)), *simulated[k + 1 :]]

    def copy_offset(self, real_step: int) -> tuple[int, float]:
        """The simulated step a real one is, and how much later it runs than that step (a copy's offset)."""
        s = self.steps
        if s is None or real_step <= COPIED_STEP:
            return real_step, 0.0
        if real_step <= COPIED_STEP + s.copies:
            return COPIED_STEP, (real_step - COPIED_STEP) * s.period
        return real_step - s.copies, 0.0


def analyse_steps(snapshots: Mapping[tuple[int, int], Snapshot], timeline: list[tuple[float, float, str, int]],
                  ends: list[float], mb_fold: Fold | None, copies: int) -> StepsFold:
    """Measure step 3's period and deltas and check them against step 2's.

    ``snapshots`` are taken as the wafer starts each micro-batch; ``ends`` are when each simulated
    step's last update finished (simulated axis).  Times and counters are first moved onto the axis
    with micro-batches unfolded.
    """
    k = COPIED_STEP
    unfold = Unfolding(mb_fold)
    last_mb = (mb_fold.last_micro_batch if mb_fold is not None else 0)

    def start(step: int) -> tuple[float, dict[str, float]]:
        snap = snapshots[(step, 0)]
        counters = {key: v + sum(mb_fold.copies * f.deltas.get(key, 0.0) for f in mb_fold.steps[:step])
                    if mb_fold is not None else v for key, v in snap.counters.items()}
        return snap.time + unfold.shift(step, 0), counters

    (t2, c2), (t3, c3), (t4, c4) = start(k - 1), start(k), start(k + 1)
    p2, p3 = t3 - t2, t4 - t3
    s2, s3, s4 = snapshots[(k - 1, 0)], snapshots[(k, 0)], snapshots[(k + 1, 0)]
    for a, b in ((s2, s3), (s3, s4)):
        if not same_state(a.state, b.state, p3):
            raise FoldMismatch("steps: queues differ at the starts of two steps "
                               f"({state_difference(a.state, b.state, p3)})")
    if not close(p2, p3):
        raise FoldMismatch(f"step {k - 1} took {p2!r} s, step {k} {p3!r} s")
    end2, end3 = ends[k - 1] + unfold.shift(k - 1, last_mb) - t2, ends[k] + unfold.shift(k, last_mb) - t3
    if abs(end2 - end3) > REL_TOL * p3:
        raise FoldMismatch(f"steps {k - 1} and {k} end {end2!r} s and {end3!r} s after they start")
    deltas = {}
    for key in c3:
        d2, d3 = c3[key] - c2[key], c4[key] - c3[key]
        if not close(d2, d3) and max(abs(d2), abs(d3)) > REL_TOL * max(p3, 1e-300):
            raise FoldMismatch(f"steps: {key} grew by {d2!r} in step {k - 1} but {d3!r} in step {k}")
        deltas[key] = d3
    b2, b3 = (_causes(timeline, snapshots, mb_fold, step) for step in (k - 1, k))
    for cause in sorted(b2.keys() | b3.keys()):  # sorted: the message names the same cause on every run
        if abs(b2.get(cause, 0.0) - b3.get(cause, 0.0)) > REL_TOL * p3:
            raise FoldMismatch(f"steps: the wafer spent {b2.get(cause, 0.0)!r} s on {cause} in step {k - 1} "
                               f"but {b3.get(cause, 0.0)!r} s in step {k}")
    return StepsFold(copies=copies, period=p3, deltas=deltas)


def _causes(timeline: list[tuple[float, float, str, int]], snapshots: Mapping[tuple[int, int], Snapshot],
            mb_fold: Fold | None, step: int) -> dict[str, float]:
    """The wafer's seconds by cause from the start of ``step`` to the start of the next, copies included."""
    out = seconds_by_cause(timeline[snapshots[(step, 0)].timeline_len : snapshots[(step + 1, 0)].timeline_len])
    if mb_fold is not None:
        for cause, v in mb_fold.steps[step].breakdown.items():
            out[cause] = out.get(cause, 0.0) + mb_fold.copies * v
    return out
