"""``--json`` on simulate, validate, check and plan: one JSON document on stdout and nothing else there.

Each test runs the real entry point (``wss.cli.main``) and parses the whole of stdout with ``json.loads``,
so any stray line (a "wrote" message, a summary, a progress bar) fails it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from core_helpers import REPO, SCENARIOS

import wss
from wss.cli import main

FC_MNIST = SCENARIOS / "fc_mnist.yaml"


def _json_out(capsys) -> tuple[dict, str]:
    captured = capsys.readouterr()
    return json.loads(captured.out), captured.err


def test_simulate_json_is_the_result_without_its_records(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["simulate", str(FC_MNIST), "-o", str(out), "--json", "--trace"]) == 0
    doc, err = _json_out(capsys)
    assert err == ""
    assert doc["result_file"] == str(out / "result.json")
    assert doc["written"] == [str(out / "result.json"), str(out / "trace.json")]
    assert doc["overrides"] == []
    saved = json.loads((out / "result.json").read_text(encoding="utf-8"))
    del saved["records"]
    assert {k: v for k, v in doc.items() if k not in ("result_file", "written", "overrides")} == saved
    assert doc["step_time_s"] == wss.Result.load(out / "result.json").step_time_s


def test_simulate_json_with_overrides_and_verdict(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["simulate", str(FC_MNIST), "-o", str(out), "--json", "--verdict", "--set", "hardware.wafers=2"]
    assert main(argv) == 0
    doc, _ = _json_out(capsys)
    assert doc["overrides"] == ["hardware.wafers=2"] and doc["scenario"]["hardware"]["wafers"] == 2
    assert doc["verdict"]["category"] == doc["bound_by"]
    assert doc["verdict"]["candidates"] and doc["verdict"]["step_time_s"] == doc["step_time_s"]


def test_simulate_json_on_bad_input_prints_nothing_on_stdout(tmp_path, capsys):
    assert main(["simulate", str(FC_MNIST), "-o", str(tmp_path / "r"), "--json", "--set", "hardware.wafers=0"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("error: ")


def test_validate_json_says_what_was_checked(capsys):
    assert main(["validate", str(FC_MNIST), "--json"]) == 0
    doc, _ = _json_out(capsys)
    plan = wss.plan(wss.load_scenario(FC_MNIST))
    assert doc["ok"] is True and doc["scenario_file"] == str(FC_MNIST) and doc["name"] == "fc-mnist"
    assert doc["micro_batches"] == plan.micro_batches and doc["params"] == plan.params
    assert doc["memoryx"]["state_bytes"] == plan.memoryx_state_bytes
    assert doc["wafer_sram"]["activation_bytes_needed"] == plan.sram_bytes_needed
    assert doc["plan_choice"]["reason"] == plan.choice.reason


def test_validate_json_on_bad_input_lists_the_problems_and_exits_2(capsys):
    argv = ["validate", str(FC_MNIST), "--json", "--set", "hardware.wafers=0", "--set", "training.optimizer=x"]
    assert main(argv) == 2
    doc, err = _json_out(capsys)
    assert doc["ok"] is False and doc["scenario_file"] == str(FC_MNIST)
    assert [p["path"] for p in doc["problems"]] == ["hardware.wafers", "training.optimizer"]
    assert err.startswith(f"error: {FC_MNIST}: 2 problems")


def test_validate_json_on_a_missing_file(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["validate", str(missing), "--json"]) == 2
    doc, err = _json_out(capsys)
    assert doc["ok"] is False and "no such file" in doc["error"] and err.startswith("error: ")


@pytest.fixture
def baselines(tmp_path) -> Path:
    folder = tmp_path / "baselines"
    folder.mkdir()
    shutil.copy(REPO / "baselines" / "fc_mnist.json", folder / "fc_mnist.json")
    return folder


def test_check_json_reports_every_metric(baselines, capsys):
    assert main(["check", str(FC_MNIST), "--baselines", str(baselines), "--json"]) == 0
    doc, err = _json_out(capsys)
    assert err == "" and doc["exit_code"] == 0 and doc["counts"] == {"ok": 1, "regressed": 0, "error": 0}
    (entry,) = doc["scenarios"]
    assert entry["status"] == "ok" and entry["baseline_file"] == str(baselines / "fc_mnist.json")
    rows = {r["metric"]: r for r in entry["comparison"]["rows"]}
    assert rows["step_time_s"]["verdict"] == "ok" and rows["step_time_s"]["change"] == pytest.approx(0, abs=1e-9)


def test_check_json_regression_and_error_keep_their_exit_codes(baselines, tmp_path, capsys):
    path = baselines / "fc_mnist.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metrics"]["step_time_s"] *= 0.5
    path.write_text(json.dumps(data), encoding="utf-8")
    assert main(["check", str(FC_MNIST), "--baselines", str(baselines), "--json"]) == 1
    doc, _ = _json_out(capsys)
    (entry,) = doc["scenarios"]
    assert doc["exit_code"] == 1 and entry["status"] == "regressed" and entry["comparison"]["regressed"] >= 1
    assert {r["metric"]: r for r in entry["comparison"]["rows"]}["step_time_s"]["verdict"] == "REGRESSED"
    missing = tmp_path / "missing.yaml"
    assert main(["check", str(FC_MNIST), str(missing), "--baselines", str(baselines), "--json"]) == 2
    doc, err = _json_out(capsys)
    assert [e["status"] for e in doc["scenarios"]] == ["regressed", "error"]
    assert doc["counts"] == {"ok": 0, "regressed": 1, "error": 1} and err.startswith(f"error: {missing}")


def test_check_json_update(tmp_path, capsys):
    folder = tmp_path / "new"
    for status, note in (("updated", "new"), ("unchanged", "the baseline was already this run's")):
        assert main(["check", str(FC_MNIST), "--baselines", str(folder), "--update", "--json"]) == 0
        doc, _ = _json_out(capsys)
        (entry,) = doc["scenarios"]
        assert (entry["status"], entry["note"]) == (status, note)
    assert (folder / "fc_mnist.json").is_file()


def test_plan_json_is_one_document(capsys):
    assert main(["plan", str(FC_MNIST), "--json", "--top", "2"]) == 0
    doc, err = _json_out(capsys)
    assert doc["scenario"] == "fc-mnist" and 1 <= len(doc["shown"]) <= 3 and err == ""
