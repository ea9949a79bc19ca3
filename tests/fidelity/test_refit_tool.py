"""tools/refit.py: the whole refit is one command; it runs its steps in order and stops at the first failure."""

from __future__ import annotations

import pytest
from fidelity_helpers import REPO, load_tool


@pytest.fixture(scope="module")
def refit():
    return load_tool("refit")


def test_the_steps_fit_first_then_re_record_and_regenerate(refit):
    steps = [" ".join(s) for s in refit.steps()]
    assert steps[0].endswith("tools/calibrate.py --write")
    assert "--baselines baselines/ --update" in steps[1]
    assert all(f"scenarios/{p.name}" in steps[1] for p in (REPO / "scenarios").glob("*.yaml"))
    later = " ".join(steps[2:])
    for generated in ("fidelity_tables.py --full --write", "gen_reference_doc.py", "gen_validation_doc.py",
                      "docs/scenario.schema.json", "docs/validation-case.schema.json",
                      "tests/check/test_check_compare.py --update-goldens"):
        assert generated in later


def test_plan_runs_nothing(refit, monkeypatch, capsys):
    monkeypatch.setattr(refit.subprocess, "call", lambda *a, **k: pytest.fail("ran a step"))
    assert refit.main(["--plan"]) == 0
    assert "[1/" in capsys.readouterr().out


def test_a_failing_step_stops_the_refit(refit, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(refit.subprocess, "call", lambda cmd, **k: calls.append(cmd) or 2)
    assert refit.main([]) == 1
    assert len(calls) == 1 and "step 1 failed" in capsys.readouterr().err


def test_prose_citing_a_moved_value_is_listed(refit, tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "model.md").write_text("| `step_overhead_s` | 0.038 s (calibrated) |\nan 0.0385 s figure\n")
    record = {"parameters": {"hardware.runtime.step_overhead_s": {"before": 0.038, "after": 0.05, "rows": []},
                             "hardware.wafer.kernel_efficiency@wse2": {"before": 0.46, "after": 0.46, "rows": []}}}
    (tmp_path / "scenarios" / "validation").mkdir(parents=True)
    (tmp_path / "scenarios" / "fc.yaml").write_text("  # with the shipped 0.038 s per step (step_overhead_s)\n")
    (tmp_path / "scenarios" / "validation" / "m1.yaml").write_text(
        "note: calibrated at 0.038 s and 0.46\n  a step overhead of 0.038 s\n  a 0.038 s wait, unrelated\n")
    stale = refit.stale_prose(record, tmp_path)
    assert stale == ["docs/model.md:1: hardware.runtime.step_overhead_s was 0.038: | `step_overhead_s` | 0.038 s "
                     "(calibrated) |",
                     "scenarios/fc.yaml:1: hardware.runtime.step_overhead_s was 0.038: # with the shipped 0.038 s per "
                     "step (step_overhead_s)",
                     "scenarios/validation/m1.yaml:1: hardware.runtime.step_overhead_s was 0.038: note: calibrated at "
                     "0.038 s and 0.46",
                     "scenarios/validation/m1.yaml:2: hardware.runtime.step_overhead_s was 0.038: a step overhead of "
                     "0.038 s"]


def test_from_resumes_at_a_step(refit, monkeypatch):
    calls = []
    monkeypatch.setattr(refit.subprocess, "call", lambda cmd, **k: calls.append(cmd) or 0)
    monkeypatch.setattr(refit, "stale_prose", lambda record: [])
    monkeypatch.setattr(refit.json, "loads", lambda text: {"parameters": {}})
    assert refit.main(["--from", "3"]) == 0
    assert calls == refit.steps()[2:]
