"""Scenario loading: presets, overrides, YAML quirks, error messages, immutability."""

from __future__ import annotations

import textwrap

import pydantic
import pytest
from core_helpers import SCENARIOS, dense_model, scenario_dict

import wss
from wss import ScenarioError
from wss.model.scenario.presets import load_model_preset, load_part_preset


def write(tmp_path, text: str, name: str = "scenario.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


# ---------------------------------------------------------------------------- presets


def test_cluster_preset_resolves_every_part_from_configs():
    s = wss.load_scenario(scenario_dict(wafers=4, global_batch=8))
    wse2 = load_part_preset("wafer", "wse2")
    mx = load_part_preset("memoryx", "memoryx-12tb")
    sx = load_part_preset("swarmx", "swarmx-1to4")
    assert s.hardware.preset == "cs2-cluster"
    assert s.hardware.wafers == 4
    assert s.hardware.wafer.name == "wse2"
    assert (s.hardware.wafer.core_rows, s.hardware.wafer.core_cols) == (wse2["core_rows"], wse2["core_cols"])
    assert s.hardware.wafer.clock_Hz == wse2["clock_Hz"]
    assert s.hardware.memoryx.name == "memoryx-12tb"
    assert s.hardware.memoryx.shards == mx["shards"]
    assert s.hardware.memoryx.dram_bandwidth_Bps == mx["dram_bandwidth_Bps"]
    assert s.hardware.swarmx.fan_out == sx["fan_out"]
    assert s.hardware.swarmx.hop_latency_s == sx["hop_latency_s"]


def test_field_beside_a_preset_overrides_only_that_field():
    raw = scenario_dict(
        hardware={
            "wafer": {"clock_Hz": 2.0e9},
            "memoryx": {"preset": "memoryx-4tb", "shards": 7},
            "swarmx": {"hop_latency_s": 0.0},
        }
    )
    s = wss.load_scenario(raw)
    mx4 = load_part_preset("memoryx", "memoryx-4tb")
    wse2 = load_part_preset("wafer", "wse2")
    assert s.hardware.wafer.clock_Hz == 2.0e9
    assert s.hardware.wafer.core_rows == wse2["core_rows"]  # untouched field keeps the preset's value
    assert s.hardware.memoryx.name == "memoryx-4tb"
    assert s.hardware.memoryx.shards == 7
    assert s.hardware.memoryx.network_bandwidth_Bps == mx4["network_bandwidth_Bps"]
    assert s.hardware.swarmx.hop_latency_s == 0.0
    assert s.hardware.swarmx.fan_out == 4


def test_model_preset_name_resolves_to_its_layers():
    s = wss.load_scenario(scenario_dict(model="fc-mnist"))
    spec = load_model_preset("fc-mnist")
    assert s.workload.model.name == "fc-mnist"
    assert s.workload.model.input == "features"
    assert [(layer.in_features, layer.out_features) for layer in s.workload.model.layers] == [
        (layer["in_features"], layer["out_features"]) for layer in spec["layers"]
    ]


def test_every_listed_preset_loads():
    presets = wss.list_presets()
    assert {"hardware", "wafer", "memoryx", "swarmx", "model"} <= set(presets)
    assert "cs2-cluster" in presets["hardware"] and "gpt3-175b" in presets["model"]
    for name in presets["hardware"]:
        s = wss.load_scenario(scenario_dict(hardware={"preset": name}))
        assert s.hardware.preset == name
    for name in presets["model"]:
        spec = load_model_preset(name)
        windowed = any(layer.get("window") for layer in spec["layers"])  # a window needs a sequence as long
        training = {"seq_len": 128} if spec.get("input", "tokens") == "tokens" and not windowed else {}
        s = wss.load_scenario(scenario_dict(model=name, training=training))
        assert s.workload.model.name == name


# ---------------------------------------------------------------------------- overrides


def test_string_overrides_apply_before_presets_resolve():
    s = wss.load_scenario(
        SCENARIOS / "fc_mnist.yaml",
        [
            "hardware.wafers=16",
            "hardware.swarmx.hop_latency_s=2.5e-6",
            "hardware.memoryx.preset=memoryx-4tb",
            "training.optimizer=adamw",
            "name=renamed",
        ],
    )
    assert s.name == "renamed"
    assert s.hardware.wafers == 16
    assert s.hardware.swarmx.hop_latency_s == 2.5e-6
    assert s.hardware.swarmx.fan_out == 4  # the rest of the part preset survives
    assert s.hardware.memoryx.name == "memoryx-4tb"
    assert s.hardware.memoryx.shards == load_part_preset("memoryx", "memoryx-4tb")["shards"]
    assert s.training.optimizer == "adamw"
    assert s.training.global_batch == 256  # from the file


def test_dict_overrides_match_string_overrides():
    as_strings = wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["hardware.wafers=8", "workload.sparsity=0.5"])
    as_dict = wss.load_scenario(SCENARIOS / "fc_mnist.yaml", {"hardware.wafers": 8, "workload.sparsity": 0.5})
    assert as_strings == as_dict
    assert as_dict.hardware.wafers == 8 and as_dict.workload.sparsity == 0.5


def test_override_with_a_list_index_path():
    raw = scenario_dict(model=dense_model(64, 128, 32))
    s = wss.load_scenario(
        raw, ["workload.model.layers.1.sparsity=0.75", "workload.model.layers.0.activation=gelu"]
    )
    assert s.workload.model.layers[1].sparsity == 0.75
    assert s.workload.model.layers[0].sparsity is None
    assert s.workload.model.layers[0].activation == "gelu"
    # negative indices count from the end
    s = wss.load_scenario(raw, {"workload.model.layers.-1.sparsity": 0.5})
    assert s.workload.model.layers[1].sparsity == 0.5


def test_override_list_index_out_of_range_is_a_scenario_error():
    raw = scenario_dict(model=dense_model(64, 128, 32))
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(raw, ["workload.model.layers.5.sparsity=0.5"])
    assert "workload.model.layers" in str(info.value)
    assert "out of range" in str(info.value)


def test_override_replaces_model_by_a_preset_name():
    s = wss.load_scenario(SCENARIOS / "bert_large.yaml", ["workload.model=gpt3-125m"])
    assert s.workload.model.name == "gpt3-125m"
    assert s.workload.model == wss.load_scenario(scenario_dict(model="gpt3-125m")).workload.model


def test_override_of_a_field_inside_a_model_preset():
    s = wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["workload.model.name=renamed-mnist"])
    assert s.workload.model.name == "renamed-mnist"
    assert len(s.workload.model.layers) == 3


def test_override_with_a_list_index_inside_a_model_preset():
    s = wss.load_scenario(SCENARIOS / "fc_mnist.yaml", ["workload.model.layers.2.sparsity=0.5"])
    assert s.workload.model.layers[2].sparsity == 0.5
    assert s.workload.model.layers[0].in_features == 784


@pytest.mark.parametrize(
    "hardware, key, value, get",
    [
        ("cs2-cluster", "hardware.wafers", 4, lambda s: s.hardware.wafers),
        (
            {"preset": "cs2-cluster", "memoryx": "memoryx-4tb"},
            "hardware.memoryx.shards",
            1,
            lambda s: s.hardware.memoryx.shards,
        ),
    ],
    ids=["cluster-name", "part-name"],
)
def test_override_inside_a_hardware_preset_given_by_name(hardware, key, value, get):
    raw = scenario_dict(global_batch=8)
    raw["hardware"] = hardware
    assert wss.load_scenario(raw) is not None  # the bare name alone loads
    assert get(wss.load_scenario(raw, {key: value})) == value


def test_overrides_do_not_mutate_the_source_mapping():
    raw = scenario_dict(wafers=2, global_batch=4)
    snapshot = repr(raw)
    wss.load_scenario(raw, ["hardware.wafers=4", "hardware.wafer.clock_Hz=1e9"])
    assert repr(raw) == snapshot


@pytest.mark.parametrize("bad", ["hardware.wafers", "=4", ""])
def test_malformed_override_string_is_a_scenario_error(bad):
    with pytest.raises(ScenarioError, match="dotted.key=value"):
        wss.load_scenario(scenario_dict(), [bad])


# ---------------------------------------------------------------------------- YAML


def test_yaml_exponent_without_dot_reads_as_float(tmp_path):
    path = write(
        tmp_path,
        """
        hardware:
          preset: cs2-cluster
          memoryx: {flash_read_bandwidth_Bps: 4e10, dram_bandwidth_Bps: 3E11}
          swarmx: {hop_latency_s: 5e-7}
        workload: {model: fc-mnist}
        training: {global_batch: 4}
        """,
    )
    s = wss.load_scenario(path)
    assert s.hardware.memoryx.flash_read_bandwidth_Bps == 4e10
    assert isinstance(s.hardware.memoryx.flash_read_bandwidth_Bps, float)
    assert s.hardware.memoryx.dram_bandwidth_Bps == 3e11
    assert s.hardware.swarmx.hop_latency_s == 5e-7


def test_override_value_4e10_reads_as_float():
    s = wss.load_scenario(scenario_dict(), ["hardware.memoryx.network_bandwidth_Bps=4e10"])
    assert s.hardware.memoryx.network_bandwidth_Bps == 4e10


def test_shipped_scenarios_all_load():
    paths = sorted(SCENARIOS.glob("*.yaml"))
    assert len(paths) >= 8
    for path in paths:
        s = wss.load_scenario(path)
        assert s.name and s.hardware.wafers >= 1


# ---------------------------------------------------------------------------- errors


BAD_FILES = {
    # id: (yaml text, dotted path expected in the message or None, line, words expected in the message)
    "malformed": (
        """
        name: x
        hardware:
          preset: cs2-cluster
           wafers: 4
        workload:
          model: fc-mnist
        """,
        None,
        4,
        "malformed YAML",
    ),
    "unknown-key": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          wafers: 4
        workload:
          model: fc-mnist
        training:
          global_batch: 256
          optimiser: sgd
        """,
        "training.optimiser",
        9,
        "unknown field",
    ),
    "wrong-type": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          wafers: four
        workload:
          model: fc-mnist
        training:
          global_batch: 256
        """,
        "hardware.wafers",
        4,
        "integer",
    ),
    "negative-bandwidth": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          wafers: 4
          swarmx:
            fan_out: 4
            link_bandwidth_Bps: -1.5e11
        workload:
          model: fc-mnist
        training:
          global_batch: 256
        """,
        "hardware.swarmx.link_bandwidth_Bps",
        7,
        "must be at least 1,000, got -150000000000.0",
    ),
    "unknown-part-preset": (
        """
        name: x
        hardware:
          preset: cs2-cluster
          wafers: 4
          memoryx:
            preset: memoryx-99tb
        workload:
          model: fc-mnist
        training:
          global_batch: 256
        """,
        "hardware.memoryx.preset",
        6,
        "memoryx-99tb",
    ),
    "unknown-cluster-preset": (
        """
        name: x
        hardware:
          preset: cs9-cluster
        workload:
          model: fc-mnist
        training:
          global_batch: 256
        """,
        "hardware.preset",
        3,
        "cs9-cluster",
    ),
    "unknown-model-preset": (
        """
        name: x
        hardware:
          preset: cs2-cluster
        workload:
          model: gpt4-1t
        training:
          global_batch: 4
        """,
        "workload.model",
        5,
        "gpt4-1t",
    ),
    "wrong-type-in-layer-list": (
        """
        hardware: {preset: cs2-cluster}
        workload:
          model:
            input: features
            layers:
              - {kind: dense, in_features: 64, out_features: 64}
              - kind: dense
                in_features: lots
                out_features: 64
        training: {global_batch: 4}
        """,
        "workload.model.layers.1.in_features",
        8,
        "integer",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_bad_file_raises_scenario_error_naming_file_field_and_line(tmp_path, case):
    text, field, line, words = BAD_FILES[case]
    path = write(tmp_path, text, f"{case}.yaml")
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    err = info.value
    message = str(err)
    assert message.startswith(str(path))
    assert err.source == str(path)
    assert f"(line {line})" in message
    assert words in message
    if field is not None:
        assert f"{field} (line {line})" in message
        assert [p.path for p in err.problems] == [field]
    assert len(message.splitlines()) == 1  # one problem, one line
    assert "Traceback" not in message


def test_several_problems_are_reported_together(tmp_path):
    path = write(
        tmp_path,
        """
        hardware:
          preset: cs2-cluster
          wafers: 0
          swarmx: {hop_latency_s: -1}
        workload: {model: fc-mnist}
        training: {global_batch: 4, colour: red}
        """,
    )
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    paths = {p.path for p in info.value.problems}
    assert paths == {"hardware.wafers", "hardware.swarmx.hop_latency_s", "training.colour"}
    lines = {p.path: p.line for p in info.value.problems}
    assert lines == {"hardware.wafers": 3, "hardware.swarmx.hop_latency_s": 4, "training.colour": 6}


def test_missing_file_is_a_scenario_error(tmp_path):
    with pytest.raises(ScenarioError, match="no such file"):
        wss.load_scenario(tmp_path / "nope.yaml")


def test_dict_errors_name_the_dotted_path():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(hardware={"memoryx": {"dram_bandwidth_Bps": -4.0}}))
    assert info.value.source == "<dict>"
    assert [p.path for p in info.value.problems] == ["hardware.memoryx.dram_bandwidth_Bps"]


def test_cross_check_batch_smaller_than_wafers():
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(scenario_dict(wafers=8, global_batch=4))
    assert [p.path for p in info.value.problems] == ["training.global_batch"]


def test_token_model_needs_a_seq_len():
    model = {"input": "tokens", "layers": [{"kind": "dense", "in_features": 8, "out_features": 8}]}
    with pytest.raises(ScenarioError, match="training.seq_len"):
        wss.load_scenario(scenario_dict(model=model))
    assert wss.load_scenario(scenario_dict(model=model, training={"seq_len": 16})).seq_len == 16


# ---------------------------------------------------------------------------- immutability


def test_scenario_is_frozen():
    s = wss.load_scenario(scenario_dict(wafers=2))
    with pytest.raises(pydantic.ValidationError):
        s.seed = 3
    with pytest.raises(pydantic.ValidationError):
        s.hardware.wafers = 4
    with pytest.raises(pydantic.ValidationError):
        s.hardware.memoryx.shards = 1
    with pytest.raises(pydantic.ValidationError):
        s.training.global_batch = 1
    assert s.hardware.wafers == 2


def test_scenario_layers_cannot_be_mutated_in_place():
    s = wss.load_scenario(SCENARIOS / "fc_mnist.yaml")
    layers = s.workload.model.layers
    with pytest.raises((TypeError, AttributeError, pydantic.ValidationError)):
        layers.append(layers[0])  # 784 inputs after a 10-wide layer: never validated
    assert len(s.workload.model.layers) == 3


def test_scenario_round_trips_through_its_json_dump():
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml")
    again = wss.load_scenario(s.model_dump(mode="json"))
    assert again == s
    assert wss.load_scenario(s) is s


def test_error_in_an_override_does_not_blame_the_file_line():
    path = SCENARIOS / "fc_mnist.yaml"
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1) if text.strip().startswith("wafers:"))
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path, ["hardware.wafers=0"])
    message = str(info.value)
    assert "hardware.wafers" in message and "got 0" in message
    assert f"(line {line})" not in message


def test_duplicate_key_is_an_error(tmp_path):
    path = write(
        tmp_path,
        """
        hardware:
          preset: cs2-cluster
          wafers: 4
          wafers: 64
        workload: {model: fc-mnist}
        training: {global_batch: 256}
        """,
    )
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    assert "hardware.wafers" in str(info.value) or "(line 4)" in str(info.value)


@pytest.mark.parametrize(("overrides", "path", "message"), [
    ({"hardware.wafer": 4}, "hardware.wafer",
     "must be a section of fields (preset, name, core_rows, core_cols, ...), got 4"),
    ({"hardware": 4}, "hardware", "must be a section of fields (preset, wafers, wafer, memoryx, ...), got 4"),
    ({"training": [1]}, "training",
     "must be a section of fields (global_batch, seq_len, micro_batch, optimizer, ...), got a list"),
])
def test_a_value_where_a_section_belongs_is_told_in_the_users_words(overrides, path, message):
    """Not pydantic's "a valid dictionary or instance of WaferConfig": the section and the fields it takes."""
    with pytest.raises(ScenarioError) as exc:
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", overrides)
    (problem,) = exc.value.problems
    assert (problem.path, problem.message) == (path, f"{message} [from --set {path}]")
    assert "Config" not in str(exc.value)


@pytest.mark.parametrize("overrides", [{"name": "\ud800"}, {"workload.model.name": "a\udcffb"}])
def test_a_lone_surrogate_is_refused_as_text_that_cannot_be_printed(overrides, capsys):
    """YAML's "\\ud800" escape makes a string no UTF-8 output can hold: refused at load, not a crash when printed."""
    (key,) = overrides
    with pytest.raises(ScenarioError) as exc:
        wss.load_scenario(SCENARIOS / "fc_mnist.yaml", overrides)
    (problem,) = exc.value.problems
    assert problem.path == key and "is not valid Unicode text (it holds a lone surrogate)" in problem.message


def test_validate_with_a_lone_surrogate_is_one_line_and_exit_2(tmp_path, capsys):
    from wss.cli import main

    path = tmp_path / "s.yaml"
    text = (SCENARIOS / "fc_mnist.yaml").read_text(encoding="utf-8").replace("name: fc-mnist", 'name: "\\ud800"')
    path.write_text(text, encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "name (line" in captured.err and "lone surrogate" in captured.err
