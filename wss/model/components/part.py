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

What a Result reports of a part, the part declares too: a :class:`Reported` part its busy fractions by the
Result's key (:meth:`~Reported.utilisation`), a :class:`Carrier` the bytes it moves by link class
(:meth:`~Carrier.carried`), both read from its counters at the end of the run (:class:`Reading`); a
:class:`Powered` part what it draws (:meth:`~Powered.power_draw`: its units, its busy fraction from the Result's
utilisation, its watts); a :class:`Traced` part that records its transfers the tracks a trace draws of them
(:meth:`~Traced.tracks`).  The cluster lists them in the Result's order; the measurement and the trace only
iterate over them.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import simpy

__all__ = ["Carried", "Carrier", "Held", "Part", "PowerDraw", "Powered", "Process", "Reading", "Reported", "Tolerance",
           "Track", "Traced", "carried_of", "counters_of", "state_of", "utilisation_of", "waits_of"]

#: A SimPy process body: a generator of events.
Process = Generator[simpy.Event, Any, None]

#: How one entry of a part's state must agree at two fold points (:func:`wss.model.folding.fold.same_state`):
#: ``exact`` equal (a count of chunks, jobs or block inputs); ``relative`` equal to a relative 1e-9 (a level in
#: bytes); ``transfers`` as many transfers under way, each with the same bytes left to a relative 1e-9, or to what
#: the entry's ``rate`` moves in 1e-9 of the compared period (bytes left are worked out from the clock, so they
#: carry its rounding times the rate, as a running job's time left does); ``period`` a time within 1e-9 of the
#: compared period (the running job's time left).
Tolerance = Literal["exact", "relative", "transfers", "period"]


@dataclass(frozen=True)
class Held:
    """One entry of a part's state at a fold point: what it holds, and how equal two of them must be."""

    value: Any
    tolerance: Tolerance = "exact"
    #: For ``transfers``: the bytes per second the transfers under way move at, together (0: compared relatively).
    rate: float = 0.0


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


@dataclass(frozen=True)
class Reading:
    """What a part reads to report itself in a Result, after the run.

    ``total(counter)`` is a counter's final value on the unfolded time axis (the cluster's, so a folded run's
    repeats are counted), ``seconds`` the run's length on that axis, ``wafers`` the wafers that train (a wafer
    cut off by a SwarmX node that is down does not).
    """

    total: Callable[[str], float]
    seconds: float
    wafers: int


@dataclass(frozen=True)
class Carried:
    """Bytes over one class of link in the whole run: ``links`` physical links, ``per_link_bytes`` on each."""

    links: int
    per_link_bytes: float


class Reported(Protocol):
    """A part the Result's ``utilisation`` reports."""

    def utilisation(self, at: Reading) -> dict[str, float]:
        """Its busy fractions of the run, by the Result's key, in the order the Result lists them."""
        ...


class Carrier(Protocol):
    """A part whose bytes the Result's ``link_bytes`` reports."""

    def carried(self, at: Reading) -> dict[str, Carried]:
        """The bytes it moved, by class of link (``<from>-><to>``), in the order the Result lists them."""
        ...


@dataclass(frozen=True)
class PowerDraw:
    """What a kind of part draws: ``units`` alike (MemoryX's nodes, say), each busy ``busy`` of the run, drawing
    ``busy_W`` then and ``idle_W`` otherwise (None: ``busy_W``; ``busy_W`` None: no figure, so no energy)."""

    kind: str
    units: int
    busy: float
    busy_W: float | None
    idle_W: float | None = None


class Powered(Protocol):
    """A part the Result's ``energy`` counts."""

    def power_draw(self, utilisation: dict[str, float]) -> PowerDraw:
        """What it draws, its busy fraction read from the Result's ``utilisation`` (its own entries, or those of
        the parts it is made of)."""
        ...


@dataclass(frozen=True)
class Track:
    """One thread of a trace: the transfers a part recorded, ``(start, end, pass index, bytes)`` each on the
    simulated axis, drawn as ``thread`` of the trace's ``process``.  ``counter`` names its busy-fraction counter
    (None: it has none) and, where the part queued (``occupancy``: ``(time, chunks queued)`` samples), its mean
    buffer occupancy counter."""

    process: str
    thread: str
    spans: Sequence[tuple[float, float, int, float]]
    counter: str | None = None
    occupancy: Sequence[tuple[float, int]] = ()


class Traced(Protocol):
    """A part that records its transfers (only when asked to: a ``record()`` switch)."""

    def tracks(self) -> list[Track]:
        """Its threads, in the order to draw them (none while it does not record)."""
        ...


def utilisation_of(parts: Iterable[Reported], at: Reading) -> dict[str, float]:
    """The parts' utilisation entries, in the parts' order; two entries of one key would hide one another."""
    out: dict[str, float] = {}
    for part in parts:
        _add_apart(out, part.utilisation(at), part)
    return out


def carried_of(parts: Iterable[Carrier], at: Reading) -> dict[str, Carried]:
    """The parts' bytes by class of link, in the parts' order; two classes of one name would hide one another."""
    out: dict[str, Carried] = {}
    for part in parts:
        _add_apart(out, part.carried(at), part)
    return out


def _add_apart(out: dict[str, Any], more: dict[str, Any], part: object) -> None:
    """``out.update(more)``, raising where a key is already there."""
    if not more.keys().isdisjoint(out):
        raise ValueError(f"{getattr(part, 'name', part)} repeats reported entries: {sorted(more.keys() & out.keys())}")
    out.update(more)
