"""Which samples each wafer trains on: the global batch split over the wafers MemoryX can reach.

Data parallelism splits the global batch as evenly as it goes.  Where it does not divide, some wafers take
one sample more, and they are spread over the SwarmX tree (:func:`spread_order`): one below each leaf node in
turn, taking the top-level subtrees in turn first, so that every subtree carries as even a share of the batch
as the count allows.  The step does not depend on where they sit (every broadcast and every reduction waits
for a busiest wafer wherever it is), and a balanced tree stays balanced.  It also leaves the fewest kinds of
wafers for the simulator: a wafer with a sample fewer beside a busier one under the same leaf node times as
every such sibling does, while a subtree without any busier wafer is a kind of its own at each level where
one appears (docs/unfolded.md, "Classes of identical wafers").  Wafer 0 is always among the busiest.

A wafer below a SwarmX node that is down (``faults.nodes``) receives no weights and sends no gradients: it
is cut off, takes no samples, and the job splits the same global batch over the others (a job keeps its
batch size, which its convergence depends on, and runs on the systems it still has; docs/faults.md).
"""

from __future__ import annotations

from collections.abc import Collection

from wss.model.scenario import Scenario
from wss.model.scenario.faults import cut_off_wafers

__all__ = ["shard_samples", "reachable_wafers", "even_split", "spread_order", "placed_split"]


def even_split(samples: int, parts: int) -> list[int]:
    """``samples`` over ``parts`` as evenly as it goes, the first ones taking one more (none over none)."""
    if parts == 0:
        return []
    base, extra = divmod(samples, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def spread_order(wafers: int, fan_out: int) -> list[int]:
    """The wafers in the order they take a sample more: spread over a SwarmX tree of ``fan_out``.

    Wafer ``w`` hangs under leaf node ``w // fan_out``, that node under ``w // fan_out**2``, and so on, so
    the base-``fan_out`` digits of ``w``, least significant first, are its place at each level from the
    leaves up.  Sorting by them takes the first wafer of every leaf node before any second one, and among
    those the leaf nodes of different top-level subtrees in turn.  On 49 wafers of fan-out 4: 0, 16, 32,
    48, 4, 20, 36, 8, ... then 1, 17, 33, 5, ...  On one level (``wafers <= fan_out``) it is ``0, 1, 2, ...``.
    """
    width, top = 0, max(wafers - 1, 0)
    while top:
        top //= fan_out
        width += 1

    def place(w: int) -> tuple[int, ...]:
        digits = []
        for _ in range(width):
            w, d = divmod(w, fan_out)
            digits.append(d)
        return tuple(digits)

    return sorted(range(wafers), key=place)


def placed_split(samples: int, wafers: int, fan_out: int, cut_off: Collection[int] = ()) -> list[int]:
    """Each wafer's samples: ``samples`` over the wafers not ``cut_off``, the larger shares in
    :func:`spread_order`; 0 for a wafer cut off."""
    out, cut = [0] * wafers, set(cut_off)
    live = [w for w in spread_order(wafers, fan_out) if w not in cut]
    for w, n in zip(live, even_split(samples, len(live))):
        out[w] = n
    return out


def reachable_wafers(scenario: Scenario) -> list[int]:
    """The wafers no node that is down cuts off, in order."""
    hw = scenario.hardware
    cut = set(cut_off_wafers(scenario.faults, hw.swarmx, hw.wafers))
    return [w for w in range(hw.wafers) if w not in cut]


def shard_samples(scenario: Scenario) -> list[int]:
    """Each wafer's samples per step: the global batch over the reachable wafers, the larger shares spread
    over the tree (:func:`placed_split`), 0 for a wafer cut off."""
    hw = scenario.hardware
    cut = cut_off_wafers(scenario.faults, hw.swarmx, hw.wafers)
    return placed_split(scenario.training.global_batch, hw.wafers, hw.swarmx.fan_out, cut)
