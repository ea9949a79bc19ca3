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

__all__ = ["exit_quietly_while_starting", "is_wss_program"]


def _exit_at_once(signum: int, frame: object) -> None:
    os._exit(128 + signum)  # nothing is written yet, so there is nothing to clean up


def is_wss_program() -> bool:
    """Is this process the ``wss`` program (its console script, ``python -m wss`` or ``python -m wss.cli``)?

    Read from ``sys.argv[0]``; while ``import wss`` runs under ``python -m wss``, ``python -m`` has not yet set
    it to the module's file (it is ``-m``), so the interpreter's own command line (``sys.orig_argv``) says
    which module ``-m`` runs.
    """
    program = sys.argv[0].replace(os.sep, "/") if sys.argv and sys.argv[0] else ""
    named = program.rsplit("/", 1)[-1] in ("wss", "wss.exe")
    return named or program.endswith(("wss/__main__.py", "wss/cli/__main__.py")) or (
        program == "-m" and _module_run_by_python() in ("wss", "wss.cli"))


def _module_run_by_python() -> str | None:
    """The module of ``python [options] -m MODULE`` (or ``-mMODULE``), read from the interpreter's own command
    line; None when it runs a script, ``-c`` code or nothing."""
    args = list(getattr(sys, "orig_argv", [])[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m":
            return args[i + 1] if i + 1 < len(args) else None
        if arg.startswith("-m"):
            return arg[2:]
        if arg.startswith("-c") or not arg.startswith("-"):  # code or a script: no module
            return None
        i += 2 if arg in ("-X", "-W", "--check-hash-based-pycs") else 1  # options whose value follows
    return None


def exit_quietly_while_starting() -> None:
    """Install the silent handlers, if this process is the ``wss`` program and this is its main thread."""
    if is_wss_program() and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, _exit_at_once)


exit_quietly_while_starting()
