"""Nothing lost: points are cached as they finish, re-runs skip them, bad points become rows."""

from __future__ import annotations

import importlib
import json

import pandas as pd
import pytest

import wss
from wss.studies.sweep import scenario_key, sweep

VARY = {"hardware.wafers": [1, 2, 4], "workload.sparsity": [0.0, 0.5]}


def cache_files(folder):
    return sorted(p.name for p in folder.iterdir())


def test_rerun_skips_every_finished_point(base, counting_executor, tmp_path):
    first, second = counting_executor(), counting_executor()
    a = sweep(base, VARY, executor=first, out=tmp_path)
    assert first.calls == 6
    assert len(cache_files(tmp_path)) == 6
    assert not a["cached"].any()
    b = sweep(base, VARY, executor=second, out=tmp_path)
    assert second.calls == 0
    assert b["cached"].all()
    pd.testing.assert_frame_equal(a.drop(columns="cached"), b.drop(columns="cached"))


def test_cache_files_are_keyed_by_the_resolved_scenario(base, tmp_path):
    df = sweep(base, {"hardware.wafers": [2]}, executor="serial", out=tmp_path)
    key = scenario_key(wss.load_scenario(base, {"hardware.wafers": 2}))
    assert df["key"].tolist() == [key]
    doc = json.loads((tmp_path / f"{key}.json").read_text())
    assert doc["key"] == key and doc["wss_version"] == wss.__version__ and doc["fidelity"] == "simulate"
    assert doc["values"] == {"hardware.wafers": 2}
    assert doc["row"]["status"] == "ok" and doc["row"]["step_time_s"] == df["step_time_s"][0]


def test_another_wss_version_does_not_reuse_points(base, counting_executor, tmp_path, monkeypatch):
    sweep(base, {"hardware.wafers": [1]}, executor="serial", out=tmp_path)
    monkeypatch.setattr(wss._version, "__version__", "0.0.0-other")
    again = counting_executor()
    sweep(base, {"hardware.wafers": [1]}, executor=again, out=tmp_path)
    assert again.calls == 1
    assert len(cache_files(tmp_path)) == 2


@pytest.mark.parametrize("first_executor", ["serial", "submit"])
def test_an_interrupted_sweep_resumes(base, counting_executor, tmp_path, first_executor):
    def stop_after_two(p):
        if p.done == 2:
            raise KeyboardInterrupt

    executor = counting_executor() if first_executor == "submit" else "serial"
    with pytest.raises(KeyboardInterrupt):
        sweep(base, VARY, executor=executor, out=tmp_path, progress=stop_after_two)
    assert len(cache_files(tmp_path)) == 2
    rest = counting_executor()
    df = sweep(base, VARY, executor=rest, out=tmp_path)
    assert rest.calls == 4
    assert df["cached"].tolist() == [True, True, False, False, False, False]
    assert (df["status"] == "ok").all()


def test_writes_leave_no_temporary_files(base, tmp_path):
    sweep(base, VARY, executor="process", workers=2, out=tmp_path)
    assert all(name.endswith(".json") and not name.startswith(".") for name in cache_files(tmp_path))
    assert len(cache_files(tmp_path)) == 6


def test_a_damaged_cache_file_is_recomputed(base, counting_executor, tmp_path):
    df = sweep(base, {"hardware.wafers": [1]}, executor="serial", out=tmp_path)
    (tmp_path / f"{df['key'][0]}.json").write_text("{not json")
    again = counting_executor()
    redone = sweep(base, {"hardware.wafers": [1]}, executor=again, out=tmp_path)
    assert again.calls == 1
    assert redone["step_time_s"][0] == df["step_time_s"][0]


def test_invalid_points_become_error_rows(base):
    df = sweep(
        base,
        {"workload.model": ["fc-mnist", "no-such-model"], "hardware.wafers": [1, 128]},
        executor="serial",
    )
    assert df["status"].tolist() == ["ok", "error", "error", "error"]
    assert df["error"][0] is None or pd.isna(df["error"][0])
    assert "cannot feed 128 wafers" in df["error"][1]
    assert "no-such-model" in df["error"][2]
    assert df.loc[1:, "step_time_s"].isna().all()
    assert df["wafers"].tolist() == [1, 128, 1, 128]


def test_infeasible_points_are_error_rows_cached_with_the_base_file(scenarios, counting_executor, tmp_path):
    vary = {"hardware.memoryx.dram_capacity_bytes": [1.0e12, 1000.0]}
    base = scenarios / "fc_mnist.yaml"
    df = sweep(base, vary, executor="serial", out=tmp_path)
    assert df["status"].tolist() == ["ok", "error"]
    assert df["error"][1].startswith(str(base)) and "MemoryX" in df["error"][1]
    assert len(cache_files(tmp_path)) == 2  # a deterministic error is a result too
    again = counting_executor()
    assert sweep(base, vary, executor=again, out=tmp_path)["status"].tolist() == ["ok", "error"]
    assert again.calls == 0


def test_unexpected_failures_are_rows_and_not_cached(base, counting_executor, tmp_path):
    broken = counting_executor(fail_with=RuntimeError("worker died"))
    df = sweep(base, {"hardware.wafers": [1, 2]}, executor=broken, out=tmp_path)
    assert df["status"].tolist() == ["failed", "failed"]
    assert df["error"][0] == "RuntimeError: worker died"
    assert cache_files(tmp_path) == []
    healthy = counting_executor()
    assert (sweep(base, {"hardware.wafers": [1, 2]}, executor=healthy, out=tmp_path)["status"] == "ok").all()
    assert healthy.calls == 2


def test_cache_key_follows_the_model_source(base, monkeypatch):
    """A cache made by one version of the model must not answer for another."""
    module = importlib.import_module("wss.studies.sweep")  # the function wss.sweep shadows the module
    scenario = wss.load_scenario(base)
    before = module.scenario_key(scenario)
    assert before == module.scenario_key(scenario)  # deterministic
    monkeypatch.setattr(module, "model_fingerprint", lambda: "a different model")
    assert module.scenario_key(scenario) != before
