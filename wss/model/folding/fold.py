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
queued or in flight (link buffers, the optimizer's backlog, flash staging)
must be the same at their starts.  Where it is not (e.g. an optimizer
backlog that grows from one micro-batch to the next),
:func:`analyse` raises :class:`FoldMismatch` and the caller simulates every
micro-batch instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Snapshot", "StepFold", "Fold", "FoldMismatch", "analyse", "close", "same_state", "state_difference",
           "seconds_by_cause"]

REL_TOL = 1e-9


class FoldMismatch(Exception):
    """Micro-batches 2 and 3 differ: the run is not periodic and must not be folded."""


@dataclass(frozen=True)
class Snapshot:
    """Counters of every part at the moment the wafer starts a micro-batch."""

    time: float
    timeline_len: int
    counters: dict[str, float]
    state: tuple  # queue lengths, optimizer backlog, staged bytes, ... (see Cluster.state)


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


def same_state(a: tuple, b: tuple, period: float) -> bool:
    """Equal queue lengths, and (to rounding) equal in-flight times, levels and DRAM transfers' bytes left; with a
    limited activation store, equal chunks and block inputs held and (to rounding) its transfers' bytes left."""
    (stores_a, (queued_a, running_a), staged_a, dram_a, held_a) = a
    (stores_b, (queued_b, running_b), staged_b, dram_b, held_b) = b
    return (
        stores_a == stores_b
        and _same_transfers(dram_a, dram_b)
        and queued_a == queued_b
        and abs(running_a - running_b) <= REL_TOL * max(period, 1e-300)
        and close(staged_a, staged_b)
        and _same_store(held_a, held_b)
    )


def state_difference(a: tuple, b: tuple, period: float) -> str:
    """What differs between two states that :func:`same_state` finds unequal, in words (for ``wss -v``).

    The states are ``Cluster.state`` tuples: every buffer's queue length (the links' inboxes in the tree's
    order, then the wafer's weight and activation intakes and MemoryX's gradient inbox), the optimizer's
    backlog, the flash staging level, MemoryX's DRAM transfers and a limited activation store's holdings.
    """
    (stores_a, (queued_a, running_a), staged_a, dram_a, held_a) = a
    (stores_b, (queued_b, running_b), staged_b, dram_b, held_b) = b
    parts = []
    if stores_a != stores_b:
        differ = sum(x != y for x, y in zip(stores_a, stores_b)) + abs(len(stores_a) - len(stores_b))
        parts.append(f"{differ} of {max(len(stores_a), len(stores_b))} buffers hold a different number of "
                     f"chunks ({sum(stores_a)} chunks queued in all, then {sum(stores_b)})")
    if queued_a != queued_b or abs(running_a - running_b) > REL_TOL * max(period, 1e-300):
        parts.append(f"the optimizer's backlog differs ({queued_a} jobs queued, then {queued_b})")
    if not close(staged_a, staged_b):
        parts.append(f"the flash staging holds {staged_a:.6g} bytes, then {staged_b:.6g}")
    if not _same_transfers(dram_a, dram_b):
        parts.append(f"MemoryX's DRAM has {len(dram_a)} transfers under way, then {len(dram_b)} (or as many with "
                     "different bytes left)")
    if not _same_store(held_a, held_b):
        parts.append("the activation store holds or moves different block inputs")
    return "; ".join(parts) if parts else "the states differ"


def _same_transfers(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    """As many transfers under way, each with (to rounding) the same bytes left."""
    return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))


def _same_store(a: tuple, b: tuple) -> bool:
    """The activation store's part of :func:`same_state` (``Cluster.store_state``; empty when unlimited)."""
    if not a or not b:
        return a == b
    (held_a, bandwidths_a), (held_b, bandwidths_b) = a, b
    return held_a == held_b and len(bandwidths_a) == len(bandwidths_b) and all(
        _same_transfers(x, y) for x, y in zip(bandwidths_a, bandwidths_b))


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
                               f"({state_difference(s2.state, s3.state, p3)})")
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
