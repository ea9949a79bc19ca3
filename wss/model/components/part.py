"""What every simulated part offers the code that builds, runs, folds and measures a cluster.

A part (a link, MemoryX, the optimizer, a wafer, its input workers, an activation store, a shared
bandwidth) is built from its own settings and owns its SimPy resources.  The builder starts its
:meth:`~Part.processes` in the cluster's start order; folding and measurement read its
:meth:`~Part.counters` (busy seconds and bytes, by name: what a fold extrapolates); a stalled run
names what it waited on from its :meth:`~Part.waits`; a fold is accepted only where every part's
:meth:`~Part.state` (what it holds queued or in flight, each entry with its own tolerance) is the same at the
two points compared.  Adding a part that meets this protocol to a cluster's list of parts is all the cluster
needs to start it, count it, compare it at fold points and explain its stalls; the cluster itself still says
who talks to whom.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import simpy

__all__ = ["Held", "Part", "Process", "Tolerance", "counters_of", "state_of", "waits_of"]

#: A SimPy process body: a generator of events.
Process = Generator[simpy.Event, Any, None]

#: How one entry of a part's state must agree at two fold points (:func:`wss.model.folding.fold.same_state`):
#: ``exact`` equal (a count of chunks, jobs or block inputs); ``relative`` equal to a relative 1e-9 (a level in
#: bytes); ``transfers`` as many transfers under way, each with the same bytes left to a relative 1e-9; ``period``
#: a time within 1e-9 of the compared period (the running job's time left).
Tolerance = Literal["exact", "relative", "transfers", "period"]


@dataclass(frozen=True)
class Held:
    """One entry of a part's state at a fold point: what it holds, and how equal two of them must be."""

    value: Any
    tolerance: Tolerance = "exact"


class Part(Protocol):
    """A simulated part of the cluster."""

    #: Unique in a cluster: the prefix of its counters and processes.
    name: str

    def processes(self) -> list[tuple[str, Process]]:
        """The processes to start, each under its name, in the order to start them (none: a passive part)."""
        ...

    def counters(self) -> dict[str, float]:
        """Every busy-time and byte counter, by name (what folding checks and extrapolates, what measure reads)."""
        ...

    def waits(self) -> dict[int, str]:
        """What a process can wait on in this part, by ``id``, in words (for a stalled run's message)."""
        ...

    def state(self) -> dict[str, Held]:
        """What it holds queued or in flight now, by name (each prefixed with the part's): two fold points whose
        states differ do not repeat.  Leaving a queue out can make a fold that does not repeat look valid."""
        ...


def counters_of(parts: Iterable[Part]) -> dict[str, float]:
    """The parts' counters, in the parts' order."""
    out: dict[str, float] = {}
    for part in parts:
        out.update(part.counters())
    return out


def waits_of(parts: Iterable[Part]) -> dict[int, str]:
    """The parts' waits, in the parts' order (a later part's name for the same object wins)."""
    out: dict[int, str] = {}
    for part in parts:
        out.update(part.waits())
    return out


def state_of(parts: Iterable[Part]) -> dict[str, Held]:
    """The parts' states, in the parts' order; two entries of one name would hide one another, so they raise."""
    out: dict[str, Held] = {}
    for part in parts:
        held = part.state()
        if not held.keys().isdisjoint(out):
            raise ValueError(f"{part.name} repeats state entries: {sorted(held.keys() & out.keys())}")
        out.update(held)
    return out
