"""The ``wss`` command: one parser, one registry of commands, one place that turns errors into exit codes.

Each command module (:mod:`wss.cli.simulate`, :mod:`wss.cli.see`,
:mod:`wss.cli.check`, :mod:`wss.cli.fidelity`, :mod:`wss.cli.sweep`, :mod:`wss.cli.size`,
:mod:`wss.cli.schema`, :mod:`wss.cli.diff`) declares
``COMMANDS`` (the names it owns), ``add_commands(subparsers)`` and
``run(args) -> exit code``.  :func:`main` builds the parser from
:data:`COMMAND_MODULES`, hands the parsed arguments to the module that owns
the command, and prints any :class:`~wss.errors.WssError` as one line with
exit code 2 (see :mod:`wss.cli.common`).

To add a command: write ``wss/cli/<name>.py`` with those three names and
append the module to :data:`COMMAND_MODULES`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Iterator
from types import ModuleType

import wss._starting  # noqa: F401  (installs the silent start-up handlers; done already by `import wss`)
from wss._starting import is_wss_program
from wss._version import __version__
from wss.cli import check, completion, diff, fidelity, plan, schema, see, simulate, sweep
from wss.cli import size as size_cmd
from wss.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_STALLED,
    EXIT_TERMINATED,
    Terminated,
    interrupted_code,
    print_error,
    received,
    relabel,
    signals_as_exceptions,
)
from wss.errors import SimulationStalled, WssError

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

#: Every command module, in the order their commands appear in ``wss --help``.
COMMAND_MODULES: tuple[ModuleType, ...] = (simulate, plan, see, diff, check, fidelity, sweep, size_cmd, schema,
                                            completion)


_VERBOSE_HELP = "say what wss decides and why on stderr: -v the plan, folding and fallbacks; -vv more"
_QUIET_HELP = "print nothing but errors: no logging, and no summary, table or progress where the command has one"


def build_parser() -> argparse.ArgumentParser:
    """The ``wss`` argument parser with every registered command (:func:`_build`)."""
    return _build()[0]


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The ``wss`` argument parser, and each command's name -> its own parser.

    ``-v`` and ``-q`` mean the same before the command and after it (``wss -q simulate`` and ``wss
    simulate -q``): each command's parser takes them too, and :func:`_parse` adds the two counts of ``-v``
    (``wss -v simulate -v`` is ``-vv``).
    """
    ap = argparse.ArgumentParser(prog="wss", description="Simulate wafer-scale weight-streaming training clusters.")
    ap.add_argument("--version", action="version", version=f"wss {__version__}")
    ap.add_argument("-v", "--verbose", action="count", default=0, help=_VERBOSE_HELP)
    ap.add_argument("-q", "--quiet", dest="log_quiet", action="store_true", help=_QUIET_HELP)
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_commands(sub)
    for command in sub.choices.values():
        command.add_argument("-v", "--verbose", dest="verbose_after", action="count", default=0, help=_VERBOSE_HELP)
        with contextlib.suppress(argparse.ArgumentError):  # a command's own -q/--quiet also silences its output
            command.add_argument("-q", "--quiet", dest="log_quiet", action="store_true", default=argparse.SUPPRESS,
                                 help=_QUIET_HELP)
    return ap, dict(sub.choices)


def _parse(argv: list[str]) -> argparse.Namespace | int:
    """Parse ``argv``, or say what is wrong with it in the command's own words.

    A bare ``wss`` prints the help; an unknown command gets a "did you mean"; arguments the command does
    not take are reported with the command's usage, not the top level's.  Returns the exit code when
    there is nothing to run.
    """
    import difflib

    ap, commands = _build()
    if not argv:
        ap.print_help()
        return EXIT_OK
    word = next((a for a in argv if not a.startswith("-")), None)
    if word is not None and word not in commands:
        close = difflib.get_close_matches(word, list(commands), n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else f"; the commands are: {', '.join(commands)}"
        ap.print_usage(sys.stderr)
        print_error(f"unknown command {word!r}{hint}")
        return EXIT_BAD_INPUT
    args, extra = ap.parse_known_args(argv)
    if args.command is None:
        ap.error("give a command (wss --help lists them)")
    if extra:
        commands[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    args.verbose += args.verbose_after
    quiet = bool(args.log_quiet or getattr(args, "quiet", False))
    args.log_quiet = quiet
    if hasattr(args, "quiet"):
        args.quiet = quiet
    return args


def _owner(command: str) -> ModuleType:
    for module in COMMAND_MODULES:
        if command in module.COMMANDS:
            return module
    raise AssertionError(f"no module owns the command {command!r}")  # the parser only accepts registered ones


def main(argv: list[str] | None = None) -> int:
    """Run ``wss`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    SIGTERM is handled as Ctrl-C is (exit codes 143 and 130, :mod:`wss.cli.common`).
    """
    try:
        with signals_as_exceptions():
            try:
                return interrupted_code(_main(argv))
            except Terminated:  # landed outside a command (while parsing or printing)
                return EXIT_TERMINATED
            except KeyboardInterrupt:
                return EXIT_INTERRUPTED
    finally:
        if is_wss_program():
            _forget_interrupt()


def _forget_interrupt() -> None:
    """Let the ``wss`` program exit with the code :func:`main` returns, after a Ctrl-C it caught too.

    Run as ``python -m wss``, CPython 3.8 to 3.11 remember a KeyboardInterrupt that escaped an ``exec`` of source
    text, caught or not, and at exit kill the process with SIGINT instead of exiting with its code
    (``_Py_UnhandledKeyboardInterrupt``, set in ``run_eval_code_obj`` of Python/pythonrun.c; the console script
    exits through another path).  ``dataclasses`` writes every dataclass's methods so, and a module that defines
    dataclasses can be imported mid-command: a Ctrl-C landing there ended ``python -m wss`` by SIGINT, not with
    130, about one run in six.  Each ``exec`` of text clears the flag as it starts, and wss catches every
    KeyboardInterrupt its commands raise, so one more clears it for good.
    """
    exec("pass")  # source text, not a code object: see the docstring


@contextlib.contextmanager
def _logging_to_stderr(verbose: int, quiet: bool) -> Iterator[None]:
    """Show the ``wss`` loggers' records on stderr while a command runs: warnings by default, info with
    ``-v``, debug with ``-vv``, errors only with ``-q``.  The handler goes again afterwards, so calling
    :func:`main` from Python (or a test) leaves logging as it found it."""
    import logging

    level = logging.ERROR if quiet else (logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)]
    logger = logging.getLogger("wss")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("wss: %(levelname)s: %(message)s"))
    handler.setLevel(level)
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(min(level, old_level) if old_level else level)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


def _main(argv: list[str] | None) -> int:
    parsed = _parse(sys.argv[1:] if argv is None else list(argv))
    if isinstance(parsed, int):
        return parsed
    args = parsed
    try:
        with _logging_to_stderr(args.verbose, args.log_quiet):
            code: int = _owner(args.command).run(args)
    except SimulationStalled as exc:
        print_error(str(exc))
        return EXIT_STALLED
    except WssError as exc:
        print_error(relabel(exc, getattr(args, "scenario", None)))
        return EXIT_BAD_INPUT
    except Terminated:
        print("terminated", file=sys.stderr)
        return EXIT_TERMINATED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``wss presets | head``): stop quietly, as cat and grep do, and keep
        # Python from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception:
        if not received:
            raise
        # A signal's exception that a library re-raised as its own (pydantic's serializer wraps what its
        # Python callbacks raise): the signal stopped the command all the same, and the outputs unwound.
        terminated = received[0] == signal.SIGTERM
        print("terminated" if terminated else "interrupted", file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    return code
