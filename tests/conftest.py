"""Configuration of the whole test suite: the ``--update-goldens`` option.

Helpers of one folder live beside its tests (``core_helpers.py``, ``check_helpers.py``, ...) and the
folders' own conftest.py files keep their fixtures.  This file only adds what every folder shares:
the golden-file helper (``tests/golden.py``, imported as ``golden``) and the option that refreshes
the files it compares with (see tests/golden/README.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# This folder on sys.path, so tests import ``golden`` under any import mode.
_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

import golden  # noqa: E402  (needs the path above)

# Bytecode is cached for this suite's own processes even where the environment says not to write it
# (PYTHONDONTWRITEBYTECODE=1, as in many container images and on CI): else each xdist worker parses,
# assertion-rewrites and compiles every test module and, through the pytest11 entry point, every wss module
# again (about half of a worker's collection).  The .pyc files go where Python keeps them, __pycache__ folders
# beside the sources (ignored by git, left out of the sdist); a prefix folder (sys.pycache_prefix) would instead
# recompile numpy, pandas and the rest in every fresh checkout.  The environment variable is left as it is for
# the subprocesses the tests start, which are timed against signals (tests/core/test_cli_signals.py).
if sys.dont_write_bytecode:
    sys.dont_write_bytecode = False


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-goldens",
        action="store_true",
        default=False,
        help="rewrite the golden files under tests/golden/ with the current output instead of comparing",
    )


def pytest_configure(config: pytest.Config) -> None:
    golden.UPDATE = bool(config.getoption("--update-goldens"))
