"""The ``wss diff`` command: two result.json files side by side, the large changes marked.

``wss diff A.json B.json`` prints step time, throughput, the breakdown and pacing by category,
memory and the wafer's time per layer for both runs, with the relative change of each row and a
``*`` in the last column where it exceeds ``--threshold`` (default 5%).  ``--json`` prints the same
rows as one JSON document.  The comparison itself is :mod:`wss.views.diff`.

Exit codes (:mod:`wss.cli.common`): 0 the comparison was printed, whatever it shows; 2 bad input
(a missing file, a file that is not a wss result, a bad option).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from wss.cli.common import EXIT_OK, non_negative
from wss.errors import quote

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("diff",)


_fraction = non_negative("relative change")


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {quote(text)}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (all) or more, got {quote(text)}")
    return value


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``diff``."""
    p = subparsers.add_parser("diff", help="compare two result.json files side by side (changes past a threshold "
                                           "marked with *)")
    p.add_argument("a", type=Path, metavar="A.json", help="the reference result.json (wss simulate)")
    p.add_argument("b", type=Path, metavar="B.json", help="the result.json compared with it")
    p.add_argument("--threshold", type=_fraction, default=0.05, metavar="REL",
                   help="mark rows whose relative change exceeds REL (default 0.05: 5%%)")
    p.add_argument("--layers", type=_count, default=20, metavar="N",
                   help="layers to show, those that moved most (0: all; default 20; --json has all)")
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON document")


def run(args: argparse.Namespace) -> int:
    """Run ``wss diff``; return the exit code."""
    from wss.cli.see import load_result
    from wss.views.diff import compare_results, diff_json, format_diff

    a, b = load_result(args.a), load_result(args.b)
    diff = compare_results(a, b, threshold=args.threshold)
    if args.json:
        print(json.dumps(diff_json(diff, str(args.a), str(args.b)), indent=1))
    else:
        print(format_diff(diff, str(args.a), str(args.b), layers=args.layers))
    return EXIT_OK
