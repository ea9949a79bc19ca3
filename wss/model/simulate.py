"""``wss.simulate(scenario) -> Result``: the pure entry point of the model."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from wss.model.cluster import Cluster, run_cluster
from wss.model.fold import FoldMismatch
from wss.model.measure import measure
from wss.model.plan import Plan, make_plan
from wss.model.results import NumericsSummary, Result
from wss.model.scenario import Scenario, load_scenario
from wss.model.unfolded import run_unfolded
from wss.model.wafer_folding import uniform_shards, wafer_folding

__all__ = ["simulate", "simulate_detailed", "plan", "would_fold"]

#: What the run decided and why (``wss -v``): the plan, folding, fallbacks.  The model never configures logging.
log = logging.getLogger(__name__)


def _as_scenario(scenario: Scenario | Mapping[str, Any] | str | Path) -> Scenario:
    return scenario if isinstance(scenario, Scenario) else load_scenario(scenario)


def plan(scenario: Scenario | Mapping[str, Any] | str | Path) -> Plan:
    """Check a scenario against the machine (capacities, SRAM) without running it."""
    return make_plan(_as_scenario(scenario))


def simulate(scenario: Scenario | Mapping[str, Any] | str | Path) -> Result:
    """Simulate a scenario and return its Result.

    Deterministic: the same scenario gives a byte-identical ``Result.to_json()``.
    No file is read except the scenario itself when a path is given.
    """
    return simulate_detailed(scenario, record=False)[0]


def simulate_detailed(
    scenario: Scenario | Mapping[str, Any] | str | Path,
    record: bool = True,
    progress: Callable[[float], None] | None = None,
) -> tuple[Result, Cluster]:
    """Simulate and also return the finished :class:`~wss.model.cluster.Cluster`.

    With ``record`` every link, MemoryX and the wafer keep their spans
    (start, end, pass, bytes), which traces and timelines are drawn from.
    Recording changes nothing else: the run folds as it would without it and
    the Result is byte-identical, so the spans are on the simulated axis and
    :class:`wss.model.folded_spans.UnfoldedSpans` places them on the
    Result's.  ``progress`` is called with the fraction of the run done
    (monotone, ending at 1.0); it does not change the Result either.
    """
    from wss._version import __version__

    s = _as_scenario(scenario)
    profiles = None
    numerics = None
    if s.numerics.enabled:
        from wss.model.numerics_bridge import run_numerics

        outcome, profiles = run_numerics(s)
        numerics = NumericsSummary(losses=list(outcome.losses), accuracies=list(outcome.accuracies))
    folding = wafer_folding(s)
    run = run_cluster if folding.folded else run_unfolded
    p = _folding_plan(s, profiles)
    log.info("%s: %s", s.name, p.choice.line() if p.choice is not None else f"checkpointing {p.checkpointing}")
    log.info("%s: wafers %s (%s); simulating %d of %d micro-batches per step, %d of %d steps", s.name,
             "folded" if folding.folded else "unfolded", folding.reason, len(p.simulated_micro_batches),
             len(p.micro_batches), p.simulated_steps, s.training.steps)
    try:
        cluster = run(p, record=record, progress=progress)
    except FoldMismatch as exc:
        log.info("%s: the fold's check failed (%s): simulating again with less folded", s.name, exc)
        cluster = _run_less_folded(s, profiles, p, record, progress, run)
    log.debug("%s: %d SimPy events", s.name, cluster.events)
    return measure(cluster, __version__, numerics), cluster


def _folding_plan(s: Scenario, profiles: Any) -> Plan:
    """The plan a run simulates, with the micro-batches and steps it may fold.

    Micro-batches fold when every wafer runs the same ones (not with uneven shards unfolded) and every
    micro-batch repeats the one before (not with random slow flash reads).  Steps fold only in the
    folded cluster (the unfolded one has no step-fold check yet).
    """
    folded = wafer_folding(s).folded
    fold = (folded or uniform_shards(s)) and s.faults.flash is None
    return make_plan(s, profiles, fold=fold, fold_steps=folded)


def would_fold(scenario: Scenario | Mapping[str, Any] | str | Path) -> bool:
    """Would :func:`simulate` fold micro-batches or steps (if the folds pass their checks)?  Then a trace
    of the run marks the stretches its copies fill (:mod:`wss.model.folded_spans`)."""
    p = _folding_plan(_as_scenario(scenario), None)
    return bool(p.fold_copies or p.step_fold_copies)


def _run_less_folded(s: Scenario, profiles: Any, folded: Plan, record: bool,
                     progress: Callable[[float], None] | None, run: Callable[..., Cluster]) -> Cluster:
    """After a fold failed its check: steps unfolded (micro-batches still folded), else nothing folded."""
    if folded.step_fold_copies:
        try:
            return run(make_plan(s, profiles, fold_steps=False), record=record, progress=progress)
        except FoldMismatch as exc:
            log.info("%s: micro-batches do not repeat either (%s): simulating every one", s.name, exc)
    return run(make_plan(s, profiles, fold=False), record=record, progress=progress)
