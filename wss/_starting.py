"""While the ``wss`` program starts, SIGINT and SIGTERM end it at once and silently.

Python would print a KeyboardInterrupt traceback for a Ctrl-C that lands while modules import.  This
module is the first thing ``wss/__init__.py`` imports, so the window left is Python's own start-up;
it acts only when this process is the ``wss`` program (its console script or ``python -m wss``):
importing wss as a library never changes the signal handling of the program that imports it.
:func:`wss.cli.main` takes over with :func:`wss.cli.common.signals_as_exceptions`.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

__all__ = ["exit_quietly_while_starting"]


def _exit_at_once(signum: int, frame: object) -> None:
    os._exit(128 + signum)  # nothing is written yet, so there is nothing to clean up


def exit_quietly_while_starting() -> None:
    """Install the silent handlers, if this process is the ``wss`` program and this is its main thread."""
    program = sys.argv[0].replace(os.sep, "/") if sys.argv and sys.argv[0] else ""
    named = program.rsplit("/", 1)[-1] in ("wss", "wss.exe")
    if (named or program.endswith(("wss/__main__.py", "wss/cli/__main__.py"))) and (
        threading.current_thread() is threading.main_thread()
    ):
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _exit_at_once)


exit_quietly_while_starting()
