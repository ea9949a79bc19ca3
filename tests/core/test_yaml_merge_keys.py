"""YAML merge keys (``<<: *anchor``) load as ``yaml.safe_load`` loads them, beside the duplicate-key check."""

from __future__ import annotations

import pytest
import yaml

from wss.errors import ScenarioError
from wss.model.scenario.yaml_io import safe_load_text

TEXT = "a: &x {b: 1}\nc:\n  <<: *x\n  d: 2\n"


def test_merge_keys_load_like_safe_load():
    assert safe_load_text(TEXT, "t.yaml") == yaml.safe_load(TEXT) == {"a": {"b": 1}, "c": {"b": 1, "d": 2}}


def test_a_merged_key_may_be_overridden_but_a_real_duplicate_is_an_error():
    assert safe_load_text("a: &x {b: 1}\nc:\n  <<: *x\n  b: 2\n", "t.yaml")["c"] == {"b": 2}
    with pytest.raises(ScenarioError, match="b"):
        safe_load_text("c:\n  b: 1\n  b: 2\n", "t.yaml")

