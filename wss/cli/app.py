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
import os
import sys
from types import ModuleType

from wss._version import __version__
from wss.cli import check, diff, fidelity, plan, schema, see, simulate, sweep
from wss.cli import size as size_cmd
from wss.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, EXIT_STALLED, print_error, relabel
from wss.errors import SimulationStalled, WssError

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

#: Every command module, in the order their commands appear in ``wss --help``.
COMMAND_MODULES: tuple[ModuleType, ...] = (simulate, plan, see, diff, check, fidelity, sweep, size_cmd, schema)


def build_parser() -> argparse.ArgumentParser:
    """The ``wss`` argument parser with every registered command."""
    ap = argparse.ArgumentParser(prog="wss", description="Simulate wafer-scale weight-streaming training clusters.")
    ap.add_argument("--version", action="version", version=f"wss {__version__}")
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
    """Run ``wss`` with ``argv`` (default: ``sys.argv[1:]``); return the exit code."""
    args = build_parser().parse_args(argv)
    try:
        code: int = _owner(args.command).run(args)
    except SimulationStalled as exc:
        print_error(str(exc))
        return EXIT_STALLED
    except WssError as exc:
        print_error(relabel(exc, getattr(args, "scenario", None)))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (``wss presets | head``): stop quietly, as cat and grep do, and keep
        # Python from complaining again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    return code
