"""Golden files: expected output kept under tests/golden/, one file per case (imported as ``golden``).

A test that pins formatted output (a table, a summary) compares it with
:func:`assert_matches_golden` instead of carrying the text, or numbers copied from it, in its source.
When the output changes on purpose, refresh the files and review the diff before committing::

    python -m pytest tests/PATH/TO/test_x.py --update-goldens

The option is added in tests/conftest.py; it sets :data:`UPDATE`, which makes the helper write the
files instead of comparing them.  See tests/golden/README.md.
"""

from __future__ import annotations

import difflib
from pathlib import Path

#: Where the golden files live.
GOLDEN_DIR = Path(__file__).resolve().parent / "golden"

#: Set by ``--update-goldens`` (tests/conftest.py): rewrite the golden files instead of comparing.
UPDATE = False

REFRESH = "python -m pytest {where} --update-goldens"


def _normalised(text: str) -> str:
    """The text as stored: exactly one trailing newline, so editors and git leave files unchanged."""
    return text.rstrip("\n") + "\n"


def _shown(where: str) -> str:
    """A test path as the refresh command shows it: relative to the current folder where it can be."""
    path = Path(where)
    if path.is_absolute():
        try:
            return str(path.relative_to(Path.cwd()))
        except ValueError:
            return str(path)
    return where


def assert_matches_golden(name: str, text: str, where: str = "tests/") -> None:
    """Compare ``text`` with the golden file ``tests/golden/<name>``, or rewrite it under ``--update-goldens``.

    ``name`` is a relative path with its extension (``check/fc_mnist_half_clock_table.txt``); ``where``
    is the test file (``__file__``) or folder to name in the refresh command of the failure message.  A missing golden
    file fails (it does not create itself), so a test cannot pass without a reviewed expectation.
    """
    path = GOLDEN_DIR / name
    actual = _normalised(text)
    refresh = REFRESH.format(where=_shown(where))
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.is_file() or path.read_text(encoding="utf-8") != actual:
            path.write_text(actual, encoding="utf-8")
        return
    if not path.is_file():
        raise AssertionError(f"golden file {path} does not exist; create it with: {refresh}")
    expected = path.read_text(encoding="utf-8")
    if actual != expected:
        diff = "".join(
            difflib.unified_diff(
                expected.splitlines(keepends=True),
                actual.splitlines(keepends=True),
                fromfile=f"golden/{name}",
                tofile="actual",
            )
        )
        raise AssertionError(
            f"output differs from golden file {path}:\n{diff}\n"
            f"If the change is intended, refresh the golden files and review the diff: {refresh}"
        )
