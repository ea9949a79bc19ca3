"""The plan a run simulates, with what it may fold, and the work that plan would cost.

:func:`folding_plan` is what :func:`wss.model.simulate.simulate_detailed` runs; :func:`check_work` counts
the chunks its program moves and refuses a run past the work bound before anything runs (``wss validate``
asks it too, without loading the simulator or the Result's models).
"""

from __future__ import annotations

from typing import Any

from wss.errors import FieldProblem, ScenarioError
from wss.model.plan import Plan, make_plan
from wss.model.plan.problems import scenario_source
from wss.model.program import build_program, chunk_passes
from wss.model.scenario import Scenario
from wss.model.scenario.fold_rules import fold_decision, simulated_wafers
from wss.model.scenario.limits import MAX_CHUNK_PASSES

__all__ = ["folding_plan", "check_work"]


def folding_plan(s: Scenario, profiles: Any, fold_layers: bool = True) -> Plan:
    """The plan a run simulates, with the micro-batches, steps and layers it may fold.

    Micro-batches fold where every micro-batch repeats the one before (not with random slow flash reads): with
    uneven shards unfolded, over the slots where every class of wafers repeats its own size
    (:func:`~wss.model.plan.micro_batching.simulated_micro_batches`).  Steps fold only in the folded cluster
    (the unfolded one has no step-fold check yet); identical blocks fold in both, in the micro-batches where
    every wafer's is the same size (:func:`~wss.model.plan.micro_batching.uneven_slots`), not with random slow
    flash reads.  A recording run folds as the plain one does.
    """
    folded = fold_decision(s)[0]
    fold = s.faults.flash is None
    layers = fold_layers and s.faults.flash is None
    return make_plan(s, profiles, fold=fold, fold_steps=folded, fold_layers=layers)


def check_work(s: Scenario, p: Plan | None = None) -> None:
    """Refuse a run whose simulated work, counted on the plan it runs (after folding), exceeds the bound.

    The scenario's own checks bound the work before planning, from upper estimates
    (:mod:`wss.model.scenario.limits`); here the plan is known, so the count is the run's: every streamed
    pass's chunks and every offloaded block input's chunks that the program simulates, times the wafers
    simulated apart.  A tiny ``simulation.chunk_bytes`` under activation offload is what the scenario's
    estimate cannot see: offloaded activations travel in chunks an eighth of its size.
    """
    p = p if p is not None else folding_plan(s, None)
    weights, activations = chunk_passes(p, build_program(p))
    wafers = 1 if fold_decision(s)[0] else simulated_wafers(s)
    work = (weights + activations) * wafers
    if work <= MAX_CHUNK_PASSES:
        return
    apart = f", x {wafers:,} wafers simulated apart" if wafers > 1 else ""
    if activations > weights:
        field = "simulation.chunk_bytes"
        fix = "raise simulation.chunk_bytes or choose another training.activation_checkpointing"
    else:
        field, fix = "training.steps", "lower training.steps or simulation.max_chunks_per_kernel"
    raise ScenarioError(scenario_source(s), [FieldProblem(field, (
        f"the run would simulate {work:,} chunk passes ({weights:,} of weights and {activations:,} of offloaded "
        f"activations{apart}); a run simulates at most {MAX_CHUNK_PASSES:,} (a few minutes): {fix}"))])
