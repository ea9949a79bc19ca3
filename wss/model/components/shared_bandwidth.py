"""A bandwidth that every user shares fairly: MemoryX's DRAM, its network ports, an activation store.

Several transfers that draw on one memory or one set of ports at once each get
a fair share: :class:`SharedBandwidth` serves them by processor sharing, ``n``
transfers in progress each moving at ``bandwidth / n``.  That is the fluid
limit of a controller that interleaves its requesters fairly; a transfer alone
runs at the full rate, so ``bytes / bandwidth`` exactly.

A transfer may carry a weight ``w``: it stands for ``w`` transfers of ``bytes / w`` each (one
simulated wafer standing for ``w`` identical ones, on parts they share) and gets ``w`` shares
(weighted, or generalised, processor sharing), so it ends when those ``w`` transfers would.

Processor sharing is computed in virtual time (Kleinrock, "Queueing Systems,
Volume 2", 1976, section 4.4): the virtual clock ``V`` advances at
``bandwidth / W`` (``W`` the weights of the transfers in progress, ``n`` when
each weighs 1), a transfer of ``b`` bytes and weight ``w`` that starts at
virtual time ``v`` ends when ``V = v + b / w``, and the order of those ends
never changes once the transfer starts.  One timer is pending at a time, for the earliest end; a
transfer that starts or ends moves it.  No process runs: the timer's callback
does the work, so an uncontended transfer costs one timeout.

The timer's callback is a :class:`_Timer`, whose ``__self__`` is the bandwidth (as a bound method's is its object),
so a drift fold can tell which part a pending timer belongs to; and the bandwidth reads the time through
:attr:`SharedBandwidth.clock` (the environment's ``now`` unless set), so one that belongs to a drifting world
keeps that world's time in its timers' callbacks too (:mod:`wss.model.folding.drift`).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable

import simpy

from wss.errors import SimulatedTimeOverflow
from wss.model.components.part import Held, Process, Reading

__all__ = ["SharedBandwidth"]


class _Timer:
    """The callback of one armed timer: calls back its bandwidth with the generation it was armed at."""

    __slots__ = ("__self__", "gen")

    def __init__(self, owner: SharedBandwidth, gen: int):
        self.__self__ = owner
        self.gen = gen

    def __call__(self, _event: simpy.Event) -> None:
        self.__self__._on_timer(self.gen)


class SharedBandwidth:
    """A bandwidth shared fairly by the transfers in progress (processor sharing).

    ``transfer(nbytes)`` returns an event that fires when the bytes have moved.
    ``bytes_moved`` and ``busy_s`` (time with at least one transfer in progress)
    are counters for results and folding.
    """

    def __init__(self, env: simpy.Environment, bandwidth_Bps: float, name: str):
        if not bandwidth_Bps > 0:
            raise ValueError(f"the bandwidth of {name} must be positive")
        self.env = env
        self.bandwidth_Bps = float(bandwidth_Bps)
        self.name = name
        self._heap: list[tuple[float, int, simpy.Event, float]] = []  # (virtual end, sequence, event, weight)
        self._weight = 0.0  # the weights of the transfers in progress
        self._seq = 0
        self._virtual = 0.0
        self._since = 0.0  # when the virtual clock was last brought up to date
        self._timer_gen = 0
        self.bytes_moved = 0.0
        self.busy_s = 0.0
        #: Reads the time (None: the environment's ``now``): set for a bandwidth of a drifting world, whose timers'
        #: callbacks run with no process of that world active.
        self.clock: Callable[[], float] | None = None

    def _now(self) -> float:
        return self.env.now if self.clock is None else self.clock()

    def processes(self) -> list[tuple[str, Process]]:
        return []  # passive: transfers are driven by the parts that use it

    def counters(self) -> dict[str, float]:
        return {self.name: self.busy_s, self.name + ".bytes": self.bytes_moved}

    def waits(self) -> dict[int, str]:
        return {}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of its bandwidth used over the run: bytes moved over bandwidth x time.  Shared by
        processor sharing, it moves bytes at its full bandwidth whenever a transfer is under way, so this is also
        the fraction of the run it was busy."""
        return {self.name: at.total(self.name + ".bytes") / (self.bandwidth_Bps * at.seconds)}

    def state(self) -> dict[str, Held]:
        """The bytes left of each transfer under way."""
        return {self.name + ".transfers": Held(self.remaining(), "transfers", self.bandwidth_Bps)}

    @property
    def in_progress(self) -> int:
        """Transfers under way."""
        return len(self._heap)

    def remaining(self) -> tuple[float, ...]:
        """Bytes left of each transfer under way, earliest end first (part of the state fold checks compare)."""
        self._advance()
        return tuple((end - self._virtual) * weight for end, _, _, weight in sorted(self._heap))

    def transfer(self, nbytes: float, weight: float = 1.0) -> simpy.Event:
        """Move ``nbytes`` with ``weight`` shares of the bandwidth; the event fires when they have moved."""
        done = self.env.event()
        if nbytes <= 0:
            done.succeed()
            return done
        self._advance()
        self.bytes_moved += nbytes
        self._seq += 1
        heapq.heappush(self._heap, (self._virtual + nbytes / weight, self._seq, done, weight))
        self._weight += weight
        self._schedule()
        return done

    def _advance(self) -> None:
        """Bring the virtual clock up to now."""
        now = self._now()
        if self._heap:
            self._virtual += (now - self._since) * self.bandwidth_Bps / self._weight
            self.busy_s += now - self._since
        self._since = now

    def _schedule(self) -> None:
        """Arm one timer for the earliest end (earlier timers become stale)."""
        self._timer_gen += 1
        if not self._heap:
            self._virtual = 0.0  # idle: restart the clock, so a lone transfer takes exactly bytes / bandwidth
            self._weight = 0.0  # and no rounding of fractional weights carries over
            return
        delay = (self._heap[0][0] - self._virtual) * self._weight / self.bandwidth_Bps
        if not math.isfinite(self._now() + delay):  # an end at infinity (or NaN) would re-arm at once, forever
            raise SimulatedTimeOverflow.on(self.name, self._now(), self.bandwidth_Bps)
        timer = self.env.timeout(max(0.0, delay))
        timer.callbacks.append(_Timer(self, self._timer_gen))

    def _on_timer(self, gen: int) -> None:
        if gen != self._timer_gen:
            return  # a transfer started or ended since this timer was armed
        self._advance()
        end = self._heap[0][0]
        self._virtual = max(self._virtual, end)  # the timer was armed for this end: no rounding left over
        tolerance = 1e-12 * max(1.0, abs(end))
        while self._heap and self._heap[0][0] <= self._virtual + tolerance:
            _, _, done, weight = heapq.heappop(self._heap)
            self._weight -= weight
            done.succeed()
        self._schedule()
