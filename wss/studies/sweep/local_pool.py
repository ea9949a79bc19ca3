"""The local process pool of a sweep, whose workers end with the sweep however it ends.

The pool is a :class:`concurrent.futures.ProcessPoolExecutor` on the ``spawn`` start method (safe beside
threads, as in Jupyter or next to Dask, and the same on every OS).  Two things would otherwise leave its
workers running after the sweep: shutting the pool down waits for the points they are running, which can
take minutes after Ctrl-C; and a parent killed with SIGKILL cannot stop them at all.  The first is
handled by terminating the workers, the second by a watcher thread in every worker that exits it as soon
as its parent is gone.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
import time
from collections.abc import Iterator

__all__ = ["PARENT_POLL_S", "local_pool"]

#: Seconds between a pool worker's checks that the process that started it is still there.
PARENT_POLL_S = 0.25


@contextlib.contextmanager
def local_pool(workers: int) -> Iterator[cf.ProcessPoolExecutor]:
    """A spawn process pool of ``workers`` processes, started on demand, shut down on leaving the block.

    If the block raises (Ctrl-C, SIGTERM raised as an exception by the CLI, or an error), the workers
    are ended at once, mid-point, instead of being waited for.
    """
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                                  initializer=_end_with_parent, initargs=(os.getpid(),))
    try:
        yield pool
    except BaseException:
        _terminate_workers(pool)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _end_with_parent(parent: int) -> None:
    """Pool worker initializer: end this worker as soon as the sweep's process is gone.

    A parent killed with SIGKILL (or crashing) cannot stop its workers, and a worker left behind keeps
    the caller's stdout open and the multiprocessing resource tracker alive.  A daemon thread watches
    the parent's pid (a reparented worker sees another one) and exits the worker.  Ctrl-C in a terminal
    reaches the whole process group: the workers ignore it, and the parent, which handles it, ends them.
    """
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="wss-end-with-parent", daemon=True).start()


def _terminate_workers(pool: cf.ProcessPoolExecutor) -> None:
    """End a local pool's workers now instead of waiting for the points they are running."""
    processes = getattr(pool, "_processes", None) or {}  # concurrent.futures keeps them here (3.11-3.13)
    for proc in list(processes.values()):
        with contextlib.suppress(Exception):
            proc.terminate()
