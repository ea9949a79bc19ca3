"""fidelity="estimate": sweep points through the analytical estimator."""

from __future__ import annotations

from wss.studies.sweep import sweep


def test_estimate_fidelity_gives_rows(base, tmp_path):
    df = sweep(base, {"hardware.wafers": [1, 2, 4]}, fidelity="estimate", executor="serial", out=tmp_path)
    assert (df["status"] == "ok").all(), df["error"].tolist()
    assert (df["step_time_s"] > 0).all() and (df["samples_per_s"] > 0).all()
    assert set(df["fidelity"]) == {"estimate"}
    assert df["speedup"].iloc[0] == 1.0 and df["bound_by"].notna().all()
    simulated = sweep(base, {"hardware.wafers": [1, 2, 4]}, executor="serial", out=tmp_path)
    assert set(df["key"]).isdisjoint(simulated["key"])  # the two fidelities never share a cached point
