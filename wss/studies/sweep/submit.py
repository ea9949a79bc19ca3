"""Handing tasks to anything with ``submit`` and collecting each result as soon as it is in.

One loop serves a local process pool, a Dask client and any ``concurrent.futures``-like executor a user
passes in, so caching, progress and Ctrl-C behave the same on all of them.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterable
from typing import Any

from wss.studies.sweep.rows import failed_fields
from wss.studies.sweep.worker import run_point

__all__ = ["submit_all"]


def submit_all(
    pool: Any,
    tasks: Iterable[tuple[str, dict[str, Any]]],
    fidelity: str,
    source: str | None,
    on_done: Callable[[str, dict[str, Any]], None],
    max_in_flight: int | None = None,
) -> None:
    """Submit every task, and hand each result to ``on_done`` as soon as it is in.

    Futures report through ``add_done_callback`` (concurrent.futures and Dask
    both have it) into a queue that this thread drains between submissions
    and afterwards, so a point is cached moments after it finishes even while
    later points are still being loaded.  ``max_in_flight`` bounds the points
    handed over but not finished: a local pool then holds no queue of work
    that would keep its processes busy after Ctrl-C.
    """
    finished: queue.SimpleQueue = queue.SimpleQueue()
    futures: dict[Any, str] = {}
    seen: set[int] = set()

    def handle(fut: Any) -> None:
        seen.add(id(fut))
        try:
            fields = fut.result()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # worker crash, cancelled task or model bug: a 'failed' row, not a lost sweep
            fields = failed_fields(exc)
        on_done(futures[fut], fields)

    def wait_one() -> None:
        while True:
            try:
                return handle(finished.get(timeout=0.2))  # a timeout keeps Ctrl-C responsive
            except queue.Empty:
                continue

    try:
        for key, scenario in tasks:  # the next point loads while the workers are busy ...
            while max_in_flight and len(futures) - len(seen) >= max_in_flight:
                wait_one()  # ... and is handed over as soon as one is free
            fut = pool.submit(run_point, scenario, fidelity, source)
            futures[fut] = key
            if not callable(getattr(fut, "add_done_callback", None)):
                continue
            fut.add_done_callback(finished.put)
            while not finished.empty():
                handle(finished.get())
        for fut in futures:
            if not callable(getattr(fut, "add_done_callback", None)):
                handle(fut)  # futures without callbacks: wait for them in submission order
        while len(seen) < len(futures):
            wait_one()
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise
