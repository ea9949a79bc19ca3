"""Checks of a sweep's arguments, made before the first point loads.

A typo in a key, an unknown executor or a baseline that is not varied would otherwise fail every point
(or the frame at the very end), after the sweep has spent its time; here it is one SweepError at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from wss.studies.sweep.errors import SweepError
from wss.studies.sweep.points import Axis, varied_keys

__all__ = ["FIDELITIES", "EXECUTORS", "check_arguments", "check_baseline", "check_keys"]

FIDELITIES = ("simulate", "estimate")
EXECUTORS = ("process", "serial", "dask")


def check_arguments(base: Any, fidelity: str, executor: Any, workers: int | None) -> None:
    """Raise SweepError for a fidelity, executor, worker count or scenario file that cannot be run."""
    if fidelity not in FIDELITIES:
        raise SweepError(f"fidelity must be one of {', '.join(FIDELITIES)}, got {fidelity!r}")
    if isinstance(executor, str) and executor not in EXECUTORS:
        raise SweepError(f"executor must be one of {', '.join(EXECUTORS)} or have a submit method, got {executor!r}")
    if not isinstance(executor, str) and not callable(getattr(executor, "submit", None)):
        raise SweepError(f"executor {executor!r} has no submit method")
    if workers is not None and workers < 1:
        raise SweepError(f"workers must be at least 1, got {workers}")
    if isinstance(base, (str, Path)) and not Path(base).is_file():
        raise SweepError(f"{base}: no such scenario file")


def check_baseline(baseline: str | None, axes: list[Axis]) -> None:
    """Raise SweepError if the speed-up reference is given but not varied."""
    varied = varied_keys(axes)
    if baseline is not None and baseline not in varied:
        raise SweepError(f"baseline {baseline!r} is not a varied key ({', '.join(varied) or 'none'})")


def check_keys(axes: list[Axis], overrides: Mapping[str, Any] | None) -> None:
    """Raise SweepError naming the first varied or fixed key that no scenario has (a typo would fail every point)."""
    from wss.model.scenario.loader import key_problem

    checks = [("vary", key, [row[i] for row in ax.values]) for ax in axes for i, key in enumerate(ax.keys)]
    checks += [("overrides", key, [value]) for key, value in (overrides or {}).items()]
    for what, key, values in checks:
        problem = key_problem(key, values)
        if problem is not None:
            raise SweepError(f"{what}: {problem}")
