"""Which samples each wafer trains on: the global batch split over the wafers MemoryX can reach.

Data parallelism splits the global batch as evenly as it goes, the first wafers taking one sample
more (``numpy.array_split`` order).  A wafer below a SwarmX node that is down (``faults.nodes``)
receives no weights and sends no gradients: it is cut off, takes no samples, and the job splits the
same global batch over the others (a job keeps its batch size, which its convergence depends on,
and runs on the systems it still has; docs/faults.md).
"""

from __future__ import annotations

from wss.model.scenario import Scenario
from wss.model.scenario.faults import cut_off_wafers

__all__ = ["shard_samples", "reachable_wafers", "even_split"]


def even_split(samples: int, parts: int) -> list[int]:
    """``samples`` over ``parts`` as evenly as it goes, the first ones taking one more (none over none)."""
    if parts == 0:
        return []
    base, extra = divmod(samples, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def reachable_wafers(scenario: Scenario) -> list[int]:
    """The wafers no node that is down cuts off, in order."""
    hw = scenario.hardware
    cut = set(cut_off_wafers(scenario.faults, hw.swarmx, hw.wafers))
    return [w for w in range(hw.wafers) if w not in cut]


def shard_samples(scenario: Scenario) -> list[int]:
    """Each wafer's samples per step: the global batch over the reachable wafers, 0 for a wafer cut off."""
    reachable = reachable_wafers(scenario)
    out = [0] * scenario.hardware.wafers
    for w, n in zip(reachable, even_split(scenario.training.global_batch, len(reachable))):
        out[w] = n
    return out
