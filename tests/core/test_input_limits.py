"""Strict input and bounds: what fuzzing the scenario schema found, each a regression test.

Booleans and strings are never numbers; every number has a stated range; YAML documents too deep or
expanding too far are refused quickly; runs whose work would take hours are refused before planning;
error messages quote at most one short line of the input; the Python API raises wss errors only.
"""

from __future__ import annotations

import re
import time
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

import wss
from wss.errors import MAX_ECHO_CHARS, ScenarioError, WssError
from wss.model.scenario import Scenario
from wss.model.scenario.limits import MAX_CHUNK_PASSES, MAX_LAYERS, work_checks
from wss.model.scenario.yaml_io import line_map

REPO = Path(__file__).resolve().parents[2]
FC = REPO / "scenarios" / "fc_mnist.yaml"
GPT3 = REPO / "scenarios" / "gpt3_175b.yaml"


def _problem(source, overrides=None) -> str:
    start = time.perf_counter()
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(source, overrides)
    assert time.perf_counter() - start < 5.0, "a refusal must be quick"
    return str(info.value)


# --------------------------------------------------------------------------- strict types


@pytest.mark.parametrize("text, field, words", [
    ("clock_Hz: yes", "hardware.wafer.clock_Hz", "must be a number, got True"),
    ("clock_Hz: '8.5e8'", "hardware.wafer.clock_Hz", "must be a number, got '8.5e8'"),
    ("simd_width: on", "hardware.wafer.simd_width", "must be an integer, got True"),
])
def test_a_yaml_boolean_or_string_is_never_a_number(tmp_path, text, field, words):
    path = tmp_path / "s.yaml"
    path.write_text(f"hardware:\n  preset: cs2-cluster\n  wafer:\n    preset: wse2\n    {text}\n"
                    "workload: {model: fc-mnist}\ntraining: {global_batch: 8}\n")
    message = _problem(path)
    assert f"{field} (line 5): {words}" in message


@pytest.mark.parametrize("key, value, words", [
    ("hardware.wafers", True, "must be an integer, got True"),
    ("hardware.wafers", "16", "must be an integer, got '16'"),
    ("training.global_batch", False, "must be an integer, got False"),
    ("simulation.chunk_bytes", "64e6", "must be a number, got '64e6'"),
    ("numerics.enabled", 1, "Input should be a valid boolean"),
    ("simulation.fold_micro_batches", "yes", "Input should be a valid boolean"),
])
def test_overrides_are_held_to_the_same_types(key, value, words):
    assert words in _problem(FC, {key: value})


def test_yaml_true_in_an_override_is_a_boolean_not_one():
    assert "hardware.wafers: must be an integer, got True" in _problem(FC, ["hardware.wafers=true"])


def test_whole_numbers_written_as_floats_still_count():
    s = wss.load_scenario(FC, {"training.global_batch": 2.56e2, "hardware.wafers": 4.0})
    assert s.training.global_batch == 256 and isinstance(s.hardware.wafers, int)


# --------------------------------------------------------------------------- ranges


@pytest.mark.parametrize("key, value, words", [
    ("training.global_batch", 1e9, "must be at most 1,000,000"),
    ("simulation.chunk_bytes", 5e-324, "must be at least 1,024"),
    ("hardware.swarmx.hop_latency_s", 1e308, "must be at most 1"),
    ("hardware.wafer.clock_Hz", 1e-300, "must be at least 1,000,000"),
    ("hardware.wafer.clock_Hz", 1e300, "must be at most 1e11"),
    ("hardware.wafer.nonweight_efficiency", 5e-324, "must be at least 1e-3"),
    ("hardware.wafer.kernel_efficiency", 1.5, "must be at most 1"),
    ("numerics.weight_decay", float("inf"), "numerics.weight_decay"),
    ("numerics.learning_rate", 1e300, "must be at most 100"),
    ("numerics.learning_rate", float("nan"), "numerics.learning_rate"),
    ("training.steps", 1_000_000, "must be at most 100,000"),
    ("workload.model.layers.0.repeat", 1_000_000, "must be at most 10,000"),
    ("hardware.wafers", 10**4000, "an integer of about 4000 digits"),
    ("seed", -1, "must be at least 0"),
])
def test_numbers_out_of_any_real_machine_s_range_are_refused(key, value, words):
    message = _problem(FC, {key: value})
    assert key in message and words in message


def _numeric_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, typing.Any, list]]:
    out = []
    for name, info in model.model_fields.items():
        args = [a for a in typing.get_args(info.annotation) if a is not type(None)] or [info.annotation]
        for tp in args:
            meta = list(info.metadata)
            while typing.get_origin(tp) is typing.Annotated:
                tp, *more = typing.get_args(tp)
                meta += [m for extra in more for m in getattr(extra, "metadata", [extra])]
            if isinstance(tp, type) and issubclass(tp, BaseModel):
                out += _numeric_fields(tp, f"{prefix}{name}.")
            elif tp in (int, float):
                out.append((f"{prefix}{name}", info, meta))
    return out


def test_every_number_field_has_a_range_stated_in_its_description():
    from wss.model.scenario.workload import DenseLayer, EmbeddingLayer, OutputHead, Pooler, TransformerBlock

    fields = _numeric_fields(Scenario)
    for layer in (DenseLayer, EmbeddingLayer, TransformerBlock, Pooler, OutputHead):
        fields += _numeric_fields(layer, f"layers.{layer.__name__}.")
    assert len(fields) > 50
    unbounded, unstated = [], []
    for path, info, meta in fields:
        bounds = {type(m).__name__ for m in meta}
        if not (bounds & {"Le", "Lt"} and bounds & {"Ge", "Gt"}):
            unbounded.append(path)
        if not re.search(r"Range: |\[0, 1\)|from \S+ to \S+", info.description or ""):
            unstated.append(path)
    assert unbounded == [], "fields without an upper and a lower bound"
    assert unstated == [], "fields whose description does not state their range"


def test_every_shipped_scenario_and_validation_case_is_within_the_bounds():
    from wss.studies.validation import load_cases

    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        wss.load_scenario(path)
    assert len(load_cases()) >= 20  # loading each case validates every scenario in it


# --------------------------------------------------------------------------- YAML limits


LAUGHS = "".join(
    f"{a}: &{a} [{', '.join([f'*{b}'] * 9) if b else ', '.join(['lol'] * 9)}]\n"
    for a, b in zip("abcdefghi", [None, *"abcdefgh"])
)


def test_a_billion_laughs_alias_bomb_is_refused_at_once(tmp_path):
    path = tmp_path / "laughs.yaml"
    path.write_text(LAUGHS)
    assert len(LAUGHS) < 400
    start = time.perf_counter()
    message = _problem(path)
    assert "aliases and merges expand the document to more than 200,000 values" in message
    assert time.perf_counter() - start < 1.0
    start = time.perf_counter()
    line_map(LAUGHS)  # walked every alias before: 44 s and 2.9 GB
    assert time.perf_counter() - start < 1.0


def test_a_merge_key_bomb_is_refused_at_once(tmp_path):
    text = "a0: &a0 {x: 1}\n" + "".join(f"a{i}: &a{i} {{<<: [*a{i - 1}, *a{i - 1}], k{i}: 1}}\n" for i in range(1, 40))
    path = tmp_path / "merge.yaml"
    path.write_text(text)
    assert "aliases and merges expand" in _problem(path)


@pytest.mark.parametrize("text", [
    "workload: " + "[" * 500 + "]" * 500 + "\n",
    "".join("  " * i + f"k{i}:\n" for i in range(500)) + "  " * 500 + "x: 1\n",
])
def test_a_document_nested_500_deep_is_refused_not_a_recursion_error(tmp_path, text):
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    assert "nested deeper than 32 levels" in _problem(path)


def test_an_integer_of_4300_digits_is_refused_with_its_line(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("name: x\nseed: " + "9" * 4300 + "\n")
    message = _problem(path)
    assert "(line 2)" in message and "an integer of 4,300 digits" in message
    assert len(message) < 300


def test_a_deep_or_self_containing_mapping_from_python_is_refused():
    deep: dict = {}
    node = deep
    for _ in range(500):
        node["x"] = {}
        node = node["x"]
    assert "nested deeper than 32 levels" in _problem(deep)
    loop: dict = {"name": "x"}
    loop["hardware"] = loop
    assert "nested deeper" in _problem(loop)


# --------------------------------------------------------------------------- work bounds


def test_a_run_that_would_take_hours_is_refused_before_planning():
    message = _problem(GPT3, {"training.steps": 1000})
    assert "training.steps" in message and f"at most {MAX_CHUNK_PASSES:,}" in message


def test_a_model_of_more_layers_than_the_bound_is_refused():
    layer = {"kind": "dense", "in_features": 8, "out_features": 8, "repeat": MAX_LAYERS}
    raw = {"hardware": "cs2-cluster", "training": {"global_batch": 8},
           "workload": {"model": {"input": "features", "layers": [layer, layer]}}}
    assert f"{2 * MAX_LAYERS:,} layers (repeats included); a model has at most {MAX_LAYERS:,}" in _problem(raw)


def test_unfolded_micro_batches_count_in_the_work_bound():
    s = wss.load_scenario(FC)
    assert work_checks(s) == []
    message = _problem(FC, {"simulation.fold_micro_batches": False, "training.global_batch": 1_000_000,
                            "training.micro_batch": 1})
    assert "fold_micro_batches: true simulates at most 5" in message


def test_real_numerics_are_bounded_in_weights_and_work():
    wide = {"numerics.enabled": True, "workload.model": {"input": "features", "layers": [
        {"kind": "dense", "in_features": 10_000, "out_features": 10_000, "activation": "relu"},
        {"kind": "dense", "in_features": 10_000, "out_features": 10, "activation": "none"}]}}
    assert "they train at most 10,000,000" in _problem(FC, wide)
    message = _problem(FC, {"numerics.enabled": True, "training.steps": 100_000})
    assert "training.steps" in message and "sample-weights" in message


# --------------------------------------------------------------------------- messages and the API


def test_a_100kb_value_is_not_repeated_back():
    message = _problem(FC, {"hardware.wafer.clock_Hz": "x" * 100_000})
    assert len(message) < 2 * MAX_ECHO_CHARS + 200 and "…" in message and "\n" not in message


def test_a_100kb_key_or_preset_name_is_not_repeated_back():
    assert len(_problem(FC, {"training." + "k" * 100_000: 1})) < 1000
    assert len(_problem(FC, {"hardware.wafer": "w" * 100_000})) < 2000


def test_a_multi_line_value_is_quoted_on_one_line():
    message = _problem(FC, {"training.optimizer": "adam\n" * 1000})
    assert message.count("\n") == 0 and len(message) < 1000


def test_many_problems_are_listed_twenty_at_most():
    message = _problem(FC, {f"training.unknown_{i}": 1 for i in range(100)})
    assert "100 problems" in message and "... and 80 more" in message
    assert message.count("\n") == 21


@pytest.mark.parametrize("source, overrides", [
    (None, None),
    (42, None),
    (b"scenarios/fc_mnist.yaml", None),
    (FC, {1: 2}),
    (FC, {None: 2}),
    (FC, {"": 2}),
    (FC, {"hardware..wafers": 2}),
    (FC, [1]),
    (FC, "hardware.wafers=2"),
    (FC, 7),
    (str(FC) + "\0", None),
    (REPO / "scenarios", None),
])
def test_the_python_api_raises_wss_errors_only(source, overrides):
    with pytest.raises(ScenarioError):
        wss.load_scenario(source, overrides)


def test_simulate_of_none_is_a_wss_error():
    with pytest.raises(WssError):
        wss.simulate(None)  # type: ignore[arg-type]


def test_docs_limits_lists_every_range_as_the_fields_state_it():
    from wss.model.scenario.workload import DenseLayer, EmbeddingLayer, OutputHead, Pooler, TransformerBlock

    doc = (REPO / "docs" / "limits.md").read_text()
    fields = _numeric_fields(Scenario)
    for layer in (DenseLayer, EmbeddingLayer, TransformerBlock, Pooler, OutputHead):
        fields += _numeric_fields(layer, "workload.model.layers.N.")
    missing = []
    for path, info, _ in fields:
        match = re.search(r"Range: (.*?)(?: \(.*\))?\.$", info.description or "")
        if match and f"| `{path}` | {match.group(1)} |" not in doc:
            missing.append(path)
    assert missing == []


def test_tiny_offload_chunks_are_refused_on_the_plan_the_run_would_simulate(capsys):
    """GPT-3 175B with 1 KB chunks under activation offload: the scenario's estimate (weights only, capped
    by simulation.max_chunks_per_kernel) passes, but its block inputs would travel in 128-byte chunks, tens
    of millions a step; simulate and validate both refuse it, naming the field, before anything runs."""
    from wss.cli import main
    from wss.errors import ScenarioError
    from wss.model.simulate import check_work

    s = wss.load_scenario(GPT3, {"simulation.chunk_bytes": 1024})  # the scenario-level bound accepts it
    with pytest.raises(ScenarioError) as exc:
        wss.simulate(s)
    (problem,) = exc.value.problems
    assert problem.path == "simulation.chunk_bytes"
    assert "of offloaded activations" in problem.message and f"at most {MAX_CHUNK_PASSES:,}" in problem.message
    assert main(["validate", str(GPT3), "--set", "simulation.chunk_bytes=1024"]) == 2
    assert "simulation.chunk_bytes: the run would simulate" in capsys.readouterr().err
    check_work(wss.load_scenario(GPT3))  # the shipped chunk size is well within the bound
    blocks = wss.load_scenario(GPT3, {"simulation.chunk_bytes": 1024, "training.activation_checkpointing": "blocks"})
    check_work(blocks)  # without offload the same chunk size moves few chunks: accepted


def test_a_long_uneven_run_is_announced_with_its_events_and_time_before_it_starts(monkeypatch):
    """GPT-3 175B on 9 wafers: its uneven shards unfold the wafers, and a drift fold stands for the blocks of the
    micro-batch whose sizes differ: the estimate counts that run (a few seconds, not announced) and, apart, the run
    its checks may fall back to (every block of that micro-batch).  With a half-rate edge too no drift fold is
    tried: the estimate counts every block, and the run is announced.  The shipped 192-wafer run is not."""
    from wss.model.folding import run_plan
    from wss.model.folding.run_plan import LONG_RUN_S, long_run_note, run_work

    nine = wss.load_scenario(GPT3, {"hardware.wafers": 9})
    slow = wss.load_scenario(GPT3, {"hardware.wafers": 9,
                                    "faults.links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]})
    work, every = run_work(nine), run_work(slow)
    # at most 3 wafers (6 of 171 spread one under each leaf node, 3 of 170 beside them: the run simulates 2); with
    # the slow edge its subtree is a class of its own
    assert (work.wafers, every.wafers) == (3, 5)
    assert work.most_chunk_passes is not None and work.most_chunk_passes > 2 * work.chunk_passes
    assert work.seconds < LONG_RUN_S < every.seconds and every.most_chunk_passes is None
    assert long_run_note(nine, work) is None
    note = long_run_note(slow, every)
    assert note is not None and note.startswith("gpt3-175b-192: this run will take about ")
    assert "million events)" in note and "the wafers are simulated apart" in note
    shipped = wss.load_scenario(GPT3)
    assert long_run_note(shipped, run_work(shipped)) is None
    monkeypatch.setattr(run_plan, "LONG_RUN_S", 0.0)
    note = long_run_note(nine, work)
    assert note is not None and "million events; up to 1.8 million where a drift fold's checks refuse" in note
    assert "6 wafers of 171, 3 of 170" in note
    assert "simulation.fold_wafers: true folds the wafers and gives the same step" in note


def test_the_estimate_of_an_uneven_run_brackets_its_events():
    """On small uneven clusters the run's events lie between half the estimate (a drift fold standing for the
    uneven micro-batch's blocks) and twice the most it may simulate (every block of it, after a refused try): GPT-3
    125M on 3 wafers, whose tree buffers a chunk past the fold point 47 ms before the lead can be measured (the drift
    fold is refused), and GPT-3 175B on 13 with a global batch of 64, where it holds."""
    from wss.model.folding.run_plan import run_work
    from wss.model.simulate import simulate_detailed

    small = wss.load_scenario(GPT3, {"workload.model": "gpt3-125m", "training.global_batch": 10, "hardware.wafers": 3})
    thirteen = wss.load_scenario(GPT3, {"hardware.wafers": 13, "training.global_batch": 64})
    for s, drift_folds in ((small, False), (thirteen, True)):
        work = run_work(s)
        _, c = simulate_detailed(s, record=False)
        assert work.most_chunk_passes is not None
        assert work.events / 2 <= c.events <= 2 * work.most_chunk_passes * work.events / work.chunk_passes
        assert (not c.plan.blocks_unfolded_in) == drift_folds
        if drift_folds:
            assert c.events <= 2 * work.events


def test_wss_simulate_says_a_long_run_on_stderr_before_it_starts(tmp_path, capsys, monkeypatch):
    """The note goes to stderr (a warning, silenced by --quiet), the result.json is the same as without it."""
    from wss.cli import main

    small = ["--set", "workload.model=gpt3-125m", "--set", "training.global_batch=10", "--set", "hardware.wafers=3"]
    assert main(["simulate", str(GPT3), *small, "-o", str(tmp_path / "plain")]) == 0
    assert "this run will take" not in capsys.readouterr().err
    monkeypatch.setattr("wss.model.folding.run_plan.LONG_RUN_S", 0.0)
    assert main(["simulate", str(GPT3), *small, "-o", str(tmp_path / "noted")]) == 0
    err = capsys.readouterr().err
    assert err.startswith("wss: WARNING: gpt3-175b-192: this run will take ")
    assert (tmp_path / "plain" / "result.json").read_text() == (tmp_path / "noted" / "result.json").read_text()
    assert main(["simulate", str(GPT3), *small, "-o", str(tmp_path / "quiet"), "--quiet"]) == 0
    assert capsys.readouterr().err == ""
