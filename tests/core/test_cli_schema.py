"""``wss schema``: the committed editor schemas match the command, every shipped file points at one, and they validate.

The schemas are checked with ``jsonschema`` (installed with nbformat, a test dependency) the way an
editor's YAML language server uses them: every shipped scenario and validation case must pass, and
the mistakes an editor should flag (a misspelt field, an unknown preset, a hardware mapping with
neither a preset nor its parts, a number out of range) must fail.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import jsonschema
import pytest
from core_helpers import REPO, SCENARIOS

from wss.cli import main
from wss.model.scenario import Scenario
from wss.model.scenario.validation_errors import field_paths
from wss.model.scenario.yaml_io import safe_load_text
from wss.views.schema import scenario_schema, unit_of

DOCS = REPO / "docs"
SCENARIO_SCHEMA = DOCS / "scenario.schema.json"
CASE_SCHEMA = DOCS / "validation-case.schema.json"
SHIPPED = sorted(SCENARIOS.glob("*.yaml"))
CASES = sorted((SCENARIOS / "validation").glob("*.yaml"))


def _schema_line(path: Path) -> str:
    return path.read_text(encoding="utf-8").splitlines()[0]


@functools.cache
def _validator(schema_path: Path) -> jsonschema.Draft202012Validator:
    """The committed schema at ``schema_path``, checked against its meta-schema, as a validator: built once per
    file (checking the schema takes about 0.3 s, validating a scenario with it under a millisecond; a validator
    keeps no state between validations)."""
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _errors(validator: jsonschema.Draft202012Validator, data: object) -> list[str]:
    return [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)]


@pytest.mark.parametrize(("argv", "committed"), [([], SCENARIO_SCHEMA), (["--case"], CASE_SCHEMA)],
                         ids=["scenario", "case"])
def test_the_committed_schema_is_what_wss_schema_prints(argv, committed, capsys):
    assert main(["schema", *argv]) == 0
    printed = capsys.readouterr().out
    assert printed == committed.read_text(encoding="utf-8"), (
        f"{committed.relative_to(REPO)} is stale: run wss schema {' '.join(argv)} -o {committed.relative_to(REPO)}"
    )


def test_schema_out_writes_the_same_bytes(tmp_path, capsys):
    out = tmp_path / "sub" / "s.json"
    assert main(["schema", "-o", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert out.read_text(encoding="utf-8") == SCENARIO_SCHEMA.read_text(encoding="utf-8")


def test_schema_out_that_cannot_be_written_is_exit_2(tmp_path, capsys):
    (tmp_path / "afile").write_text("x")
    assert main(["schema", "-o", str(tmp_path / "afile" / "s.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "afile" in err and "Traceback" not in err


@pytest.mark.parametrize("path", SHIPPED + CASES, ids=lambda p: str(p.relative_to(SCENARIOS)))
def test_every_shipped_file_points_at_its_committed_schema(path: Path):
    line = _schema_line(path)
    prefix = "# yaml-language-server: $schema="
    assert line.startswith(prefix), f"{path}: first line must be the schema comment, got {line!r}"
    target = (path.parent / line[len(prefix):]).resolve()
    assert target == (CASE_SCHEMA if path in CASES else SCENARIO_SCHEMA)


def test_there_are_shipped_files_to_check():
    assert len(SHIPPED) >= 5 and len(CASES) >= 10


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_scenario_validates_against_the_schema(path: Path):
    data = safe_load_text(path.read_text(encoding="utf-8"), str(path))
    assert _errors(_validator(SCENARIO_SCHEMA), data) == []


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_every_validation_case_validates_against_the_case_schema(path: Path):
    data = safe_load_text(path.read_text(encoding="utf-8"), str(path))
    assert _errors(_validator(CASE_SCHEMA), data) == []


BASE = {"name": "x", "hardware": {"preset": "cs2-cluster", "wafers": 2}, "workload": {"model": "gpt3-125m"},
        "training": {"global_batch": 8}}


@pytest.mark.parametrize(("change", "where"), [
    ({"hardware": {"preset": "cs2-cluster", "wafer": {"clock_hz": 1e9}}}, "hardware"),  # misspelt (clock_Hz)
    ({"hardware": {"preset": "cs9-cluster"}}, "hardware"),
    ({"hardware": "cs9-cluster"}, "hardware"),
    ({"hardware": {"wafers": 2}}, "hardware"),  # no preset and no parts
    ({"workload": {"model": "gpt3-125M"}}, "workload.model"),
    ({"workload": {"model": {"name": "m"}}}, "workload.model"),  # no preset and no layers
    ({"training": {"global_batch": 0}}, "training.global_batch"),
    ({"training": {"global_batch": 8, "optimizer": "adamax"}}, "training.optimizer"),
    ({"training": {"global_batch": 8, "micro_batch": "some"}}, "training.micro_batch"),
    ({"workload": {"model": "gpt3-125m", "sparsity": 1.0}}, "workload.sparsity"),
    ({"trainig": {"global_batch": 8}}, ""),
])
def test_the_schema_flags_what_an_editor_should(change, where):
    data = {**BASE, **change}
    errors = _errors(_validator(SCENARIO_SCHEMA), data)
    assert errors, f"{change} passed the schema"
    assert any(e.startswith((f"{where}:", f"{where}.")) for e in errors), errors


def test_a_part_may_override_a_preset_field_alone_and_an_inline_model_needs_no_preset():
    ok = {**BASE, "hardware": {"preset": "cs2-cluster", "wafer": {"preset": "wse3", "clock_Hz": 1.1e9},
                               "memoryx": "memoryx-4tb"},
          "workload": {"model": {"input": "features", "layers": [{"kind": "dense", "in_features": 4,
                                                                  "out_features": 4}]}}}
    assert _errors(_validator(SCENARIO_SCHEMA), ok) == []


def test_presets_titles_and_units_reach_the_schema():
    schema = scenario_schema({"hardware": ["h1"], "wafer": ["w1", "w2"], "memoryx": ["m1"], "swarmx": ["s1"],
                              "runtime": ["r1"], "model": ["mod1"]})
    wafer = schema["$defs"]["WaferConfig"]["properties"]
    assert wafer["preset"]["enum"] == ["w1", "w2"]
    assert wafer["clock_Hz"]["title"] == "Clock [Hz]"
    assert wafer["io_bandwidth_Bps"]["title"] == "I/O bandwidth [bytes/s]"
    assert schema["properties"]["hardware"]["anyOf"][0]["enum"] == ["h1"]
    assert schema["$defs"]["TrainingConfig"]["properties"]["optimizer"]["enum"] == [
        "sgd", "momentum", "adam", "adamw", "lamb"]
    assert schema["$defs"]["SimulationConfig"]["properties"]["chunk_bytes"]["default"] == 64 * 2**20


@pytest.mark.parametrize(("name", "unit"), [
    ("link_bandwidth_Bps", "bytes/s"), ("hop_latency_s", "s"), ("chunk_bytes", "bytes"), ("clock_Hz", "Hz"),
    ("power_busy_W", "W"), ("samples_per_s", "samples/s"), ("partial_sum_ring_wavelets_per_cycle", "wavelets/cycle"),
    ("hop_latency_cycles", "cycles"), ("optimizer_flops", "FLOP/s"), ("global_batch", "samples"), ("seed", ""),
])
def test_units_come_from_the_field_names(name, unit):
    assert unit_of(name) == unit


def _reference_tool():
    spec = importlib.util.spec_from_file_location("gen_reference_doc", REPO / "tools" / "gen_reference_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_reference_is_generated_from_the_schema():
    text = _reference_tool().render(scenario_schema())
    assert (DOCS / "reference.md").read_text(encoding="utf-8") == text, (
        "docs/reference.md is stale: run python tools/gen_reference_doc.py"
    )


def test_the_reference_check_mode_fails_on_a_stale_page(tmp_path, monkeypatch):
    tool = _reference_tool()
    monkeypatch.setattr(tool, "DOC", tmp_path / "reference.md")
    (tmp_path / "reference.md").write_text("stale\n")
    assert tool.main(["--check"]) == 1
    assert tool.main([]) == 0 and tool.main(["--check"]) == 0


def test_every_scenario_field_is_in_the_reference_with_its_unit_and_default():
    text = (DOCS / "reference.md").read_text(encoding="utf-8")
    for path in field_paths(Scenario):
        assert f"| `{path}` |" in text, path
    row = next(line for line in text.splitlines() if line.startswith("| `hardware.swarmx.link_bandwidth_Bps` |"))
    assert "| bytes/s |" in row and "required, or from a preset" in row
    row = next(line for line in text.splitlines() if line.startswith("| `simulation.chunk_bytes` |"))
    assert "| bytes | `67108864` |" in row
    assert "| `workload.model.layers.N.d_model` |" in text and "## `workload.model.layers.N (kind: dense)`" in text
