"""Shipped presets are parsed once per text and handed out as fresh copies (wss/model/scenario/presets.py)."""

from __future__ import annotations

import re
import shutil

from wss.model.scenario import presets


def test_a_preset_is_parsed_once_and_each_caller_gets_its_own_copy():
    first = presets.load_part_preset("wafer", "wse2")
    before = presets._parse_shipped.cache_info()
    second = presets.load_part_preset("wafer", "wse2")
    after = presets._parse_shipped.cache_info()
    assert (after.hits, after.misses) == (before.hits + 1, before.misses)  # the same text: not parsed again
    assert second == first and second is not first
    first["clock_Hz"] = -1.0  # a caller changing its copy changes no one else's
    first.clear()
    assert presets.load_part_preset("wafer", "wse2") == second != first


def test_an_edited_preset_counts_at_once(tmp_path):
    """The file is read on every call: a preset changed on disk is what the next caller gets."""
    path = tmp_path / "wse2.yaml"
    shutil.copy(presets.config_root() / "wafer" / "wse2.yaml", path)
    clock = presets._read_yaml(path)["clock_Hz"]
    text = re.sub(r"^clock_Hz:.*$", "clock_Hz: 1.25e8", path.read_text(encoding="utf-8"), count=1, flags=re.M)
    path.write_text(text, encoding="utf-8")
    assert presets._read_yaml(path)["clock_Hz"] == 1.25e8 != clock
