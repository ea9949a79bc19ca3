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


def build_parser() -> argparse.ArgumentParser:
    """The ``wss`` argument parser with every registered command."""
    ap = argparse.ArgumentParser(prog="wss", description="Simulate wafer-scale weight-streaming training clusters.")
    ap.add_argument("--version", action="version", version=f"wss {__version__}")
    ap.add_argument("-v", "--verbose", action="count", default=0,
                    help="say what wss decides and why on stderr: -v the plan, folding and fallbacks; -vv more")
    ap.add_argument("-q", "--quiet", dest="log_quiet", action="store_true",
                    help="log nothing but errors (each command's own --quiet silences its output)")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_commands(sub)
    return ap


def _owner(command: str) -> ModuleType:
    for module in COMMAND_MODULES:
        if command in module.COMMANDS:
            return module
    raise AssertionError(f"no module owns the command {command!r}")  # the parser only accepts registered ones


def main(argv: list[str] | None = None) -> int:
    """Run ``wss`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code.

    SIGTERM is handled as Ctrl-C is (exit codes 143 and 130, :mod:`wss.cli.common`).
    """
    with signals_as_exceptions():
        try:
            return interrupted_code(_main(argv))
        except Terminated:  # landed outside a command (while parsing or printing)
            return EXIT_TERMINATED
        except KeyboardInterrupt:
            return EXIT_INTERRUPTED


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
    args = build_parser().parse_args(argv)
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
