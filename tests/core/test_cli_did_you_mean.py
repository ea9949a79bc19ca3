"""Typos get a "did you mean": unknown fields (YAML and ``--set``), unknown presets, and ``wss sweep`` keys,
which are refused before any point runs.
"""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS

from wss.cli import main
from wss.errors import ScenarioError
from wss.model.scenario import load_scenario
from wss.model.scenario.loader import key_problem
from wss.model.scenario.presets import PresetNotFound, load_model_preset
from wss.studies.sweep import SweepError, sweep

FC_MNIST = SCENARIOS / "fc_mnist.yaml"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]



@pytest.mark.parametrize(("vary", "hint"), [
    ("hardware.wafer=1,2",
     "--vary hardware.wafer is a group of fields, not one field; did you mean 'hardware.wafers'?"),
    ("hardware.wafres=1,2", "--vary hardware.wafres: no such field; did you mean 'hardware.wafers'?"),
    ("trainng.steps=1,2", "--vary trainng.steps: no such field; did you mean 'training.steps'?"),
])
def test_a_misspelt_vary_key_is_bad_input_before_any_point_runs(vary, hint, tmp_path, capsys):
    out = tmp_path / "table.csv"
    assert main(["sweep", str(FC_MNIST), "--vary", vary, "--executor", "serial", "-o", str(out)]) == 2
    captured = capsys.readouterr()
    assert _one_error_line(captured.err) == f"error: {hint}"
    assert captured.out == "" and not tmp_path.joinpath("table.csv.points").exists() and not out.exists()


def test_a_misspelt_set_key_of_a_sweep_is_bad_input(capsys):
    args = ["sweep", str(FC_MNIST), "--vary", "hardware.wafers=1,2", "--set", "training.step=2", "--executor", "serial"]
    assert main(args) == 2
    assert _one_error_line(capsys.readouterr().err) == (
        "error: --set training.step: no such field; did you mean 'training.steps'?")


def test_sweep_checks_its_keys_from_python_too():
    with pytest.raises(SweepError, match=r"vary: hardware\.wafres: no such field; did you mean 'hardware\.wafers'\?"):
        sweep(FC_MNIST, {"hardware.wafres": [1, 2]}, executor="serial")
    with pytest.raises(SweepError, match=r"overrides: training\.optimiser: .*did you mean 'training\.optimizer'\?"):
        sweep(FC_MNIST, {"hardware.wafers": [1]}, executor="serial", overrides={"training.optimiser": "sgd"})


@pytest.mark.parametrize(("key", "values"), [
    ("hardware.wafers", [1, 2]),
    ("hardware.wafer", ["wse2", "wse3"]),  # preset names
    ("hardware.wafer", [{"preset": "wse3"}]),  # a mapping
    ("hardware.wafer.preset", ["wse3"]),
    ("hardware", ["cs2-cluster"]),
    ("workload.model", ["gpt3-125m"]),
    ("workload.model.layers.0.sparsity", [0.5]),
    ("workload.sparsity.ffn_up", [0.5]),
    ("training.micro_batch", ["auto", 2]),
    ("simulation.fold_micro_batches", [False]),
])
def test_valid_keys_pass(key, values):
    assert key_problem(key, values) is None


def test_an_unknown_field_in_a_scenario_or_set_suggests_the_closest(tmp_path, capsys):
    assert main(["validate", str(FC_MNIST), "--set", "training.optimiser=sgd"]) == 2
    assert _one_error_line(capsys.readouterr().err).endswith(
        "training.optimiser: unknown field; did you mean 'optimizer'? [from --set training.optimiser]")
    text = FC_MNIST.read_text(encoding="utf-8").replace("training:", "training:\n  stepz: 2", 1)
    (tmp_path / "s.yaml").write_text(text, encoding="utf-8")
    with pytest.raises(ScenarioError, match=r"training\.stepz \(line \d+\): unknown field; did you mean 'steps'\?"):
        load_scenario(tmp_path / "s.yaml")


def test_an_unknown_field_far_from_any_gets_no_suggestion():
    with pytest.raises(ScenarioError) as info:
        load_scenario(FC_MNIST, ["training.zzzzzz=1"])
    assert [p.message for p in info.value.problems] == ["unknown field [from --set training.zzzzzz]"]


def test_an_unknown_preset_suggests_the_closest(capsys):
    preset = r"unknown model preset 'gpt3-125n' \(did you mean 'gpt3-125m'\?\); known: "
    with pytest.raises(PresetNotFound, match=preset):
        load_model_preset("gpt3-125n")
    assert main(["validate", str(FC_MNIST), "--set", "hardware.wafer=wse22"]) == 2
    assert "unknown wafer preset 'wse22' (did you mean 'wse2'?); known: wse2, wse3" in capsys.readouterr().err
    with pytest.raises(PresetNotFound) as info:
        load_model_preset("nothing-like-it")
    assert "did you mean" not in str(info.value)
