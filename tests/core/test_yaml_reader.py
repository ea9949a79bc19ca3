"""The YAML readers: the fast one for shipped presets (libyaml's parser, when PyYAML has it) reads every shipped
file as the checked pure-Python one for user input does."""

from __future__ import annotations

import pytest
import yaml
from core_helpers import REPO

from wss.model.scenario import yaml_io

SHIPPED = sorted([*(REPO / "configs").rglob("*.yaml"), *(REPO / "scenarios").rglob("*.yaml")])


class _PurePython(yaml.SafeLoader):
    """The reader as it is without libyaml: the same resolvers and constructors on the Python parser."""


_PurePython.yaml_implicit_resolvers = yaml_io._Loader.yaml_implicit_resolvers
_PurePython.yaml_constructors = yaml_io._Loader.yaml_constructors


def test_presets_use_libyaml_when_pyyaml_has_it_and_user_input_the_checked_reader():
    assert issubclass(yaml_io._TrustedLoader, yaml.CSafeLoader) == bool(yaml.__with_libyaml__)
    assert not issubclass(yaml_io._Loader, yaml.CSafeLoader)  # its limits hook the Python composer


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: str(p.relative_to(REPO)))
def test_reads_every_shipped_file_as_the_python_parser_does(path):
    text = path.read_text(encoding="utf-8")
    expected = yaml.load(text, Loader=_PurePython)
    assert yaml_io.safe_load_text(text, str(path)) == expected
    assert yaml_io.load_trusted_text(text, str(path)) == expected
    assert yaml_io.line_map(text)  # line numbers survive: every document maps its keys to lines


def test_reads_1e10_as_a_number_and_refuses_a_duplicate_key():
    assert yaml_io.safe_load_text("a: 4e10\nb: 1_000\n", "x.yaml") == {"a": 4e10, "b": 1000}
    with pytest.raises(Exception, match="duplicate key 'a'"):
        yaml_io.safe_load_text("a: 1\na: 2\n", "x.yaml")


def test_line_numbers_are_one_based_per_key():
    assert yaml_io.line_map("# c\na:\n  b: 1\n  c: [1, 2]\n") == {(): 2, ("a",): 2, ("a", "b"): 3, ("a", "c"): 4,
                                                                  ("a", "c", "0"): 4, ("a", "c", "1"): 4}
