"""Energy of a run: each part's power at its busy fraction, over the run (docs/model.md, "Energy").

A part draws ``u x power_busy_W + (1 - u) x power_idle_W`` (``power_idle_W`` unset: the busy figure),
with ``u`` its busy fraction over the run:

* a wafer's system: the fraction of the run it computed, each wafer its own in an unfolded run; a
  wafer cut off by a SwarmX node that is down (``faults.nodes``) computes nothing, so it draws its
  idle power: it stays powered, waiting for the tree to reach it again (docs/faults.md);
* every part the cluster lists as powered (``Cluster.powered()``: MemoryX's nodes) declares what it
  draws (:class:`~wss.model.components.part.PowerDraw`: its units, its busy fraction, its watts).  A
  MemoryX node is busy the largest fraction of its streaming, optimizer, flash, network intake and
  DRAM activities.  They overlap, so the largest is a lower bound on the time the node does anything.
  The DRAM belongs there: the gradient intake writes each summed chunk into DRAM after the network has
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
from functools import partial

from wss.model.components.memoryx import MEMORYX_ACTIVITIES, memoryx_busy
from wss.model.components.part import PowerDraw
from wss.model.result.results import EnergySummary
from wss.model.scenario import Scenario
from wss.model.scenario.faults import cut_off_wafers

__all__ = ["MEMORYX_ACTIVITIES", "energy_summary", "live_nodes_per_level", "memoryx_busy"]


def live_nodes_per_level(scenario: Scenario) -> list[int]:
    """SwarmX nodes per level, root first, with at least one wafer below them that is not cut off."""
    hw = scenario.hardware
    sx, wafers = hw.swarmx, hw.wafers
    cut = set(cut_off_wafers(scenario.faults, sx, wafers))
    return [sum(1 for i in range(count) if any(w not in cut for w in sx.wafers_below(level, i, wafers)))
            for level, count in enumerate(sx.nodes_per_level(wafers), start=1)]


def energy_summary(scenario: Scenario, utilisation: dict[str, float], wafer_busy: Sequence[float],
                   step_time: float, samples: float, tokens: float,
                   draws: Sequence[PowerDraw] = ()) -> EnergySummary | None:
    """Energy from the parts' power figures and busy fractions; None if a part has no ``power_busy_W``.

    ``wafer_busy`` is each wafer's fraction of the run spent computing (0 for a wafer cut off); ``draws`` what
    the cluster's powered parts declare (``Cluster.powered()``), counted between the wafers and the SwarmX nodes.
    """
    hw = scenario.hardware
    if hw.wafer.power_busy_W is None or hw.swarmx.power_busy_W is None or any(d.busy_W is None for d in draws):
        return None

    def draw(busy_W: float, idle_W: float | None, busy: float) -> float:
        idle = busy_W if idle_W is None else idle_W
        busy = min(max(busy, 0.0), 1.0)
        return float(busy * busy_W + (1.0 - busy) * idle)

    wafer = partial(draw, hw.wafer.power_busy_W, hw.wafer.power_idle_W)
    swarmx = partial(draw, hw.swarmx.power_busy_W, hw.swarmx.power_idle_W)
    u = utilisation
    nodes = hw.swarmx.nodes_per_level(hw.wafers)
    live = live_nodes_per_level(scenario)
    levels = [max(u.get(f"swarmx.down.l{i}", 0.0), u.get(f"swarmx.up.l{i}", 0.0)) for i in range(1, len(nodes) + 1)]
    wafer_W, wafer_u = _wafers(wafer, wafer_busy)
    power = {
        "wafer": wafer_W,
        **{d.kind: d.units * draw(d.busy_W, d.idle_W, d.busy) for d in draws if d.busy_W is not None},
        "swarmx": sum(n * swarmx(b) + (total - n) * swarmx(0.0) for total, n, b in zip(nodes, live, levels)),
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
            **{d.kind: d.busy for d in draws},
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
