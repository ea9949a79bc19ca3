"""Errors that wss raises for bad input.

Every error a user can cause (a malformed file, an unknown key, a value out of
range, a model that does not fit the machine) is a :class:`WssError`.  The CLI
turns it into one clear line and a non-zero exit code; the Python API lets it
propagate so notebooks see the same message.
"""

from __future__ import annotations

__all__ = ["WssError", "ScenarioError", "InfeasibleError", "FieldProblem", "SimulationStalled"]

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with one field: where it is and what is wrong."""

    path: str
    message: str
    line: int | None = None

    def render(self) -> str:
        where = self.path or "<top level>"
        if self.line is not None:
            where = f"{where} (line {self.line})"
        return f"{where}: {self.message}"


class WssError(Exception):
    """Base class of every error caused by user input."""


class ScenarioError(WssError):
    """A scenario that cannot be read or does not validate.

    Parameters
    ----------
    source
        The file the scenario came from, or ``"<dict>"`` for an in-memory one.
    problems
        What is wrong, one entry per offending field.
    """

    def __init__(self, source: str, problems: list[FieldProblem] | tuple[FieldProblem, ...]):
        self.source = source
        self.problems = tuple(problems)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.problems) == 1:
            return f"{self.source}: {self.problems[0].render()}"
        lines = [f"{self.source}: {len(self.problems)} problems"]
        lines += [f"  - {p.render()}" for p in self.problems]
        return "\n".join(lines)


class InfeasibleError(ScenarioError):
    """A valid scenario the machine cannot run (does not fit memory, SRAM, ...)."""


class SimulationStalled(WssError):
    """A run that stopped making progress: every part waits for another and no event is left.

    This is a fault of the model (or a scenario it cannot represent), never a
    wrong answer: the message names the simulated time, the wafer's place in the
    program, and what each blocked part waits for.  The CLI exits with code 3.
    """

    def __init__(self, when: str, waits: list[str]):
        self.when = when
        self.waits = tuple(waits)
        lines = [f"the simulation stopped making progress {when}; nothing can move:"]
        lines += [f"  - {w}" for w in waits]
        super().__init__("\n".join(lines))
