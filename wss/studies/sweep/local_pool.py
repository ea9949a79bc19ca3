"""The local process pool of a sweep, whose workers end with the sweep however it ends.

The pool is a :class:`concurrent.futures.ProcessPoolExecutor` on the ``spawn`` start method (safe beside
threads, as in Jupyter or next to Dask, and the same on every OS).  Two things would otherwise leave its
workers running after the sweep: shutting the pool down waits for the points they are running, which can
take minutes after Ctrl-C; and a parent killed with SIGKILL cannot stop them at all.  Every worker runs a
small watcher thread that exits the worker as soon as the sweep sets the pool's stop event, or as soon as
the worker's parent is gone.  Only public API is used: the executor's initializer, and an event of the
same multiprocessing context passed to it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["PARENT_POLL_S", "local_pool", "check_main_is_guarded"]

#: Seconds between a pool worker's checks that the process that started it is still there.
PARENT_POLL_S = 0.25


@contextlib.contextmanager
def local_pool(workers: int) -> Iterator[cf.ProcessPoolExecutor]:
    """A spawn process pool of ``workers`` processes, started on demand, shut down on leaving the block.

    If the block raises (Ctrl-C, SIGTERM raised as an exception by the CLI, or an error), the workers
    are ended at once, mid-point, instead of being waited for.
    """
    check_main_is_guarded()
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    pool = cf.ProcessPoolExecutor(max_workers=workers, mp_context=context,
                                  initializer=_end_with_parent, initargs=(os.getpid(), stop))
    try:
        yield pool
    except BaseException:
        stop.set()  # every worker exits now: the pool then fails what is left, and shutting down waits for nothing
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def check_main_is_guarded() -> None:
    """Refuse a process pool started from a script's top level outside ``if __name__ == "__main__":``.

    A ``spawn`` worker starts by importing the script that started the pool: without the guard it runs
    the sweep again, in every worker, which fails each worker (two tracebacks per worker and every point
    "failed").  Say so in one line before any worker starts.  The call is found on the stack as the frame
    running the top level of ``__main__``; the guard is looked for in the script's source around its line.
    Interactive sessions and notebooks (no script file), ``python -m package`` (whose ``__main__`` the
    workers do not import, as multiprocessing decides) and calls under the guard pass.
    """
    import ast
    import inspect
    import sys

    main = sys.modules.get("__main__")
    script = getattr(main, "__file__", None)
    if main is None or not script or not str(script).endswith(".py"):
        return
    spec_name = getattr(getattr(main, "__spec__", None), "name", None) or ""
    if spec_name == "__main__" or spec_name.endswith(".__main__"):
        return  # `python -m package`: multiprocessing does not run a package's __main__ again in a worker
    frame = inspect.currentframe()
    while frame is not None and not (frame.f_code.co_name == "<module>" and frame.f_globals is vars(main)):
        frame = frame.f_back
    if frame is None:
        return  # not called from the script's top level (a thread, an atexit hook, another entry point)
    try:
        tree = ast.parse(Path(script).read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return
    line = frame.f_lineno
    for node in tree.body:
        if isinstance(node, ast.If) and _is_main_guard(node.test) and node.lineno <= line <= (node.end_lineno or 0):
            return
    from wss.studies.sweep.errors import SweepError

    raise SweepError(f"{script}:{line} starts a sweep's worker processes outside 'if __name__ == \"__main__\":'; "
                     "put the code that calls wss.sweep under that guard (each worker re-imports the script), "
                     "or pass executor='serial'")


def _is_main_guard(test: Any) -> bool:
    """``__name__ == "__main__"`` (either way round)."""
    import ast

    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    consts = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return len(names) == 1 and len(consts) == 1


def _end_with_parent(parent: int, stop: Any) -> None:
    """Pool worker initializer: end this worker when the sweep sets ``stop`` or its process is gone.

    A parent killed with SIGKILL (or crashing) cannot stop its workers, and a worker left behind keeps
    the caller's stdout open and the multiprocessing resource tracker alive.  A daemon thread watches
    the stop event and the parent's pid (a reparented worker sees another one) and exits the worker.
    Ctrl-C in a terminal reaches the whole process group: the workers ignore it, and the parent, which
    handles it, sets the stop event.
    """
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent and not stop.wait(PARENT_POLL_S):
            pass
        os._exit(1)

    threading.Thread(target=watch, name="wss-end-with-parent", daemon=True).start()
