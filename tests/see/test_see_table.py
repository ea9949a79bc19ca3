"""The one text-table renderer every command uses."""

from __future__ import annotations

import doctest

import pytest

import wss.views.table as table_module
from wss.views.table import text_table


def test_columns_are_two_spaces_apart_with_a_rule_and_no_trailing_spaces():
    lines = text_table(["name", "value", ""], [["a", "1.5", "<- best"], ["longer", "10", ""]], ["<", ">", "<"])
    assert lines == [
        "name    value",
        "------  -----",
        "a         1.5  <- best",
        "longer     10",
    ]


def test_without_a_rule_and_bad_shapes():
    assert text_table(["x"], [["1"]], rule=False) == ["x", "1"]
    with pytest.raises(ValueError):
        text_table(["a", "b"], [["1"]])
    with pytest.raises(ValueError):
        text_table(["a", "b"], [["1", "2"]], ["<"])


def test_the_docstring_example_holds():
    assert doctest.testmod(table_module).failed == 0


def test_every_table_command_uses_it():
    """No module outside the renderer pads cells by hand any more."""
    import re
    from pathlib import Path

    root = Path(table_module.__file__).resolve().parents[1]
    hand = [str(p.relative_to(root)) for p in root.rglob("*.py")
            if p.name != "table.py" and re.search(r"\.ljust\(|:<\{w|:>\{w", p.read_text(encoding="utf-8"))]
    assert hand == []
