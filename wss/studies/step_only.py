"""Runs whose only use is their step: a size of ``wss size``, a sweep's point.

A cluster that ``simulation.fold_wafers: auto`` runs apart only because the batch does not divide over its
wafers gives, with the busiest wafer standing for all, the very step the wafers run apart give (every broadcast and
every reduction of the lock-step tree waits for that wafer: :func:`~wss.model.scenario.fold_rules.folds_for_the_step`);
what only the run apart shows, every other wafer's own idle time, is not in such a study's rows.  So those studies
fold it, for a small fraction of the events (GPT-3 175B on 103 wafers: 30,286 against 1,643,906).  Likewise a
cluster with equal shards set apart by stragglers alone runs with every wafer as slow as the slowest
(:func:`~wss.model.scenario.fold_rules.slowdown_for_the_step`), one class of identical wafers: GPT-3 175B on 192
wafers with one 1.1x straggler in 26,938 events against 97,988 apart.
"""

from __future__ import annotations

from wss.model.scenario import Scenario, load_scenario
from wss.model.scenario.fold_rules import folds_for_the_step, slowdown_for_the_step

__all__ = ["step_only"]


def step_only(scenario: Scenario) -> Scenario:
    """``scenario`` as a study that reads only its step runs it: with the busiest wafer standing for all, or every
    wafer as slow as the slowest, where that gives the same step; else unchanged."""
    if folds_for_the_step(scenario):
        return load_scenario(scenario, {"simulation.fold_wafers": True})
    slowdown = slowdown_for_the_step(scenario)
    if slowdown is not None:
        every = [{"wafer": w, "slowdown": slowdown} for w in range(scenario.hardware.wafers)]
        return load_scenario(scenario, {"faults.stragglers": every})
    return scenario
