"""Configuration of the core test suite.

The helpers (tiny scenario builders, the ``wss`` command runner) live in ``core_helpers.py`` beside this
file, a uniquely named module rather than this conftest: pytest imports every ``conftest.py`` under the
same module name, so ``from conftest import ...`` would break as soon as another test folder has one.
This folder is put on ``sys.path`` here so the import also works under ``--import-mode=importlib``.
"""

from __future__ import annotations

import sys
from pathlib import Path

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
