"""Scenario cross-checks and error wording: seq_len against the model, micro_batch against the per-wafer
batch, and pydantic's union errors reported as one clear problem per field."""

from __future__ import annotations

import textwrap

import pytest
from core_helpers import REPO, SCENARIOS, dense_model, run_wss_here, scenario_dict

import wss
from wss import ScenarioError, WssError


def write(tmp_path, text: str, name: str = "scenario.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def only_problem(err: ScenarioError):
    assert len(err.problems) == 1, str(err)
    return err.problems[0]


def token_model(max_positions: int = 0, seq_len: int | None = None) -> dict:
    model = {
        "name": "tiny-lm",
        "input": "tokens",
        "layers": [
            {"kind": "embedding", "vocab_size": 64, "d_model": 32, "max_positions": max_positions},
            {"kind": "transformer_block", "d_model": 32, "n_heads": 4},
            {"kind": "output_head", "d_model": 32, "vocab_size": 64},
        ],
    }
    if seq_len is not None:
        model["seq_len"] = seq_len
    return model


# ---------------------------------------------------------------------------- seq_len vs the model's context


def test_seq_len_beyond_the_models_position_table_is_an_error():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.seq_len=4096"])
    problem = only_problem(info.value)
    assert problem.path == "training.seq_len"
    assert "4096" in problem.message and "context" in problem.message and "2048" in problem.message
    assert "gpt3-175b" in problem.message
    assert "[from --set training.seq_len]" in problem.message


def test_seq_len_up_to_the_context_is_fine():
    assert wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.seq_len=2048"]).seq_len == 2048
    assert wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.seq_len=1024"]).seq_len == 1024


def test_seq_len_beyond_the_context_in_a_file_names_its_line(tmp_path):
    path = write(
        tmp_path,
        """
        hardware: {preset: cs2-cluster}
        workload: {model: bert-large}
        training:
          global_batch: 4
          seq_len: 1024
        """,
    )
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    problem = only_problem(info.value)
    assert (problem.path, problem.line) == ("training.seq_len", 5)
    assert "512" in problem.message
    assert str(info.value).startswith(str(path))


def test_a_model_without_learned_positions_has_no_context_limit():
    s = wss.load_scenario(scenario_dict(model=token_model(max_positions=0), training={"seq_len": 100_000}))
    assert s.seq_len == 100_000


def test_a_models_default_seq_len_is_checked_against_its_table():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(model=token_model(max_positions=128, seq_len=256)))
    problem = only_problem(info.value)
    assert problem.path == "workload.model.seq_len"
    assert "128" in problem.message
    # ... but an explicit training.seq_len within the table replaces the default
    assert wss.load_scenario(scenario_dict(model=token_model(128, 256), training={"seq_len": 128})).seq_len == 128


def test_a_smaller_position_table_set_beside_a_preset_lowers_the_context():
    overrides = ["workload.model.layers.0.max_positions=1024", "training.seq_len=1024"]
    assert wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", overrides).seq_len == 1024
    with pytest.raises(ScenarioError, match="1024 tokens"):
        wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["workload.model.layers.0.max_positions=1024"])


# ---------------------------------------------------------------------------- seq_len on feature models


@pytest.mark.parametrize("value", [128, 1])
def test_seq_len_on_a_feature_model_is_an_error(value):
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", [f"training.seq_len={value}"])
    problem = only_problem(info.value)
    assert problem.path == "training.seq_len"
    assert "only to token models" in problem.message
    assert "fc-mnist" in problem.message and f"got {value}" in problem.message


def test_seq_len_inside_a_feature_model_is_an_error():
    model = {**dense_model(16, 16), "seq_len": 8}
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(model=model))
    assert only_problem(info.value).path == "workload.model.seq_len"


def test_feature_model_without_seq_len_still_loads():
    s = wss.load_scenario(SCENARIOS / "fc_mnist.yaml")
    assert s.training.seq_len is None and s.seq_len == 1


def test_every_shipped_validation_case_still_loads():
    from wss.studies.validation import load_case

    paths = sorted((SCENARIOS / "validation").glob("*.yaml"))
    assert paths
    for path in paths:
        assert load_case(path).scenarios


# ---------------------------------------------------------------------------- micro_batch vs the per-wafer batch


def test_micro_batch_above_the_per_wafer_batch_is_an_error():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["training.micro_batch=1000"])
    problem = only_problem(info.value)
    assert problem.path == "training.micro_batch"
    assert "1000 exceeds the per-wafer batch of 64" in problem.message
    assert "training.global_batch 256 / hardware.wafers 4" in problem.message


def test_micro_batch_equal_to_the_per_wafer_batch_is_fine():
    plan = wss.plan(wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["training.micro_batch=64"]))
    assert plan.micro_batches == [64]


def test_per_wafer_batch_of_an_uneven_split_is_the_busiest_wafers():
    ok = wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["training.global_batch=257", "training.micro_batch=65"])
    assert wss.plan(ok).micro_batches == [65]
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["training.global_batch=257", "training.micro_batch=66"])
    assert "at most 65" in only_problem(info.value).message


def test_micro_batch_that_does_not_divide_the_wafer_batch_is_split_evenly():
    # Changed with the planner: this used to run [48, 16] (full micro-batches, the remainder last).  An
    # explicit micro_batch is now the largest size: the fewest micro-batches that allow it, cut evenly
    # (documented on TrainingConfig.micro_batch), so no near-empty last micro-batch streams every weight again.
    plan = wss.plan(wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["training.micro_batch=48"]))
    assert plan.micro_batches == [32, 32]


def test_micro_batch_check_does_not_pile_onto_a_batch_smaller_than_the_wafers():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(wafers=8, global_batch=4, training={"micro_batch": 2}))
    assert [p.path for p in info.value.problems] == ["training.global_batch"]


# ---------------------------------------------------------------------------- union errors, one line each


@pytest.mark.parametrize(
    "value, shown", [(0, "0"), (-3, "-3"), ("big", "'big'"), ("{a: 1}", "a mapping"), (2.5, "2.5")]
)
def test_bad_micro_batch_is_one_plain_problem(value, shown):
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", [f"training.micro_batch={value}"])
    problem = only_problem(info.value)
    assert problem.path == "training.micro_batch"
    assert problem.message.startswith(f"must be an integer from 1 to 1,000,000 or 'auto', got {shown}")
    for noise in ("constrained-int", "literal[", "Input should"):
        assert noise not in str(info.value)


def test_bad_micro_batch_in_a_file_keeps_its_line(tmp_path):
    path = write(
        tmp_path,
        """
        hardware: {preset: cs2-cluster}
        workload: {model: fc-mnist}
        training:
          global_batch: 8
          micro_batch: none
        """,
    )
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    problem = only_problem(info.value)
    assert (problem.path, problem.line) == ("training.micro_batch", 5)
    assert problem.message == "must be an integer from 1 to 1,000,000 or 'auto', got 'none'"


@pytest.mark.parametrize("position", ["only", "first", "last"])
def test_misspelt_layer_kind_is_one_problem_at_the_kind(tmp_path, position):
    bad = "      - kind: denze\n        in_features: 64\n        out_features: 64\n"
    good = "      - {kind: dense, in_features: 64, out_features: 64}\n"
    layers = {"only": bad, "first": bad + good, "last": good + bad}[position]
    index = 1 if position == "last" else 0
    text = "hardware: {preset: cs2-cluster}\nworkload:\n  model:\n    input: features\n    layers:\n" + layers
    text += "training: {global_batch: 4}\n"
    path = tmp_path / "denze.yaml"
    path.write_text(text, encoding="utf-8")
    line = text.splitlines().index("      - kind: denze") + 1
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    problem = only_problem(info.value)
    assert (problem.path, problem.line) == (f"workload.model.layers.{index}.kind", line)
    assert "unknown kind 'denze'" in problem.message
    assert "'dense'" in problem.message and "'transformer_block'" in problem.message
    assert "Tuple should" not in str(info.value)


def test_layer_without_a_kind_says_the_kind_is_missing():
    model = {"input": "features", "layers": [{"in_features": 8, "out_features": 8}]}
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(model=model))
    problem = only_problem(info.value)
    assert problem.path == "workload.model.layers.0.kind"
    assert problem.message.startswith("required field is missing") and "'dense'" in problem.message


def test_an_empty_layer_list_still_says_it_is_too_short():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(model={"input": "features", "layers": []}))
    problem = only_problem(info.value)
    assert problem.path == "workload.model.layers" and "at least 1" in problem.message


def test_errors_inside_a_layer_keep_the_field_path_without_the_tag():
    model = dense_model(8, 8)
    model["layers"][0]["in_features"] = 0
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(model=model))
    problem = only_problem(info.value)
    assert problem.path == "workload.model.layers.0.in_features"
    assert "must be at least 1" in problem.message and "got 0" in problem.message


def test_validator_errors_lose_the_value_error_prefix_and_name_the_layer(tmp_path):
    path = write(
        tmp_path,
        """
        hardware: {preset: cs2-cluster}
        workload:
          model:
            input: features
            layers:
              - {kind: dense, in_features: 64, out_features: 64}
              - {kind: dense, in_features: 32, out_features: 64}
        training: {global_batch: 4}
        """,
    )
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    problem = only_problem(info.value)
    assert "Value error" not in problem.message
    assert (problem.path, problem.line) == ("workload.model.layers.1", 7)
    assert "expects width 32" in problem.message

    block = dense_model(8, 8)
    block["layers"] = [{"kind": "transformer_block", "d_model": 64, "n_heads": 7}]
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(model=block))
    problem = only_problem(info.value)
    assert problem.path == "workload.model.layers.0"
    assert problem.message == "d_model 64 is not divisible by n_heads 7; give d_head"


def test_the_errors_are_wss_errors():
    with pytest.raises(WssError):
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["training.micro_batch=0"])


# ---------------------------------------------------------------------------- through the CLI


@pytest.mark.parametrize(
    "scenario, setting, words",
    [
        ("gpt3_175b.yaml", "training.seq_len=4096", ["training.seq_len", "context", "2048"]),
        ("fc_mnist.yaml", "training.seq_len=128", ["training.seq_len", "only to token models"]),
        ("fc_mnist.yaml", "training.micro_batch=1000", ["training.micro_batch", "per-wafer batch of 64"]),
        (
            "fc_mnist.yaml",
            "training.micro_batch=0",
            ["training.micro_batch: must be an integer from 1 to 1,000,000 or 'auto', got 0"],
        ),
    ],
    ids=["seq-beyond-context", "seq-on-features", "micro-batch-too-big", "micro-batch-zero"],
)
def test_cli_validate_rejects_with_exit_2_and_one_line(scenario, setting, words):
    done = run_wss_here(["validate", f"scenarios/{scenario}", "--set", setting], cwd=REPO)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"scenarios/{scenario}" in done.stderr
    for word in words:
        assert word in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
