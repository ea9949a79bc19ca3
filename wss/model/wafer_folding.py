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

if TYPE_CHECKING:  # the Result's models and the planner load when a record is made: the scenario's checks
    from wss.model.results import WaferFolding  # ask only whether the wafers fold (wss validate starts faster)

__all__ = ["wafer_folding", "folds_wafers", "uniform_shards"]


def uniform_shards(scenario: Scenario) -> bool:
    """Does every wafer get the same number of samples?"""
    return scenario.training.global_batch % scenario.hardware.wafers == 0


def _shards(scenario: Scenario) -> str:
    """'1544 samples over 192 wafers: 8 wafers of 9, 184 of 8'."""
    from wss.model.plan.micro_batching import wafer_samples

    samples = wafer_samples(scenario.training.global_batch, scenario.hardware.wafers)
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
