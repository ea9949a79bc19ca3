"""What runs a point, in a pool worker, on Dask or in this process: :func:`run_point`.

A top-level function of plain data in and out, importable by name, so spawned processes and Dask
workers can unpickle it; it imports the model (or the estimate) only when a point first needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from wss.errors import ScenarioError, WssError
from wss.model.scenario import Scenario
from wss.studies.sweep.rows import error_fields, metrics

__all__ = ["run_point"]


def _estimator() -> Callable[[Scenario], Any]:
    """:func:`wss.studies.estimate.estimate`, imported when a point first needs it."""
    from wss.studies.estimate import estimate

    return estimate


def run_point(scenario: Mapping[str, Any], fidelity: str = "simulate", source: str | None = None) -> dict[str, Any]:
    """Run one resolved scenario (``Scenario.model_dump(mode="json")``) and return its row fields.

    A point whose wafers ``auto`` would run apart only because the batch does not divide over them is simulated
    with the busiest wafer standing for all: its row (the step, the representative wafer's breakdown, memory,
    energy) is the same to rounding, and only the per-wafer idle times a row does not hold differ.

    A top-level function of plain data in and out, so process pools (spawn)
    and Dask workers can run it.  A :class:`~wss.errors.WssError` becomes
    ``status == "error"`` (its message naming ``source``, the base scenario
    file, when given); anything else propagates.
    """
    s = Scenario.model_validate(scenario)
    try:
        if fidelity == "estimate":
            out = _estimator()(s)
        else:
            from wss.model.simulate import simulate
            from wss.studies.step_only import step_only

            out = simulate(step_only(s))  # a row reads only the step
    except ScenarioError as exc:
        if source and exc.source.startswith("<"):
            exc = type(exc)(source, exc.problems)  # errors found after loading name an in-memory '<scenario>'
        return error_fields(str(exc))
    except WssError as exc:
        return error_fields(str(exc))
    return {"status": "ok", "error": None, **metrics(out)}
