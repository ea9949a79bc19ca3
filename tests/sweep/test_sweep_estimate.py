"""fidelity="estimate": the analytical estimator where wss.estimate exists, a clear error where not."""

from __future__ import annotations

import importlib.util

import pytest

from wss.sweep import SweepError, sweep

def test_estimate_without_the_estimator_is_a_clear_error(base, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wss.estimate" else real(name, *a))
    with pytest.raises(SweepError, match="wss.estimate"):
        sweep(base, {"hardware.wafers": [1]}, fidelity="estimate", executor="serial")


def test_estimate_fidelity_gives_rows(base, tmp_path):
    pytest.importorskip("wss.estimate")
    df = sweep(base, {"hardware.wafers": [1, 2, 4]}, fidelity="estimate", executor="serial", out=tmp_path)
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["step_time_s"] > 0).all() and (df["samples_per_s"] > 0).all()
    assert set(df["fidelity"]) == {"estimate"}
    assert df["speedup"].iloc[0] == 1.0 and df["bound_by"].notna().all()
    simulated = sweep(base, {"hardware.wafers": [1, 2, 4]}, executor="serial", out=tmp_path)
    assert set(df["key"]).isdisjoint(simulated["key"])  # the two fidelities never share a cached point
