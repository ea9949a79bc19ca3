"""The command line: the only part of wss that parses argv, prints and picks exit codes.

``wss`` (the console script) and ``python -m wss`` call :func:`main`; the
registry of commands is in :mod:`wss.cli.app`, the shared exit codes and
argument helpers in :mod:`wss.cli.common`.
"""

from wss.cli.app import main

__all__ = ["main"]
