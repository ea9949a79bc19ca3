"""The rows of one sweep as its points are loaded, looked up in the cache, run and reported.

The parent process loads and validates every point (a bad point costs nothing and becomes an
``error`` row), reads the ones already in the cache folder, and hands the others to the executor; a
resolved scenario that several points share is run once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from wss.errors import WssError
from wss.model.scenario import Scenario, load_scenario
from wss.studies.sweep.cache import read_cached, scenario_key, write_cached
from wss.studies.sweep.points import Point
from wss.studies.sweep.progress import SweepProgress
from wss.studies.sweep.rows import blank_row, error_fields

__all__ = ["SweepRun", "log"]

#: Points that fail to load (``wss -v``) and points found in the cache (``wss -vv``); the package's name,
#: as when the sweep was one module, so logging configured for it still applies.
log = logging.getLogger("wss.studies.sweep")


class SweepRun:
    """The rows of one sweep as its points are loaded, looked up in the cache, run and reported.

    A point runs once per resolved scenario (its ``key``): points that resolve to one scenario
    share the first one's run, and a point already in the cache folder is read, not run.
    """

    def __init__(
        self,
        base: str | Path | Mapping[str, Any] | Scenario,
        fixed: dict[str, Any],
        fidelity: str,
        cache: Path | None,
        points: list[Point],
        progress: Callable[[SweepProgress], None] | None,
    ):
        self.base, self.fixed, self.fidelity, self.cache = base, fixed, fidelity, cache
        self.points, self.progress = points, progress
        self.started = time.perf_counter()
        self.rows = [blank_row(values, fidelity) for values, _ in points]
        self.waiting: dict[str, list[int]] = {}  # key -> the points waiting for its run
        self.results: dict[str, dict[str, Any]] = {}  # key -> fields of its finished run
        self.done = self.cached = self.errors = 0
        if progress is not None:  # the bar from the start (0 of N), not from the first point's end
            progress(SweepProgress(0, len(points), 0, 0, 0.0))

    def finish(self, i: int, fields: dict[str, Any], cached: bool) -> None:
        """Fill point ``i``'s row and report progress."""
        self.rows[i].update(fields)
        self.rows[i]["cached"] = cached
        self.done += 1
        self.cached += cached
        self.errors += fields["status"] != "ok"
        if self.progress is not None:
            elapsed = time.perf_counter() - self.started
            self.progress(SweepProgress(self.done, len(self.points), self.cached, self.errors, elapsed))

    def tasks(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Load each point; finish bad and cached ones here, yield (key, resolved scenario) of the ones to run."""
        for i, (values, _) in enumerate(self.points):
            yield from self._prepare(i, values)

    def _prepare(self, i: int, values: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        """Load point ``i``; finish it if it is bad, cached or already run, else yield it to run (once per key)."""
        try:
            scenario = load_scenario(self.base, {**self.fixed, **values})
        except WssError as exc:
            log.info("sweep point %d %s: %s", i, values, exc)
            self.finish(i, error_fields(str(exc)), False)
            return
        key = scenario_key(scenario, self.fidelity)
        self.rows[i].update(
            model=scenario.workload.model.name,
            wafers=scenario.hardware.wafers,
            global_batch=scenario.training.global_batch,
            seq_len=scenario.seq_len,
            sparsity=scenario.workload.sparsity,
            key=key,
        )
        if (hit := read_cached(self.cache, key)) is not None:
            log.debug("sweep point %d %s: cached (%s)", i, values, key[:12])
            self.finish(i, hit, True)
        elif key in self.results:
            self.finish(i, dict(self.results[key]), False)  # the same resolved scenario again, already run
        elif key in self.waiting:
            self.waiting[key].append(i)  # the same resolved scenario twice: run it once
        else:
            self.waiting[key] = [i]
            yield key, scenario.model_dump(mode="json")

    def on_done(self, key: str, fields: dict[str, Any]) -> None:
        """A run finished: cache it (unless it failed) and fill every point waiting for it."""
        self.results[key] = fields
        first = self.waiting[key][0]
        if self.cache is not None and fields["status"] != "failed":
            values = {k: self.rows[first][k] for k in self.points[first][0]}
            write_cached(self.cache, key, self.fidelity, values, fields)
        for i in self.waiting[key]:
            self.finish(i, dict(fields), False)
