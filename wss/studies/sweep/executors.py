"""Running a sweep's tasks on the executor it names: in this process, a local pool, Dask, or one passed in.

Whatever runs them, each result reaches ``on_done`` in this process as soon as it is in, so the sweep
caches and reports a point moments after it finishes.  A pool or cluster is started only if at least
one point needs running; one passed in by the caller is not shut down.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable
from typing import Any

from wss.studies.sweep.dask_client import dask_client
from wss.studies.sweep.local_pool import local_pool
from wss.studies.sweep.rows import failed_fields
from wss.studies.sweep.submit import submit_all
from wss.studies.sweep.worker import run_point

__all__ = ["run_tasks"]


def run_tasks(
    tasks: Iterable[tuple[str, dict[str, Any]]],
    fidelity: str,
    executor: Any,
    workers: int | None,
    address: str | None,
    on_done: Callable[[str, dict[str, Any]], None],
    source: str | None = None,
) -> None:
    """Run ``tasks`` ((key, resolved scenario) pairs) and call ``on_done(key, fields)`` as each finishes.

    Tasks are submitted as the iterator yields them, so loading the next points
    overlaps the workers' start-up and the first simulations.
    """
    tasks = iter(tasks)
    first = next(tasks, None)
    if first is None:
        return  # nothing to run: start no pool or cluster
    tasks = itertools.chain([first], tasks)
    if executor == "serial":
        _run_serial(tasks, fidelity, on_done, source)
    elif executor == "process":
        n = workers or os.cpu_count() or 1
        with local_pool(n) as pool:  # on Ctrl-C, SIGTERM or an error the workers end at once
            submit_all(pool, tasks, fidelity, source, on_done, max_in_flight=n)
    elif executor == "dask":
        client, close = dask_client(address, workers)
        try:
            submit_all(client, tasks, fidelity, source, on_done)
        finally:
            close()
    else:
        submit_all(executor, tasks, fidelity, source, on_done)


def _run_serial(
    tasks: Iterable[tuple[str, dict[str, Any]]],
    fidelity: str,
    on_done: Callable[[str, dict[str, Any]], None],
    source: str | None,
) -> None:
    """Run every task in this process, one after the other."""
    for key, scenario in tasks:
        try:
            fields = run_point(scenario, fidelity, source)
        except Exception as exc:  # a bug in the model: report it as a row, keep going
            fields = failed_fields(exc)
        on_done(key, fields)
