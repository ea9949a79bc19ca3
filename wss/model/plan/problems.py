"""How a planning step says the machine cannot run a scenario.

Every capacity check raises :class:`~wss.errors.InfeasibleError` with one
:class:`~wss.errors.FieldProblem` naming the scenario field to change, and
formats byte counts the same way, so the steps share these helpers.
"""

from __future__ import annotations

from wss.errors import FieldProblem, InfeasibleError
from wss.model.scenario import Scenario

__all__ = ["scenario_source", "fmt_bytes", "infeasible"]


def scenario_source(s: Scenario) -> str:
    """How errors name a scenario after loading (the CLI replaces it with the file path)."""
    return f"<scenario {s.name!r}>"


def fmt_bytes(b: float) -> str:
    """A byte count with a decimal unit and three significant digits, e.g. ``'1.5 GB'``."""
    for unit, scale in (("PB", 1e15), ("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if b >= scale:
            return f"{b / scale:.3g} {unit}"
    return f"{b:.3g} B"


def infeasible(s: Scenario, field: str, message: str) -> InfeasibleError:
    """The error for one capacity check that failed.

    Parameters
    ----------
    s
        The scenario being planned.
    field
        Dotted scenario field the user would change, e.g. ``"hardware.memoryx"``.
    message
        What does not fit, with the figures.
    """
    return InfeasibleError(scenario_source(s), [FieldProblem(field, message)])
