"""What every ``wss`` command shares: exit codes, error lines and the common arguments.

Exit codes, for every command:

* ``0`` success;
* ``1`` the command ran and found a failure (a timing regression, a failed
  validation case, sweep points that failed unexpectedly);
* ``2`` bad input: a scenario that cannot be read, does not validate or does
  not fit the machine, an output path that cannot be written, a bad option;
  one line (or one list of problems) on stderr, never a traceback;
* ``3`` the simulation stopped making progress (a deadlock in the model, see
  :class:`~wss.errors.SimulationStalled`): the message names each blocked part
  and what it waits for;
* ``130`` interrupted with Ctrl-C (SIGINT);
* ``143`` terminated with SIGTERM (``kill``, a job scheduler, a container
  stopping), handled like Ctrl-C.

Ctrl-C and SIGTERM stop a command cleanly: the outputs of a run are all
written or none is (temporary files and folders made for them are removed),
a sweep's worker processes are ended, and one line (``interrupted`` or
``terminated``) goes to stderr, never a traceback.  A second signal during
that clean-up is ignored.  The exit code says which: 130 or 143 means no
output was put in place.  Once a command's outputs are complete and about
to be renamed into place (:func:`settle`), and once the program has its
exit code and is ending, a signal no longer changes anything: it is ignored.  A signal that lands while ``wss`` is still
starting (importing) ends it at once with the same code and nothing printed:
nothing has been written yet (:mod:`wss.cli.app` arranges that first thing).
SIGKILL cannot be handled; a sweep's workers still end within a second of
their parent (see :mod:`wss.studies.sweep`).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

from wss._starting import is_wss_program
from wss.errors import ScenarioError, WssError, quote

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_BAD_INPUT",
    "EXIT_STALLED",
    "EXIT_INTERRUPTED",
    "EXIT_TERMINATED",
    "Terminated",
    "signals_as_exceptions",
    "settle",
    "interrupted_code",
    "print_error",
    "relabel",
    "add_scenario_argument",
    "add_set_argument",
    "add_quiet_argument",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2
EXIT_STALLED = 3
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, so that it unwinds exactly as Ctrl-C does."""


_SIGNALS = (signal.SIGINT, signal.SIGTERM)


#: The signals received inside :func:`signals_as_exceptions`, in order (the first one stops the command).
received: list[int] = []


def _raise_for(signum: int, frame: FrameType | None) -> None:
    for sig in _SIGNALS:  # a second signal must not interrupt the clean-up the first one starts
        signal.signal(sig, signal.SIG_IGN)
    received.append(signum)
    raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()


def _raise_again(signum: int, frame: FrameType | None) -> None:
    """The first signal's exception once more (:func:`_unraisable`): the SIGALRM handler of the re-raise."""
    raise Terminated() if received[0] == signal.SIGTERM else KeyboardInterrupt()


#: Python cannot raise out of a finaliser or a weakref callback (matplotlib runs some as it frees a figure's
#: transforms): an exception raised there is printed, with its traceback, as "Exception ignored in ..." and the
#: program goes on, with the signals ignored.  So a signal's exception that lands there is raised again a moment
#: later, where the program is then (a SIGALRM after this many seconds, again if it lands in such a place too).
_AGAIN_AFTER_S = 0.005


def _ours(exc: BaseException | None) -> bool:
    """Was ``exc`` raised by this module's signal handlers?"""
    tb = exc.__traceback__ if isinstance(exc, KeyboardInterrupt) else None
    while tb is not None:
        if tb.tb_frame.f_code in (_raise_for.__code__, _raise_again.__code__):
            return True
        tb = tb.tb_next
    return False


def _unraisable(previous: Callable[[sys.UnraisableHookArgs], object]) -> Callable[[sys.UnraisableHookArgs], None]:
    """A ``sys.unraisablehook`` that, for a signal's exception Python could not raise where it landed, prints
    nothing and raises it again shortly after (:data:`_AGAIN_AFTER_S`); anything else goes to ``previous``."""

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if _ours(unraisable.exc_value) and received:
            signal.signal(signal.SIGALRM, _raise_again)
            signal.setitimer(signal.ITIMER_REAL, _AGAIN_AFTER_S)
            return
        previous(unraisable)

    return hook


def _cancel_again() -> None:
    """No re-raise pending any more (the command's outputs are complete, or it is over)."""
    if hasattr(signal, "setitimer") and signal.getsignal(signal.SIGALRM) is _raise_again:
        signal.setitimer(signal.ITIMER_REAL, 0.0)


def interrupted_code(code: int) -> int:
    """``code``, or 143 when a command reported Ctrl-C's 130 but what stopped it was SIGTERM."""
    if code == EXIT_INTERRUPTED and received and received[0] == signal.SIGTERM:
        return EXIT_TERMINATED
    return code


@contextlib.contextmanager
def signals_as_exceptions() -> Iterator[None]:
    """Within the block, SIGTERM raises :class:`Terminated` and SIGINT KeyboardInterrupt; restored after
    (ignored after, when this process is the ``wss`` program: it is ending with the command's exit code).

    Outside the main thread (a command run from a worker thread) signals cannot be handled, and
    the block changes nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in _SIGNALS}
    again = hasattr(signal, "setitimer")  # POSIX: a signal's exception swallowed in a finaliser is raised again
    alarm = signal.getsignal(signal.SIGALRM) if again else None
    unraisable = sys.unraisablehook
    received.clear()
    for sig in _SIGNALS:
        signal.signal(sig, _raise_for)
    if again:
        sys.unraisablehook = _unraisable(unraisable)
    try:
        yield
    finally:
        # The wss program is ending with the command's exit code: a signal now would turn a command that
        # has done its work into 130/143 (the start-up handler) or a death by SIGTERM (Python's default).
        ending = is_wss_program()
        for sig, handler in previous.items():
            signal.signal(sig, signal.SIG_IGN if ending else handler)
        if again:
            _cancel_again()
            if alarm is not None:
                signal.signal(signal.SIGALRM, alarm)
            sys.unraisablehook = unraisable


def settle() -> None:
    """The command's outputs are complete: from here on it succeeds, and SIGINT and SIGTERM are ignored.

    Called as the last step inside :func:`wss.files.all_or_nothing`, once everything that can take time
    has run: what is left is renaming the outputs into place and printing what was written, and a signal
    there must not end the command with 130/143, which says that nothing was written.  Changes nothing
    outside :func:`signals_as_exceptions` (a library caller's handlers are its own) or after a first signal.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    _cancel_again()
    for sig in _SIGNALS:
        if signal.getsignal(sig) is _raise_for:
            signal.signal(sig, signal.SIG_IGN)


def non_negative(what: str) -> Callable[[str], float]:
    """An argparse type for a finite number >= 0 (a tolerance, a threshold); its errors name ``what``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {quote(text)}") from None
        if not (math.isfinite(value) and value >= 0):
            raise argparse.ArgumentTypeError(f"a {what} is a finite number >= 0, got {quote(text)}")
        return value

    return parse


def print_error(message: str) -> None:
    """Print ``error: message`` on stderr (the one format of every command's errors)."""
    print(f"error: {message}", file=sys.stderr)


def relabel(exc: WssError, path: Path | None) -> str:
    """Name the scenario file in errors raised after loading.

    Capacity checks run on a loaded Scenario and name it ``<scenario 'name'>``
    or ``<dict>``; on the command line the user knows it by its file.
    """
    if isinstance(exc, ScenarioError) and path is not None and exc.source.startswith("<"):
        return str(type(exc)(str(path), exc.problems))
    return str(exc)


def add_scenario_argument(parser: argparse.ArgumentParser, help: str = "scenario YAML file") -> None:
    parser.add_argument("scenario", type=Path, help=help)


def add_set_argument(parser: argparse.ArgumentParser, example: str = "hardware.wafers=16") -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help=f"override a field, e.g. --set {example} (repeatable)")


def add_quiet_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-q", "--quiet", action="store_true", help="print nothing but errors")
