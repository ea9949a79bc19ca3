"""``wss.simulate(scenario) -> Result``: the pure entry point of the model."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from wss.model.folding.ladder import run_folded
from wss.model.folding.run_plan import check_work, folding_plan, long_run_note, run_work
from wss.model.plan import Plan, make_plan
from wss.model.result.measure import measure, wafer_folding
from wss.model.result.results import NumericsSummary, Result
from wss.model.scenario import Scenario, load_scenario
from wss.model.sim.cluster import Cluster, run_cluster
from wss.model.sim.unfolded import run_unfolded

__all__ = ["simulate", "simulate_detailed", "plan", "would_fold", "check_work"]


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
    fold_layers: bool = True,
) -> tuple[Result, Cluster]:
    """Simulate and also return the finished :class:`~wss.model.sim.cluster.Cluster`.

    With ``record`` every link, MemoryX and the wafer keep their spans
    (start, end, pass, bytes), which traces and timelines are drawn from.
    Recording changes nothing else: the run folds as it would without it and
    the Result is byte-identical, so the spans are on the simulated axis and
    :class:`wss.model.folding.folded_spans.UnfoldedSpans` places them on the
    Result's.  ``progress`` is called with the fraction of the run done
    (monotone, ending at 1.0); it does not change the Result either.
    ``fold_layers=False`` simulates every block even where identical ones would fold
    (:mod:`wss.model.folding.layer_fold`): for checking the fold; the answer agrees to 1e-9.
    """
    from wss._version import __version__

    s = _as_scenario(scenario)
    profiles = None
    numerics = None
    if s.numerics.enabled:
        from wss.model.numerics.bridge import run_numerics

        outcome, profiles = run_numerics(s)
        numerics = NumericsSummary(losses=list(outcome.losses), accuracies=list(outcome.accuracies))
    folding = wafer_folding(s)
    run: Callable[..., Cluster[Any]] = run_cluster if folding.folded else run_unfolded
    progress = _monotone(progress)
    p = folding_plan(s, profiles, fold_layers)
    check_work(s, p)
    note = long_run_note(s, run_work(s, p))
    if note is not None:  # said before it starts (wss simulate: on stderr), the Result unchanged
        log.warning(note)
    log.info("%s: %s", s.name, p.choice.line() if p.choice is not None else f"checkpointing {p.checkpointing}")
    log.info("%s: wafers %s (%s); simulating %d of %d micro-batches per step, %d of %d steps, %d of %d blocks",
             s.name, "folded" if folding.folded else "unfolded", folding.reason, len(p.simulated_micro_batches),
             len(p.micro_batches), p.simulated_steps, s.training.steps, _blocks(p) - len(p.dropped_blocks),
             _blocks(p))
    cluster = run_folded(s, profiles, p, partial(run, record=record, progress=progress))
    log.debug("%s: %d SimPy events", s.name, cluster.events)
    return measure(cluster, __version__, numerics), cluster


def _monotone(progress: Callable[[float], None] | None) -> Callable[[float], None] | None:
    """``progress`` as promised, monotone: a run simulated again after a fold failed its check starts its
    fractions from 0, which are held back until they pass the furthest already told."""
    if progress is None:
        return None
    told = [0.0]

    def call(fraction: float) -> None:
        if fraction > told[0]:
            told[0] = fraction
            progress(fraction)

    return call


def _blocks(p: Plan) -> int:
    return len({op.block for op in p.ops if op.block is not None})


def would_fold(scenario: Scenario | Mapping[str, Any] | str | Path) -> bool:
    """Would :func:`simulate` fold micro-batches, steps or blocks (if the folds pass their checks)?  Then a
    trace of the run marks the stretches its copies fill (:mod:`wss.model.folding.folded_spans`)."""
    p = folding_plan(_as_scenario(scenario), None)
    return bool(p.fold_copies or p.step_fold_copies or p.layer_runs)
