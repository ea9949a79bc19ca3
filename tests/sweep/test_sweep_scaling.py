"""Speed-up and scaling efficiency against the smallest point of each group."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from wss.studies.sweep import add_scaling, sweep


def frame(rows):
    return pd.DataFrame(rows, columns=["model", "wafers", "tokens_per_s", "status"])


def test_arithmetic_per_group():
    df = frame([
        ("small", 1, 100.0, "ok"), ("small", 2, 150.0, "ok"), ("small", 4, 200.0, "ok"),
        ("big", 2, 10.0, "ok"), ("big", 8, 38.0, "ok"),
    ])
    out = add_scaling(df, by="model")
    assert out["speedup"].tolist() == pytest.approx([1.0, 1.5, 2.0, 1.0, 3.8])
    assert out["efficiency"].tolist() == pytest.approx([1.0, 0.75, 0.5, 1.0, 0.95])


def test_reference_is_the_smallest_point_that_ran():
    df = frame([("m", 1, math.nan, "error"), ("m", 4, 40.0, "ok"), ("m", 2, 25.0, "ok")])
    out = add_scaling(df, by="model")
    assert math.isnan(out["speedup"][0]) and math.isnan(out["efficiency"][0])
    assert out["speedup"][2] == 1.0
    assert out["speedup"][1] == pytest.approx(1.6)
    assert out["efficiency"][1] == pytest.approx(0.8)


def test_sweep_groups_by_the_other_axes(base):
    df = sweep(
        base,
        {
            ("hardware.wafers", "training.global_batch"): [(1, 8), (2, 16), (4, 32), (8, 64)],
            "workload.sparsity": [0.0, 0.9],
        },
        executor="serial",
    )
    for _, part in df.groupby("workload.sparsity"):
        ref = part[part["wafers"] == 1].iloc[0]
        speedup = part["tokens_per_s"] / ref["tokens_per_s"]
        assert part["speedup"].tolist() == pytest.approx(speedup.tolist())
        assert part["efficiency"].tolist() == pytest.approx((speedup / part["wafers"]).tolist())
        assert ref["speedup"] == 1.0 and ref["efficiency"] == 1.0


def test_sparsity_sweep_speedup_is_over_the_densest_point(base):
    df = sweep(base, {"workload.sparsity": [0.9, 0.0, 0.5]}, executor="serial")
    dense = df[df["workload.sparsity"] == 0.0].iloc[0]
    assert dense["speedup"] == 1.0
    assert df["speedup"].tolist() == pytest.approx((df["tokens_per_s"] / dense["tokens_per_s"]).tolist())
    assert df["efficiency"].isna().all()  # no wafers varied: scaling efficiency does not apply


def test_a_categorical_key_listed_first_is_not_the_speedup_reference(base):
    """Models x sparsity: each model's speed-up is over its own dense point, not over another model."""
    df = sweep(base, {"workload.model": ["fc-mnist", "gpt3-125m"], "workload.sparsity": [0.0, 0.9]},
               executor="serial", overrides={"training.seq_len": None})
    for _, part in df[df["status"] == "ok"].groupby("workload.model"):
        dense = part[part["workload.sparsity"] == 0.0].iloc[0]
        assert dense["speedup"] == 1.0
        assert part["speedup"].tolist() == pytest.approx((part["tokens_per_s"] / dense["tokens_per_s"]).tolist())


def test_a_baseline_that_is_not_varied_fails_before_any_point_runs(base, counting_executor):
    from wss.studies.sweep import SweepError

    ex = counting_executor()
    with pytest.raises(SweepError, match="not a varied key"):
        sweep(base, {"hardware.wafers": [1, 2]}, baseline="workload.sparsity", executor=ex)
    assert ex.calls == 0
