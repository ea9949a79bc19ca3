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
* ``130`` interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wss.errors import ScenarioError, WssError

__all__ = [
    "EXIT_OK",
    "EXIT_FAILED",
    "EXIT_BAD_INPUT",
    "EXIT_STALLED",
    "EXIT_INTERRUPTED",
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
    parser.add_argument("--quiet", action="store_true", help="print nothing but errors")
