"""Errors that wss raises for bad input.

Every error a user can cause (a malformed file, an unknown key, a value out of
range, a model that does not fit the machine) is a :class:`WssError`.  The CLI
turns it into one clear line and a non-zero exit code; the Python API lets it
propagate so notebooks see the same message.
"""

from __future__ import annotations

__all__ = [
    "WssError",
    "ScenarioError",
    "InfeasibleError",
    "FieldProblem",
    "SimulationStalled",
    "SimulatedTimeOverflow",
    "shorten",
    "quote",
    "MAX_ECHO_CHARS",
    "MAX_PROBLEMS_SHOWN",
]

from dataclasses import dataclass
from typing import Any

#: The most characters of the user's input an error message repeats back: a message quotes at most
#: one line of the input, so a 100 KB value or key costs one short line, not a screenful.
MAX_ECHO_CHARS = 200
#: The most problems one :class:`ScenarioError` lists; the rest are counted ("... and 12 more").
MAX_PROBLEMS_SHOWN = 20


def shorten(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` on one line and at most ``limit`` characters, cut with an ellipsis."""
    one_line = " ".join(str(text).splitlines())
    if len(one_line) <= limit:
        return one_line
    return one_line[: limit - 1] + "…"


def quote(value: Any, limit: int = MAX_ECHO_CHARS) -> str:
    """``repr(value)`` for an error message, cut to ``limit`` characters (long inputs are not echoed in full).

    A huge integer is summarised by its digit count, since ``repr`` of a number past Python's
    4,300-digit conversion limit raises.
    """
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 4 * limit:
        return f"<an integer of about {int(value.bit_length() * 0.30103)} digits>"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return shorten(repr(value), limit)


@dataclass(frozen=True)
class FieldProblem:
    """One thing wrong with one field: where it is and what is wrong."""

    path: str
    message: str
    line: int | None = None

    def render(self) -> str:
        where = shorten(self.path) if self.path else "<top level>"
        if self.line is not None:
            where = f"{where} (line {self.line})"
        # The message's own text is ours; a list of known names can be long, but never unbounded.
        return f"{where}: {shorten(self.message, 8 * MAX_ECHO_CHARS)}"


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
        source = shorten(self.source)
        if len(self.problems) == 1:
            return f"{source}: {self.problems[0].render()}"
        lines = [f"{source}: {len(self.problems)} problems"]
        lines += [f"  - {p.render()}" for p in self.problems[:MAX_PROBLEMS_SHOWN]]
        if len(self.problems) > MAX_PROBLEMS_SHOWN:
            lines.append(f"  ... and {len(self.problems) - MAX_PROBLEMS_SHOWN} more")
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


class SimulatedTimeOverflow(WssError):
    """A run whose simulated time stopped being a finite number: a rate so low (or an amount so large) that a
    transfer would end at infinity.

    The ranges of the scenario's fields keep every run finite; this stops a run that gets there anyway
    (from the Python API with hand-built settings, say) with one message instead of a loop that never
    ends.  The CLI exits with code 2, as for other bad input.
    """

    @classmethod
    def on(cls, part: str, now_s: float, rate_Bps: float) -> SimulatedTimeOverflow:
        """The error for ``part`` (a shared bandwidth) at simulated time ``now_s``, moving ``rate_Bps``.

        The message is the only argument, so SimPy can re-raise the error from the process it stops.
        """
        return cls(f"the simulated time on {part} is no longer finite (now {now_s:.6g} s, {rate_Bps:.3g} B/s): "
                   "a transfer would never end; a rate in the scenario is too low for the bytes it moves")
