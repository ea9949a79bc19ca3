"""The ``wss schema`` command: the JSON Schema of a scenario file, for editors.

``wss schema`` prints the schema of a scenario YAML file (:func:`wss.views.schema.scenario_schema`);
``-o FILE`` writes it atomically instead (``-o -`` prints it; a device or FIFO is written into, not
replaced: :mod:`wss.files`); ``--case`` gives the schema of a validation case file
(``scenarios/validation/``).  The shipped files point at the committed copies
(``docs/scenario.schema.json``, ``docs/validation-case.schema.json``) with a first line that the YAML
language server (VS Code's YAML extension, and editors built on it) reads::

    # yaml-language-server: $schema=../docs/scenario.schema.json

Exit codes (:mod:`wss.cli.common`): 0 success; 2 an output path that cannot be written.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from wss.cli.common import EXIT_OK, settle

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("schema",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``schema``."""
    p = subparsers.add_parser("schema", help="print the JSON Schema of a scenario file (for editor completion)")
    p.add_argument("-o", "--out", type=Path, default=None, metavar="FILE",
                   help="write the schema to FILE instead of printing it (- prints it; a device or FIFO is "
                        "written into, not replaced)")
    p.add_argument("--case", action="store_true",
                   help="the schema of a validation case file (scenarios/validation/) instead of a scenario")


def run(args: argparse.Namespace) -> int:
    """Run ``wss schema``; return the exit code."""
    from wss.files import all_or_nothing, atomic_write_text, ensure_file_target
    from wss.views.schema import case_schema, scenario_schema, schema_text

    if args.case:
        from wss.studies.validation import CaseSpec

        text = schema_text(case_schema(CaseSpec))
    else:
        text = schema_text(scenario_schema())
    if args.out is None or str(args.out) == "-":
        print(text, end="")
        return EXIT_OK
    with all_or_nothing():
        ensure_file_target(args.out)
        path = atomic_write_text(args.out, text)
        settle()  # written: only the rename and printing are left, which a signal must not undo
    print(f"wrote {path}")
    return EXIT_OK
