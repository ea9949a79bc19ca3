"""Folding identical micro-batches: simulate a few, repeat the measured period.

A wafer with ``n`` micro-batches per step runs ``n`` forward and backward
sweeps in a row, identical but for the sizes of an even split's tail.  After
the iteration boundary settles, consecutive micro-batches repeat the same pattern exactly (the same chunks, the same
compute, the same accumulation jobs), so simulating them all adds events but
no information.  With folding on, the run executes micro-batches 0, 1, 2, 3
and the last one (or the tail of differently sized ones at the end of an even
split); the identical ones between 3 and that tail are
inserted as copies of micro-batch 3's interval: every counter (busy time,
bytes) grows by the interval's delta per copy, every time after the
insertion point shifts by the interval's length per copy.

The fold is checked, not assumed: micro-batch 2's and 3's intervals must be
identical in length and in every counter (relative 1e-9), and everything
queued or in flight (link buffers, the optimizer's backlog, flash staging: every part's
:meth:`~wss.model.components.part.Part.state`, each entry to its own tolerance)
must be the same at their starts.  Where it is not (e.g. an optimizer
backlog that grows from one micro-batch to the next),
:func:`analyse` raises :class:`FoldMismatch` and the caller simulates every
micro-batch instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from wss.model.components.part import Held

__all__ = ["Snapshot", "StepFold", "Fold", "FoldMismatch", "analyse", "close", "same_state", "seconds_by_cause",
           "state_differences"]

REL_TOL = 1e-9


class FoldMismatch(Exception):
    """Micro-batches 2 and 3 differ: the run is not periodic and must not be folded."""


@dataclass(frozen=True)
class Snapshot:
    """Counters of every part at the moment the wafer starts a micro-batch."""

    time: float
    timeline_len: int
    counters: dict[str, float]
    state: Mapping[str, Held]  # every part's queues and transfers under way, by name (see Cluster.state)


@dataclass(frozen=True)
class StepFold:
    """The inserted copies of one step."""

    at: float  # simulated time where the copies go (start of the last micro-batch)
    period: float  # length of one copy
    deltas: dict[str, float]  # counter growth per copy
    breakdown: dict[str, float]  # wafer time per cause in one copy


@dataclass(frozen=True)
class Fold:
    copies: int
    steps: list[StepFold]
    #: The first micro-batch simulated after the copies: the last one, or the first of the tail of an
    #: even split whose sizes differ (the copies repeat the leading run's size).
    last_micro_batch: int
    #: The micro-batch whose interval every copy repeats.
    copied_micro_batch: int = 3

    def shift_of(self, step: int, micro_batch: int) -> float:
        """How far everything belonging to (step, micro-batch) moves on the unfolded axis.

        The copies of step ``s`` sit before :attr:`last_micro_batch`, so it, the
        micro-batches after it and all later steps move; micro-batches 0-3 of
        ``s`` do not, even when their MemoryX work runs past the fold point.
        """
        return sum(
            self.copies * f.period
            for k, f in enumerate(self.steps)
            if step > k or (step == k and micro_batch >= self.last_micro_batch)
        )

    def extra(self, counter: str) -> float:
        """Total growth of a counter from all copies of all steps."""
        return sum(self.copies * f.deltas.get(counter, 0.0) for f in self.steps)


def seconds_by_cause(spans: Sequence[tuple[float, float, str, int]]) -> dict[str, float]:
    """The seconds of a stretch of the wafer's timeline, by cause (in the spans' order)."""
    out: dict[str, float] = {}
    for a, b, cause, _ in spans:
        out[cause] = out.get(cause, 0.0) + (b - a)
    return out


def same_state(a: Mapping[str, Held], b: Mapping[str, Held], period: float) -> bool:
    """The same entries, each the same to its tolerance (:data:`~wss.model.components.part.Tolerance`): equal
    counts, and to rounding equal levels, transfers' bytes left and (within the period's) running times."""
    return a.keys() == b.keys() and all(_same(x, b[name], period) for name, x in a.items())


def state_differences(a: Mapping[str, Held], b: Mapping[str, Held], period: float) -> str:
    """The entries of two states that differ, in words (for a fold check's message)."""
    names = [*a, *(name for name in b if name not in a)]
    return ", ".join(f"{name} {_value(a, name)} vs {_value(b, name)}" for name in names
                     if name not in a or name not in b or not _same(a[name], b[name], period))


def _value(state: Mapping[str, Held], name: str) -> str:
    return repr(state[name].value) if name in state else "(none)"


def _same(a: Held, b: Held, period: float) -> bool:
    """One entry of :func:`same_state`, to its tolerance."""
    if a.tolerance == "relative":
        return close(a.value, b.value)
    if a.tolerance == "transfers":
        return _same_transfers(a.value, b.value, REL_TOL * period * max(a.rate, b.rate))
    if a.tolerance == "period":
        return bool(abs(a.value - b.value) <= REL_TOL * max(period, 1e-300))
    return bool(a.value == b.value)


def _same_transfers(a: tuple[float, ...], b: tuple[float, ...], slack: float = 0.0) -> bool:
    """As many transfers under way, each with (to rounding) the same bytes left: to a relative 1e-9, or within
    ``slack`` bytes (what the bandwidth moves in 1e-9 of the period).  Bytes left are the transfer's end less a
    clock advanced by elapsed time x rate, so two equal states read apart in time differ by the clock's rounding
    times the rate: a transfer of 169 kB left read at 0.128 s and 0.257 s on a DRAM of TB/s differs in its
    tenth significant digit (BERT-large, micro-batches of 8)."""
    return len(a) == len(b) and all(close(x, y) or abs(x - y) <= slack for x, y in zip(a, b))


def close(a: float, b: float) -> bool:
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b), 1e-300)


def analyse(
    snapshots: dict[tuple[int, int], Snapshot],
    timeline: list[tuple[float, float, str, int]],
    steps: int,
    last_mb: int,
    copies: int,
) -> Fold:
    """Measure each step's period from micro-batch 3 and check it against micro-batch 2.

    ``last_mb`` is the first micro-batch simulated after the copies (the last one, or the first of
    an even split's differently sized tail)."""
    folds = []
    for step in range(steps):
        s2, s3, s4 = snapshots[(step, 2)], snapshots[(step, 3)], snapshots[(step, last_mb)]
        p2, p3 = s3.time - s2.time, s4.time - s3.time
        if not same_state(s2.state, s3.state, p3):
            raise FoldMismatch(f"step {step}: queues differ at micro-batches 2 and 3 "
                               f"({state_differences(s2.state, s3.state, p3)})")
        if not close(p2, p3):
            raise FoldMismatch(f"step {step}: micro-batch 2 took {p2!r} s, micro-batch 3 {p3!r} s")
        deltas = {}
        for key, end in s4.counters.items():
            d3 = end - s3.counters[key]
            d2 = s3.counters[key] - s2.counters[key]
            if key.startswith("inputs"):
                # Input runs one micro-batch ahead: micro-batch 3's interval carries the (possibly
                # smaller) last micro-batch's data, micro-batch 2's a full one, as every copy does.
                deltas[key] = d2
                continue
            if not close(d2, d3) and max(abs(d2), abs(d3)) > REL_TOL * max(p3, 1e-300):
                raise FoldMismatch(f"step {step}: {key} grew by {d2!r} in micro-batch 2 but {d3!r} in 3")
            deltas[key] = d3
        breakdown = seconds_by_cause(timeline[s3.timeline_len : s4.timeline_len])
        folds.append(StepFold(at=s4.time, period=p3, deltas=deltas, breakdown=breakdown))
    return Fold(copies=copies, steps=folds, last_micro_batch=last_mb)
