"""Energy of a run: each part's power at its busy fraction, over the run (docs/model.md, "Energy").

A part draws ``u x power_busy_W + (1 - u) x power_idle_W`` (``power_idle_W`` unset: the busy figure),
with ``u`` its busy fraction over the run:

* a wafer's system: the fraction of the run it computed, each wafer its own in an unfolded run; a
  wafer cut off by a SwarmX node that is down (``faults.nodes``) computes nothing, so it draws its
  idle power: it stays powered, waiting for the tree to reach it again (docs/faults.md);
* a MemoryX node: the largest fraction of its streaming, optimizer, flash, network intake and DRAM
  activities.  They overlap, so the largest is a lower bound on the time the node does anything.  The
  DRAM belongs there: the gradient intake writes each summed chunk into DRAM after the network has
  delivered it, outside the other four, and the stream's, the optimizer's and the intake's DRAM
  transfers at different times add up.  The DRAM is shared by processor sharing, so it moves bytes at
  its full bandwidth whenever a transfer is in progress: ``utilisation["memoryx.dram"]``, the bytes it
  moved over bandwidth x time, is exactly the fraction of the run it was busy;
* the SwarmX nodes of a level: the larger of that level's down and up link fractions; a node with no
  wafer below it that trains (the node that is down and those under it) carries nothing, and idles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from wss.model.result.results import EnergySummary
from wss.model.scenario import Scenario
from wss.model.scenario.faults import cut_off_wafers

__all__ = ["MEMORYX_ACTIVITIES", "energy_summary", "live_nodes_per_level", "memoryx_busy"]

#: The utilisation entries whose largest is a MemoryX node's busy fraction.
MEMORYX_ACTIVITIES = ("memoryx.stream", "memoryx.optimizer", "memoryx.flash", "memoryx.net.in", "memoryx.dram")


def memoryx_busy(utilisation: dict[str, float]) -> float:
    """A MemoryX node's busy fraction: the largest of its activities' (:data:`MEMORYX_ACTIVITIES`)."""
    return max(utilisation.get(k, 0.0) for k in MEMORYX_ACTIVITIES)


def live_nodes_per_level(scenario: Scenario) -> list[int]:
    """SwarmX nodes per level, root first, with at least one wafer below them that is not cut off."""
    hw = scenario.hardware
    sx, wafers = hw.swarmx, hw.wafers
    cut = set(cut_off_wafers(scenario.faults, sx, wafers))
    return [sum(1 for i in range(count) if any(w not in cut for w in sx.wafers_below(level, i, wafers)))
            for level, count in enumerate(sx.nodes_per_level(wafers), start=1)]


def energy_summary(scenario: Scenario, utilisation: dict[str, float], wafer_busy: Sequence[float],
                   step_time: float, samples: float, tokens: float) -> EnergySummary | None:
    """Energy from the parts' power figures and busy fractions; None if a part has no ``power_busy_W``.

    ``wafer_busy`` is each wafer's fraction of the run spent computing (0 for a wafer cut off).
    """
    hw = scenario.hardware
    parts = (hw.wafer, hw.memoryx, hw.swarmx)
    if any(p.power_busy_W is None for p in parts):
        return None

    def draw(part: Any, busy: float) -> float:
        idle = part.power_busy_W if part.power_idle_W is None else part.power_idle_W
        busy = min(max(busy, 0.0), 1.0)
        return float(busy * part.power_busy_W + (1.0 - busy) * idle)

    u = utilisation
    mx_busy = memoryx_busy(u)
    nodes = hw.swarmx.nodes_per_level(hw.wafers)
    live = live_nodes_per_level(scenario)
    levels = [max(u.get(f"swarmx.down.l{i}", 0.0), u.get(f"swarmx.up.l{i}", 0.0)) for i in range(1, len(nodes) + 1)]
    wafer_W, wafer_u = _wafers(lambda b: draw(hw.wafer, b), wafer_busy)
    power = {
        "wafer": wafer_W,
        "memoryx": hw.memoryx.shards * draw(hw.memoryx, mx_busy),
        "swarmx": sum(n * draw(hw.swarmx, b) + (total - n) * draw(hw.swarmx, 0.0)
                      for total, n, b in zip(nodes, live, levels)),
    }
    total_W = sum(power.values())
    per_step = total_W * step_time
    sx_nodes = sum(nodes)
    return EnergySummary(
        per_step_J=per_step,
        per_sample_J=per_step / samples,
        per_token_J=per_step / tokens,
        average_power_W=total_W,
        by_part_J={k: v * step_time for k, v in power.items()},
        busy_fraction={
            "wafer": wafer_u,
            "memoryx": mx_busy,
            "swarmx": sum(n * b for n, b in zip(live, levels)) / sx_nodes if sx_nodes else 0.0,
        },
    )


def _wafers(draw: Callable[[float], float], busy: Sequence[float]) -> tuple[float, float]:
    """The wafers' systems' power and their mean busy fraction.  Wafers alike are counted once, times their
    number, so a folded run's ``N`` identical wafers give exactly ``N`` times one wafer's figure."""
    counts = Counter(busy)
    power = sum(n * draw(b) for b, n in sorted(counts.items()))
    mean = next(iter(counts)) if len(counts) == 1 else sum(n * b for b, n in sorted(counts.items())) / len(busy)
    return float(power), float(mean)
