"""tools/trust_table.py: a run beyond every measured regime is called an extrapolation, and says in what."""

from __future__ import annotations

from fidelity_helpers import load_tool


def _regime(**over):
    base = {"params": 6e9, "per_wafer": 64, "wafers": 2, "seq": 2048, "chip": "wse2", "release": "R2.x",
            "input": "tokens", "sparse": False}
    return {**base, **over}


def test_a_run_inside_the_measured_regimes_is_not_an_extrapolation():
    trust = load_tool("trust_table")
    measured = [_regime(), _regime(chip="wse3", params=8e9)]
    assert trust.beyond(_regime(params=7e9), measured) == []


def test_each_way_beyond_the_measured_rows_is_named():
    trust = load_tool("trust_table")
    measured = [_regime(), _regime(chip="wse3", params=8e9, wafers=1)]
    why = trust.beyond(_regime(params=70e9, wafers=16, sparse=True, release="R3.0", input="image"), measured)
    assert any("model 70B" in w for w in why) and any("16 wafers" in w for w in why)
    assert any("sparse" in w for w in why) and any("release R3.0" in w for w in why)
    assert any("input image" in w for w in why)
    # 12B on WSE-2 is within 1.5x of the largest run overall (8B on WSE-3) but not of WSE-2's own (6B)
    assert trust.beyond(_regime(params=12e9), measured) == ["model size on wse2 (largest measured there 6B)"]


def test_the_leave_one_out_errors_come_from_the_last_refit(tmp_path):
    import json

    trust = load_tool("trust_table")
    record = tmp_path / "calibration.json"
    record.write_text(json.dumps({"leave_one_out": {"measured_m7_x": {"error": -0.123, "newest_release": False},
                                                    "measured_m2_x": {"error": 0.3, "newest_release": True}}}))
    assert trust.leave_one_out(record) == {"measured_m7_x": "-12.3%", "measured_m2_x": "+30.0%*"}
    assert trust.leave_one_out(tmp_path / "none.json") == {}


def test_the_input_column_names_the_rows_pipeline_where_it_states_one():
    trust = load_tool("trust_table")
    assert trust._input(_regime(input="tokens", pipeline="text_tokenise")) == "tokens, text tokenise"
    assert trust._input(_regime(input="image", pipeline=None)) == "image"


def test_the_model_column_keeps_a_parenthesis_whole():
    trust = load_tool("trust_table")
    assert trust.model_name("DiT-2B (patch 2x2, 256 tokens), batch 1100, one CS-2: training throughput") == \
        "DiT-2B (patch 2x2, 256 tokens)"
    assert trust.model_name("GPT-2 small, sequence 2048, batch 112") == "GPT-2 small"
    assert trust.model_name("a figure with no comma") == "a figure with no comma"
