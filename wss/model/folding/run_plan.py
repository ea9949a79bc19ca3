"""The plan a run simulates, with what it may fold, and the work that plan would cost.

:func:`folding_plan` is what :func:`wss.model.simulate.simulate_detailed` runs; :func:`check_work` counts
the chunks its program moves and refuses a run past the work bound before anything runs (``wss validate``
asks it too, without loading the simulator or the Result's models).  :func:`run_work` estimates the events
and seconds of the run as it will go, and :func:`long_run_note`
says so before a long one starts (``wss simulate`` on stderr).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from wss.errors import FieldProblem, ScenarioError
from wss.model.plan import Plan, make_plan
from wss.model.plan.problems import scenario_source
from wss.model.program import build_program, chunk_passes
from wss.model.scenario import Scenario
from wss.model.scenario.fold_rules import fold_decision, folds_for_the_step, simulated_wafers
from wss.model.scenario.limits import MAX_CHUNK_PASSES

__all__ = ["folding_plan", "check_work", "RunWork", "run_work", "long_run_note", "EVENTS_PER_CHUNK_PASS",
           "EVENTS_PER_SECOND", "LONG_RUN_S"]

#: SimPy events per chunk pass (per simulated wafer), measured on GPT-3 175B: 8 on unfolded clusters of 9 and
#: 67 wafers, 13-17 on folded ones of 64 and 192 (the fill, drain and updates add to short runs).
EVENTS_PER_CHUNK_PASS = 10
#: Events a second on one core: measured on those runs by CPU time on a quiet machine, medians of three, 186,000
#: to 273,000 (the unfolded 9 and 67 wafers: 207,000 and 273,000), after SimPy's fast paths; a loaded machine
#: runs at about half (85,000 to 127,000 were measured so before them).
EVENTS_PER_SECOND = 200_000
#: A run estimated to take longer than this is announced before it starts (:func:`long_run_note`).
LONG_RUN_S = 10.0


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


@dataclass(frozen=True)
class RunWork:
    """What a run will simulate, as estimated before it starts.

    ``chunk_passes`` counts the plan as it runs, every simulated wafer's.  With uneven shards, a wafer with fewer
    samples drifts ahead of the largest from block to block in the micro-batches whose sizes differ between wafers;
    a drift fold (:mod:`wss.model.folding.drift`) stands for those blocks where its checks hold, and the count is of
    that run.  Where its checks may refuse, the run simulates every block of those micro-batches:
    ``most_chunk_passes`` counts that run (the failed attempt stops at its first failed check); where no drift fold
    is tried (a slow edge, jitter, a store with bandwidths of its own), ``chunk_passes`` already does.
    """

    chunk_passes: int
    wafers: int  # simulated apart (1 when folded)
    reason: str  # why the wafers are folded or not, in words
    most_chunk_passes: int | None = None  # every block of the uneven slots, where a drift fold may be refused

    @property
    def events(self) -> int:
        return self.chunk_passes * EVENTS_PER_CHUNK_PASS

    @property
    def seconds(self) -> float:
        return self.events / EVENTS_PER_SECOND


def run_work(s: Scenario, p: Plan | None = None) -> RunWork:
    """Estimate the run's work (see :class:`RunWork`) on the plan it runs, without simulating."""
    p = p if p is not None else folding_plan(s, None)
    folded, reason = fold_decision(s)
    wafers = 1 if folded else simulated_wafers(s)
    passes = sum(chunk_passes(p, build_program(p))) * wafers
    if not (p.layer_runs and p.uneven_slots and not folded):
        return RunWork(passes, wafers, reason)
    full = replace(p, blocks_unfolded_in=p.uneven_slots)
    every_block = sum(chunk_passes(full, build_program(full))) * wafers
    faults = s.faults
    if faults.links or faults.jitter is not None or \
            not s.hardware.activation_store.is_per_wafer:  # no drift fold is tried (drifting_wafers)
        return RunWork(every_block, wafers, reason)
    return RunWork(passes, wafers, reason, every_block)


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} minutes"


def long_run_note(s: Scenario, work: RunWork) -> str | None:
    """One line announcing a run estimated to take more than :data:`LONG_RUN_S`, with why and what would
    shorten it; None for a shorter one."""
    if work.seconds <= LONG_RUN_S:
        return None
    why = ""
    if work.wafers > 1:
        why = (f": the wafers are simulated apart, {work.wafers:,} standing for the {s.hardware.wafers:,} "
               f"({work.reason.removeprefix('auto: ')})")
    fix = ""
    if work.wafers > 1 and folds_for_the_step(s):
        fix = ("; simulation.fold_wafers: true folds the wafers and gives the same step in a fraction of the time "
               "(the busiest stands for all; only the other wafers' own idle times are not simulated)")
    elif work.wafers > 1 and not s.faults.sets_wafers_apart:
        fix = "; simulation.fold_wafers: true folds the wafers (the busiest stands for all)"
    most = ""
    if work.most_chunk_passes is not None:
        most = (f"; up to {work.most_chunk_passes * EVENTS_PER_CHUNK_PASS / 1e6:.2g} million where a drift fold's "
                "checks refuse the blocks of the micro-batches whose sizes differ")
    return (f"{s.name}: this run will take about {_duration(work.seconds)} on one core (about "
            f"{work.events / 1e6:.2g} million events{most}){why}{fix}")
