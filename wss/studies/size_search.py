"""The smallest cluster that meets a target, with as few simulations as it can.

A simulation of a count the batch does not divide runs its wafers apart and can take a minute; the analytic
level (:mod:`wss.model.plan.analytic`, ``wss estimate``) times a count in a tenth of a second and agrees with
the simulator within 3% on docs/fidelity.md's grid.  So :func:`wss.studies.size.size`, given a target,
searches with :class:`Search`:

1. **Guess** with the analytic level: estimate the table's sizes (powers of two), then bisect between the
   largest whose estimate misses the target and the smallest whose estimate meets it, on estimates alone,
   to the smallest count the estimate says meets it (``g``).  Estimates only steer: none decides the answer.
2. **Decide** at the boundary: ``g - 1`` must miss and ``g`` must meet.  A count misses for certain when
   its busiest wafer's compute alone is too slow: a wafer runs its passes one at a time, and the simulator
   adds the very cycles of the plan the estimate reads (docs/fidelity.md: the compute category agrees by
   construction), so a step takes at least that compute (:func:`compute_bound`).  Such a count is
   *bounded*; any other deciding count is simulated.
3. If a simulation disagrees with the guess, search on with simulations: upward through the table's sizes
   until one meets, then bisect, preferring counts the batch divides evenly (they fold into one wafer and
   simulate in a fraction of the time).

Every count that decides the answer is simulated or bounded, never only estimated, so the answer is the one
a search by simulation alone gives, under the assumption the bisection always made: the time to train does
not rise as wafers are added (docs/sizing.md says what that leaves).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from wss.errors import WssError
from wss.model.scenario import Scenario, load_scenario

__all__ = ["Probe", "Search", "Progress", "compute_bound", "estimate_row", "SIMULATION_UNITS"]

#: A simulation's weight on the progress bar, in estimates: a count that decides the answer is usually one
#: the batch does not divide, whose simulation takes tens to hundreds of times an estimate.
SIMULATION_UNITS = 20


class Progress(Protocol):
    """Where the search reports its work (:class:`wss.studies.size._Probes`): in units, an estimate one."""

    done: float

    def add(self, units: float = 1.0) -> None: ...

    def at(self, done: float) -> None: ...

    def replan(self, remaining: float) -> None: ...


@dataclass(frozen=True)
class Probe:
    """One count looked at: how (``simulated``, ``bounded`` or ``estimated``), the step time it found (for a
    bound, the compute a step takes at least), whether that meets the target, and the seconds it took."""

    wafers: int
    how: str
    step_time_s: float
    meets: bool
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        step = None if math.isnan(self.step_time_s) else self.step_time_s  # an error row's (JSON has no NaN)
        return {"wafers": self.wafers, "how": self.how, "step_time_s": step, "meets": self.meets,
                "seconds": self.seconds}


def estimate_row(s: Scenario) -> tuple[dict[str, Any], float | None]:
    """The analytic level's row for a scenario (the columns a simulated row has that it can give) and the
    compute lower bound of its step (None where it is not one, see :func:`compute_bound`); an error row
    on bad input."""
    from wss.studies.estimate import estimate

    try:
        e = estimate(s)
    except WssError as exc:
        return {"status": "error", "error": str(exc).splitlines()[0]}, None
    row = {"status": "ok", "step_time_s": e.step_time_s, "tokens_per_s": e.tokens_per_s, "bound_by": e.bound_by,
           "energy_per_token_J": math.nan, "average_power_kW": math.nan, "error": ""}
    return row, compute_bound(s, e.breakdown_s["compute"], e.faults_left_out)


def compute_bound(s: Scenario, compute_s: float, faults_left_out: Sequence[str]) -> float | None:
    """The step time a simulation of ``s`` takes at least, the busiest wafer's compute; or None.

    Not a bound when the simulator's compute can differ from the plan's: with faults the analytic level
    leaves out (jitter may draw factors below 1) or with real numerics (whose masks change the non-zeros).
    """
    if faults_left_out or s.numerics.enabled:
        return None
    return compute_s


@dataclass
class Search:
    """The search (see the module docstring).  ``simulated`` holds every simulated count's row,
    ``estimated`` every estimated one's, ``probes`` every count looked at, in order."""

    base: Scenario
    meets: Callable[[dict[str, Any]], bool]
    simulate: Callable[[int, Callable[[float], None] | None], dict[str, Any]]  # a count's row; its progress
    progress: Progress | None = None
    simulated: dict[int, dict[str, Any]] = field(default_factory=dict)
    estimated: dict[int, tuple[dict[str, Any], float | None]] = field(default_factory=dict)
    probes: list[Probe] = field(default_factory=list)

    def smallest(self, sizes: Sequence[int]) -> int | None:
        """The smallest count up to ``sizes[-1]`` that meets the target, or None if that one misses it."""
        for n in sizes:
            self.estimate(n)
        meeting = [i for i, n in enumerate(sizes) if self.meets(self.estimated[n][0])]
        lo, hi = 0, None  # the largest count known to miss (0: none), the smallest known to meet
        if not meeting:  # out of reach by the estimates: the largest size decides (it misses: none meets)
            lo, hi = self._decide(sizes[-1], lo, hi)
        else:
            i = meeting[0]
            guess = self._guess(sizes[i - 1] if i else 0, sizes[i])
            if self.progress is not None:  # two counts decide, unless the guess is wrong
                self.progress.replan(2 * SIMULATION_UNITS)
            if guess > 1:
                lo, hi = self._decide(guess - 1, lo, hi)
            if hi is None:
                lo, hi = self._decide(guess, lo, hi)
        top = sizes[-1]
        while hi is None or hi - lo > 1:
            if hi is None:  # up through the table's sizes until one meets
                if lo >= top:
                    return None
                n = next(n for n in sizes if n > lo)
            else:
                n = self._cheap_middle(lo, hi)
            lo, hi = self._decide(n, lo, hi)
        return hi

    def estimate(self, n: int) -> tuple[dict[str, Any], float | None]:
        """Count ``n``'s estimated row and compute bound (made once, a probe)."""
        if n not in self.estimated:
            start = time.perf_counter()
            try:
                self.estimated[n] = estimate_row(load_scenario(self.base, {"hardware.wafers": n}))
            except WssError as exc:
                self.estimated[n] = {"status": "error", "error": str(exc).splitlines()[0]}, None
            row = self.estimated[n][0]
            self.probes.append(Probe(n, "estimated", row.get("step_time_s", math.nan), self.meets(row),
                                     time.perf_counter() - start))
            if self.progress is not None:
                self.progress.add()
        return self.estimated[n]

    def _guess(self, lo: int, hi: int) -> int:
        """The smallest count in ``(lo, hi]`` that the analytic level says meets the target (bisected)."""
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.meets(self.estimate(mid)[0]):
                hi = mid
            else:
                lo = mid
        return hi

    def _decide(self, n: int, lo: int, hi: int | None) -> tuple[int, int | None]:
        """Whether count ``n`` meets the target, bounded by its compute when that proves a miss, else
        simulated; ``(lo, hi)`` moved to it."""
        row, bound = self.estimate(n)
        if bound is not None and not self.meets({**row, "tokens_per_s": row["tokens_per_s"] * row["step_time_s"]
                                                 / bound}):
            self.probes.append(Probe(n, "bounded", bound, False, 0.0))  # the estimate's probe took the time
            return max(lo, n), hi
        start = time.perf_counter()
        bar, before = self.progress, self.progress.done if self.progress is not None else 0.0
        self.simulated[n] = sim = self.simulate(n, None if bar is None else
                                                lambda f: bar.at(before + SIMULATION_UNITS * f))
        if bar is not None:
            bar.at(before + SIMULATION_UNITS)
        ok = self.meets(sim)
        self.probes.append(Probe(n, "simulated", sim.get("step_time_s", math.nan), ok, time.perf_counter() - start))
        return (lo, n if hi is None else min(hi, n)) if ok else (max(lo, n), hi)

    def _cheap_middle(self, lo: int, hi: int) -> int:
        """A count near the middle of ``(lo, hi)``: one the batch divides evenly (it folds into one wafer and
        simulates fast) within the middle half if there is one, else the middle."""
        mid = (lo + hi) // 2
        quarter = (hi - lo) // 4
        batch = self.base.training.global_batch
        even = [n for n in range(mid - quarter, mid + quarter + 1) if lo < n < hi and batch % n == 0]
        return min(even, key=lambda n: abs(n - mid)) if even else mid
