"""tools/gap_bounds.py: the window of per-unit prices that keeps a measured row within its tolerance, and the
units of work each kind of cost counts (the argument that no single extra cost closes every published row)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fidelity_helpers import load_tool

import wss

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def gap_bounds():
    return load_tool("gap_bounds")


@pytest.fixture(scope="module")
def esm():
    import yaml

    case = yaml.safe_load((REPO / "scenarios" / "validation" / "measured_m4_esm2_35m_cs2.yaml").read_text())
    return wss.load_scenario(case["scenario"])


def test_window_is_the_tolerance_band_less_the_floor(gap_bounds, esm):
    """Batch 2048 at 586/s is a 3.495 s step; ±30% of throughput allows 2.689 to 4.993 s; a 0.5 s floor leaves
    2.189 to 4.493 s for the extra cost, spread over the units."""
    row = gap_bounds.Row("measured_m4_x", 586.0, 0.30, esm, 0.5)
    lo, hi = gap_bounds.window(row, 1000.0)
    assert lo == pytest.approx((2048 / (586 * 1.3) - 0.5) / 1000)
    assert hi == pytest.approx((2048 / (586 * 0.7) - 0.5) / 1000)
    # A floor already slower than the band: no price fits (the interval is empty).
    slow = gap_bounds.Row("measured_m4_x", 586.0, 0.30, esm, 6.0)
    lo, hi = gap_bounds.window(slow, 1.0)
    assert lo > hi


def test_units_count_the_work_of_one_step(gap_bounds, esm):
    """ESM-2 35M, batch 2048 x 1024 tokens, 12 blocks of 20 heads, full (not causal) attention."""
    units = {kind: f(esm) for kind, f in gap_bounds.UNITS.items()}
    tokens = 2048 * 1024
    assert units["per step"] == 1
    assert units["per sample"] == 2048
    assert units["per token"] == tokens
    assert units["per token per block"] == tokens * 12
    assert units["per token per head"] == tokens * 12 * 20
    assert units["per sample per head"] == 2048 * 12 * 20
    assert units["per attention score"] == 2048 * 12 * 20 * 1024 ** 2
    weights = 33 * 480 + 12 * 12 * 480 ** 2 + 480 ** 2  # embedding (tied head), blocks, head transform
    assert math.isclose(units["per token per weight"] / tokens, weights, rel_tol=0.02)


def test_causal_attention_halves_the_scores(gap_bounds):
    gpt2 = wss.load_scenario({"name": "t", "hardware": {"preset": "cs2-cluster"},
                              "workload": {"model": "gpt-2-small"},
                              "training": {"global_batch": 8, "seq_len": 2048}})
    assert all(b.causal for b in gap_bounds._blocks(gpt2))
    assert gap_bounds._scores(gpt2) == 12 * 12 * 2048 ** 2 / 2


def test_rows_are_picked_by_id():
    from wss.studies.validation import load_cases, measured_rows

    cases = load_cases(sorted((REPO / "scenarios" / "validation").glob("measured_*.yaml")))
    assert [c.name.split("_")[1] for c in measured_rows(cases, "m4, M1")] == ["m1", "m4"]
    assert measured_rows(cases, "m1,m99") is None
