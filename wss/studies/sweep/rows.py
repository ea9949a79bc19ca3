"""A point's row: its columns, and the fields read from a Result or an Estimate.

The fields are plain data (no pydantic objects), so a worker process or a Dask worker can send them
back and the cache can store them as JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from wss.model.result.results import BREAKDOWN_CATEGORIES, MemoryFootprint
from wss.studies.sweep.scaling import SCALE_KEY

__all__ = ["RESOLVED", "METRIC_COLUMNS", "blank_row", "error_fields", "failed_fields", "metrics"]

#: Columns of the resolved scenario, filled as a point loads.
RESOLVED = ("model", "wafers", "global_batch", "seq_len", "sparsity")
_BREAKDOWN = tuple(f"breakdown_{c}_s" for c in BREAKDOWN_CATEGORIES)
_MEMORY = tuple(MemoryFootprint.model_fields)
#: Columns measured by a point (NaN or None when the point did not run).
METRIC_COLUMNS = (
    "step_time_s",
    "samples_per_s",
    "tokens_per_s",
    "bound_by",
    *_BREAKDOWN,
    "fraction_of_peak",
    "energy_per_step_J",
    "energy_per_token_J",
    "average_power_W",
    *_MEMORY,
    "loss",
    "accuracy",
)


def blank_row(values: dict[str, Any], fidelity: str) -> dict[str, Any]:
    """A point's row before it is loaded: its varied values, and every other field empty."""
    row: dict[str, Any] = {**values, "status": None, "error": None}
    row.update(dict.fromkeys(RESOLVED))
    row["wafers"] = values.get(SCALE_KEY)
    row.update({"fidelity": fidelity, "key": None, "cached": False})
    return row


def error_fields(message: str) -> dict[str, Any]:
    """The fields of a point whose scenario is invalid or infeasible: ``status == "error"`` and the message."""
    return {"status": "error", "error": message, **dict.fromkeys(METRIC_COLUMNS)}


def failed_fields(exc: BaseException) -> dict[str, Any]:
    """The fields of a point that raised unexpectedly (a model bug, a dead worker): ``status == "failed"``."""
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", **dict.fromkeys(METRIC_COLUMNS)}


def _as_dict(obj: Any) -> dict[str, Any]:
    """A mapping, a pydantic model or a plain object as a dict (empty for None)."""
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    return dict(vars(obj))


def metrics(out: Any) -> dict[str, Any]:
    """The row fields of a Result (or an Estimate: the same names where it has them)."""
    row: dict[str, Any] = dict.fromkeys(METRIC_COLUMNS)
    for name in ("step_time_s", "samples_per_s", "tokens_per_s", "bound_by"):
        row[name] = getattr(out, name, None)
    breakdown = getattr(out, "breakdown_s", None)
    if breakdown is None:
        breakdown = getattr(out, "breakdown", None)
    for cat, value in _as_dict(breakdown).items():
        if f"breakdown_{cat}_s" in row:
            row[f"breakdown_{cat}_s"] = value
    flops = getattr(out, "flops", None)
    row["fraction_of_peak"] = getattr(flops, "fraction_of_peak", None) if flops is not None else None
    if row["fraction_of_peak"] is None:
        row["fraction_of_peak"] = getattr(out, "fraction_of_peak", None)
    energy = getattr(out, "energy", None)  # None: an Estimate, or hardware without power figures
    if energy is not None:
        row["energy_per_step_J"] = energy.per_step_J
        row["energy_per_token_J"] = energy.per_token_J
        row["average_power_W"] = energy.average_power_W
    memory = _as_dict(getattr(out, "memory", None))
    for name in _MEMORY:  # an Estimate has no footprint but may carry some of its fields (micro_batches)
        row[name] = memory[name] if name in memory else getattr(out, name, None)
    numerics = getattr(out, "numerics", None)
    if numerics is not None:
        losses, accuracies = list(numerics.losses or []), list(numerics.accuracies or [])
        row["loss"] = losses[-1] if losses else None
        row["accuracy"] = accuracies[-1] if accuracies else None
    return row
