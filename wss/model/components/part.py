"""What every simulated part offers the code that builds, runs, folds and measures a cluster.

A part (a link, MemoryX, the optimizer, a wafer, its input workers, an activation store, a shared
bandwidth) is built from its own settings and owns its SimPy resources.  The builder starts its
:meth:`~Part.processes` in the cluster's start order; folding and measurement read its
:meth:`~Part.counters` (busy seconds and bytes, by name: what a fold extrapolates); a stalled run
names what it waited on from its :meth:`~Part.waits`.  Adding a part that meets this protocol to a
cluster's list of parts is all the cluster needs to start it, count it and explain its stalls; the
cluster itself still says who talks to whom, and what is queued at a fold point
(``Cluster.state``, whose entries are compared each with its own tolerance).
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Any, Protocol

import simpy

__all__ = ["Part", "Process", "counters_of", "waits_of"]

#: A SimPy process body: a generator of events.
Process = Generator[simpy.Event, Any, None]


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
