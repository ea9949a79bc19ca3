"""Which points a sweep runs, in which order, and what a row holds."""

from __future__ import annotations

import pandas as pd
import pytest

from wss.studies.sweep import METRIC_COLUMNS, SweepError, expand_points, sweep


def test_cartesian_points_first_key_slowest():
    points = expand_points({"a": [1, 2], "b": ["x", "y", "z"]})
    assert points == [
        {"a": 1, "b": "x"}, {"a": 1, "b": "y"}, {"a": 1, "b": "z"},
        {"a": 2, "b": "x"}, {"a": 2, "b": "y"}, {"a": 2, "b": "z"},
    ]


def test_zipped_points_take_lists_together():
    assert expand_points({"a": [1, 2, 3], "b": [10, 20, 30]}, zip=True) == [
        {"a": 1, "b": 10}, {"a": 2, "b": 20}, {"a": 3, "b": 30},
    ]


def test_tuple_key_varies_keys_together_inside_a_product():
    points = expand_points({("a", "b"): [(1, 10), (2, 20)], "c": ["x", "y"]})
    assert points == [
        {"a": 1, "b": 10, "c": "x"}, {"a": 1, "b": 10, "c": "y"},
        {"a": 2, "b": 20, "c": "x"}, {"a": 2, "b": 20, "c": "y"},
    ]


def test_no_vary_is_one_point():
    assert expand_points({}) == [{}]


@pytest.mark.parametrize(
    ("vary", "zipped", "message"),
    [
        ({"a": [1, 2], "b": [1]}, True, "equal length"),
        ({"a": "124"}, False, "list of values"),
        ({"a": []}, False, "no values"),
        ({"a": [1], ("a", "b"): [(1, 2)]}, False, "varied twice"),
        ({("a", "b"): [(1, 2, 3)]}, False, "tuple of 2"),
    ],
)
def test_bad_vary_raises(vary, zipped, message):
    with pytest.raises(SweepError, match=message):
        expand_points(vary, zip=zipped)


def test_cartesian_sweep_rows_in_point_order(base):
    df = sweep(base, {"hardware.wafers": [1, 2], "workload.sparsity": [0.0, 0.5, 0.9]}, executor="serial")
    assert isinstance(df, pd.DataFrame)
    assert list(df["hardware.wafers"]) == [1, 1, 1, 2, 2, 2]
    assert list(df["workload.sparsity"]) == [0.0, 0.5, 0.9] * 2
    assert (df["status"] == "ok").all()
    assert list(df["wafers"]) == [1, 1, 1, 2, 2, 2]
    assert list(df["sparsity"]) == [0.0, 0.5, 0.9] * 2
    assert set(df["model"]) == {"fc-mnist"}
    assert df.columns[:2].tolist() == ["hardware.wafers", "workload.sparsity"]
    for col in ("speedup", "efficiency", "key", "cached", *METRIC_COLUMNS):
        assert col in df.columns
    assert (df["step_time_s"] > 0).all()
    assert df["samples_per_s"].tolist() == pytest.approx((64 / df["step_time_s"]).tolist(), rel=1e-12)
    assert (df["memoryx_state_bytes"] > 0).all()
    assert df["key"].nunique() == 6


def test_zipped_sweep_rows(base):
    df = sweep(base, {"hardware.wafers": [1, 2, 4], "training.global_batch": [8, 16, 32]}, zip=True, executor="serial")
    assert list(zip(df["hardware.wafers"], df["training.global_batch"])) == [(1, 8), (2, 16), (4, 32)]
    assert list(df["global_batch"]) == [8, 16, 32]
    assert (df["status"] == "ok").all()


def test_overrides_apply_to_every_point(base):
    df = sweep(base, {"hardware.wafers": [1, 2]}, overrides={"training.global_batch": 32}, executor="serial")
    assert list(df["global_batch"]) == [32, 32]


def test_base_may_be_a_path_dict_or_scenario(base, scenarios):
    import wss

    vary = {"hardware.wafers": [1, 2]}
    from_dict = sweep(base, vary, executor="serial")
    from_scenario = sweep(wss.load_scenario(base), vary, executor="serial")
    assert from_dict["key"].tolist() == from_scenario["key"].tolist()
    from_path = sweep(scenarios / "fc_mnist.yaml", vary, executor="serial")
    assert (from_path["status"] == "ok").all()


def test_process_pool_gives_the_serial_rows(base):
    vary = {"hardware.wafers": [1, 2, 4], "workload.sparsity": [0.0, 0.75]}
    serial = sweep(base, vary, executor="serial")
    pooled = sweep(base, vary, executor="process", workers=2)
    pd.testing.assert_frame_equal(serial, pooled)


def test_the_same_scenario_twice_runs_once(base, counting):
    df = sweep(base, {"hardware.wafers": [1, 1, 2]}, executor=counting)
    assert counting.calls == 2
    assert df["step_time_s"].iloc[0] == df["step_time_s"].iloc[1]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"executor": "threads"}, "executor must be"),
        ({"executor": object()}, "no submit method"),
        ({"fidelity": "guess"}, "fidelity must be"),
        ({"workers": 0}, "at least 1"),
        ({"baseline": "training.steps"}, "not a varied key"),
    ],
)
def test_bad_arguments_raise(base, kwargs, message):
    with pytest.raises(SweepError, match=message):
        sweep(base, {"hardware.wafers": [1]}, **{"executor": "serial", **kwargs})


def test_missing_base_file_raises(tmp_path):
    with pytest.raises(SweepError, match="no such scenario file"):
        sweep(tmp_path / "nope.yaml", {"hardware.wafers": [1]}, executor="serial")


def test_progress_is_called_at_the_start_and_once_per_point(base):
    """0 of 3 before any point runs (a bar from the start, not from the first point's end), then each point."""
    seen = []
    sweep(base, {"hardware.wafers": [1, 2, 4]}, executor="serial", progress=seen.append)
    assert [p.done for p in seen] == [0, 1, 2, 3]
    assert {p.total for p in seen} == {3}
