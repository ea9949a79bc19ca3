"""Runs whose only use is their step: a size of ``wss size``, a sweep's point.

A cluster that ``simulation.fold_wafers: auto`` runs apart only because the batch does not divide over its
wafers gives, with the busiest wafer standing for all, the very step the wafers run apart give (every broadcast and
every reduction of the lock-step tree waits for that wafer: :func:`~wss.model.scenario.fold_rules.folds_for_the_step`);
what only the run apart shows, every other wafer's own idle time, is not in such a study's rows.  So those studies
fold it, for a small fraction of the events (GPT-3 175B on 103 wafers: 30,286 against 1,643,906).
"""

from __future__ import annotations

from wss.model.scenario import Scenario, load_scenario
from wss.model.scenario.fold_rules import folds_for_the_step

__all__ = ["step_only"]


def step_only(scenario: Scenario) -> Scenario:
    """``scenario`` as a study that reads only its step runs it: with the busiest wafer standing for all where that
    gives the same step, else unchanged."""
    if folds_for_the_step(scenario):
        return load_scenario(scenario, {"simulation.fold_wafers": True})
    return scenario
