"""Whether to fold the wafers into one: the rule behind ``simulation.fold_wafers``.

Folded, one wafer and one SwarmX root-to-leaf path stand for all of them
(:mod:`wss.model.cluster`); unfolded, every wafer is its own process and every
tree edge its own link (:mod:`wss.model.unfolded`).  The two agree exactly on a
uniform cluster, where every wafer gets the same chunks at the same times and
does the same work on them, so ``auto`` folds exactly then: it is the same
answer for a fraction of the events.  A cluster is not uniform when the global
batch does not divide evenly over the wafers (the wafers with one sample fewer
finish each pass early and wait).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from wss.model.scenario import Scenario
from wss.model.wafer_shards import shard_samples

if TYPE_CHECKING:  # the Result's models load when a record is made: the scenario's checks ask only
    from wss.model.results import WaferFolding  # whether the wafers fold (wss validate starts faster)

__all__ = ["wafer_folding", "folds_wafers", "uniform_shards", "simulated_wafers"]


def uniform_shards(scenario: Scenario) -> bool:
    """Does every wafer that trains (none is cut off by a node that is down) get the same number of samples?"""
    return len({n for n in shard_samples(scenario) if n}) == 1


def _shards(scenario: Scenario) -> str:
    """'1544 samples over 192 wafers: 8 wafers of 9, 184 of 8'."""
    samples = [n for n in shard_samples(scenario) if n]
    hi, lo = max(samples), min(samples)
    return (f"{scenario.training.global_batch} samples over {len(samples)} wafers: {samples.count(hi)} wafers "
            f"of {hi}, {samples.count(lo)} of {lo}")


def _decision(scenario: Scenario) -> tuple[bool, str]:
    """Fold or not, and which rule decided: ``true``, ``false``, ``faults``, ``uniform`` or ``uneven``."""
    asked = scenario.simulation.fold_wafers
    if asked is True:
        return True, "true"
    if asked is False:
        return False, "false"
    if scenario.faults.sets_wafers_apart:
        return False, "faults"
    return (True, "uniform") if uniform_shards(scenario) else (False, "uneven")


def folds_wafers(scenario: Scenario) -> bool:
    """Does the run fold the wafers into one (:func:`wafer_folding` without its reason)?"""
    return _decision(scenario)[0]


def wafer_folding(scenario: Scenario) -> WaferFolding:
    """Fold or not, and why, from ``simulation.fold_wafers`` and the scenario's uniformity."""
    from wss.model.results import UNIFORM_FOLDING, WaferFolding

    rule = _decision(scenario)[1]
    if rule == "true":
        extra = ""
        if not uniform_shards(scenario):
            extra = f"; the shards are uneven ({_shards(scenario)}): the busiest stands for all"
        return WaferFolding(folded=True, reason=f"simulation.fold_wafers is true{extra}")
    if rule == "false":
        return WaferFolding(folded=False, reason="simulation.fold_wafers is false")
    if rule == "faults":
        return WaferFolding(folded=False, reason=f"auto: faults ({scenario.faults.describe(apart_only=True)})")
    if rule == "uniform":
        return UNIFORM_FOLDING
    return WaferFolding(folded=False, reason=f"auto: the shards are uneven, {_shards(scenario)}")


def simulated_wafers(scenario: Scenario) -> int:
    """Wafers an unfolded run simulates: one per class of identical wafers under identical subtrees
    (``simulation.wafer_classes``; :func:`wss.model.components.swarmx_tree.stand_ins`), else every wafer.

    A wafer's kind here is its shard, its slowdown and, with jitter, itself (every wafer draws its own
    factors): equal shards make equal micro-batches, so these are the classes the run uses.
    """
    from wss.model.components.swarmx_tree import stand_ins  # lazy: the scenario loader imports this module

    hw, faults = scenario.hardware, scenario.faults
    if not scenario.simulation.wafer_classes or faults.jitter is not None:
        return sum(1 for n in shard_samples(scenario) if n)
    slow = faults.slowdowns()
    kinds = [(n, slow.get(w, 1.0)) if n else None for w, n in enumerate(shard_samples(scenario))]
    leaves = stand_ins(hw.swarmx.nodes_per_level(hw.wafers), hw.wafers, hw.swarmx.fan_out, kinds,
                       faults.bandwidth_factors())[-1]
    return sum(1 for w, s in enumerate(leaves) if s == w)
