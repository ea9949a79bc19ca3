"""A sweep over cluster sizes: a count the batch does not divide runs with the busiest wafer for all, and its
row is the row of the run with the wafers apart (the lock-step tree waits for the busiest wafer)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import wss
import wss.model.simulate as simulate_module
from wss.studies.sweep.rows import metrics
from wss.studies.sweep.worker import run_point

REPO = Path(__file__).resolve().parents[2]
BASE = {"workload.model": "gpt3-1.3b", "training.global_batch": 60, "job": "none"}


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)
    return a == b


def test_an_uneven_point_runs_folded_with_the_row_of_the_wafers_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    s = wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml", {**BASE, "hardware.wafers": 7})
    apart = wss.simulate(s)
    assert not apart.wafer_folding.folded  # 60 samples over 7 wafers: auto runs them apart
    seen: list[object] = []
    real = simulate_module.simulate

    def spy(scenario, *args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(scenario.simulation.fold_wafers)
        return real(scenario, *args, **kwargs)

    monkeypatch.setattr(simulate_module, "simulate", spy)
    row = run_point(s.model_dump(mode="json"))
    assert seen == [True]
    expected = metrics(apart)
    assert row["status"] == "ok"
    assert {k: (row[k], v) for k, v in expected.items() if not _same(row[k], v)} == {}


def test_a_point_with_a_straggler_still_runs_its_wafers_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    s = wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml",
                          {**BASE, "hardware.wafers": 7, "faults.stragglers": [{"wafer": 2, "slowdown": 1.1}]})
    seen: list[object] = []
    real = simulate_module.simulate
    monkeypatch.setattr(simulate_module, "simulate",
                        lambda scenario: seen.append(scenario.simulation.fold_wafers) or real(scenario))
    assert run_point(s.model_dump(mode="json"))["status"] == "ok"
    assert seen == ["auto"]
