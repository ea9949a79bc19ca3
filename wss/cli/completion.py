"""The ``wss completion`` command: a shell completion script for ``wss``, from its own argument parser.

``wss completion bash`` (or ``zsh``, ``tcsh``) prints a script that completes every command, option and
choice of ``wss``; it is generated from the parser by shtab (a maintained library that reads argparse
parsers), so it never goes stale.  Install it once, for example::

    wss completion bash > ~/.local/share/bash-completion/completions/wss
    wss completion zsh > "${fpath[1]}/_wss"

Scenario and result arguments complete as file names.  Exit codes (:mod:`wss.cli.common`): 0 success;
2 an unknown shell (argparse's usage error).
"""

from __future__ import annotations

import argparse

from wss.cli.common import EXIT_OK

__all__ = ["COMMANDS", "add_commands", "run", "SHELLS"]

COMMANDS = ("completion",)
#: The shells shtab writes scripts for.
SHELLS = ("bash", "zsh", "tcsh")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``completion``."""
    p = subparsers.add_parser("completion", help="print a shell completion script for wss (bash, zsh or tcsh)")
    p.add_argument("shell", choices=SHELLS, help="the shell to write the script for")


def run(args: argparse.Namespace) -> int:
    """Print the completion script of the whole ``wss`` parser for ``args.shell``."""
    import shtab

    from wss.cli.app import build_parser

    parser = build_parser()
    _complete_paths(parser)
    print(shtab.complete(parser, shell=args.shell), end="")
    return EXIT_OK


def _complete_paths(parser: argparse.ArgumentParser) -> None:
    """Mark every argument that takes a path (a ``Path`` type, or a file-like metavar) to complete as a file."""
    import shtab

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _complete_paths(sub)
        elif action.type is not None and getattr(action.type, "__name__", "") in ("Path", "PosixPath"):
            action.complete = shtab.FILE  # type: ignore[attr-defined]
        elif action.metavar and any(s in str(action.metavar) for s in (".yaml", ".json", "FILE", "DIR")):
            action.complete = shtab.DIRECTORY if "DIR" in str(action.metavar) else shtab.FILE  # type: ignore[attr-defined]
