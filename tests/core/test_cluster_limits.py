"""Published cluster limits: a scenario with more wafers than the largest published cluster of its wafer's
system (192 CS-2, 2,048 CS-3) fails validation naming hardware.wafers, the limit and its source, unless
hardware.allow_beyond_published_limits is set for a what-if study, which the summaries then say.

The limit lives in the wafer preset file, not in the scenario, and the override is serialised only when
it is set: scenarios within the limit keep their hash and their baselines."""

from __future__ import annotations

import pytest
from core_helpers import REPO, SCENARIOS, run_wss_here

import wss
from wss import ScenarioError
from wss.model.result.results import Result
from wss.model.scenario.loader import ClusterLimit, published_cluster_limit
from wss.studies.check import load_baseline, scenario_hash
from wss.views.summary import format_plan, format_result

OVERRIDE = "hardware.allow_beyond_published_limits"
CS2 = SCENARIOS / "gpt3_175b.yaml"  # 192 x wse2, global_batch 1536
CS3 = SCENARIOS / "cs3_gpt3_13b.yaml"  # 4 x wse3
FC = SCENARIOS / "fc_mnist.yaml"  # 4 x wse2, global_batch 256


def only_problem(err: ScenarioError):
    assert len(err.problems) == 1, str(err)
    return err.problems[0]


def override_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if OVERRIDE in line]


@pytest.mark.parametrize("preset, limit, source", [("wse2", 192, "IEEE Spectrum, 2021"), ("wse3", 2048, "CS-3")])
def test_the_wafer_presets_carry_their_published_limit_and_its_source(preset, limit, source):
    found = published_cluster_limit(preset)
    assert isinstance(found, ClusterLimit) and found.wafers == limit and source in found.source


def test_a_wafer_that_is_no_preset_has_no_published_limit():
    assert published_cluster_limit("my-own-wafer") is None
    s = wss.load_scenario(CS2, ["hardware.wafer.name=my-own-wafer", "hardware.wafers=1536"])
    assert s.hardware.wafers == 1536


@pytest.mark.parametrize(
    "path, wafers, batch, wafer, limit, source",
    [
        (CS2, 193, 1536, "wse2", "192", "Cerebras' Tech Trains 'Brain-Scale' AIs"),
        (CS3, 2049, 4096, "wse3", "2,048", "CS-3 product material"),
    ],
)
def test_more_wafers_than_published_is_an_error_naming_the_field_limit_and_source(
    path, wafers, batch, wafer, limit, source
):
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path, [f"hardware.wafers={wafers}", f"training.global_batch={batch}"])
    problem = only_problem(info.value)
    assert problem.path == "hardware.wafers"
    assert f"{wafers} wafers exceed the largest published {wafer} cluster, {limit} wafers" in problem.message
    assert source in problem.message and f"max_cluster_wafers of configs/wafer/{wafer}.yaml" in problem.message
    assert f"set {OVERRIDE}: true" in problem.message
    assert "[from --set hardware.wafers]" in problem.message


def test_a_file_beyond_the_limit_names_its_line(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(CS2.read_text(encoding="utf-8").replace("wafers: 192", "wafers: 200"), encoding="utf-8")
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(path)
    problem = only_problem(info.value)
    assert problem.path == "hardware.wafers" and problem.line is not None
    assert path.read_text(encoding="utf-8").splitlines()[problem.line - 1].strip() == "wafers: 200"


def test_up_to_the_limit_is_fine():
    assert wss.load_scenario(CS2).hardware.wafers == 192
    assert wss.load_scenario(CS3, ["hardware.wafers=2048", "training.global_batch=4096"]).hardware.wafers == 2048


def test_the_limit_is_not_a_scenario_field():
    with pytest.raises(ScenarioError, match="hardware.wafer.max_cluster_wafers"):
        wss.load_scenario(CS2, ["hardware.wafer.max_cluster_wafers=1000"])


def test_the_limit_holds_when_reloading_a_scenario_object_or_its_dump():
    s = wss.load_scenario(CS2)
    with pytest.raises(ScenarioError, match="largest published wse2 cluster, 192 wafers"):
        wss.load_scenario(s, {"hardware.wafers": 384})
    with pytest.raises(ScenarioError, match="largest published wse2 cluster, 192 wafers"):
        wss.load_scenario(s.model_dump(mode="json"), {"hardware.wafers": 384})
    # Choosing another wafer preset takes that wafer's limit.
    assert wss.load_scenario(s, {"hardware.wafer": "wse3", "hardware.wafers": 384}).hardware.wafers == 384


def test_the_override_allows_a_what_if_study_and_the_plan_summary_says_so():
    s = wss.load_scenario(CS2, ["hardware.wafers=384", f"{OVERRIDE}=true"])
    assert s.hardware.wafers == 384 and s.hardware.allow_beyond_published_limits
    lines = override_lines(format_plan(wss.plan(s)))
    assert len(lines) == 1 and "384 x wse2" in lines[0]


def test_the_result_summary_says_so_in_one_line_and_the_result_round_trips(tmp_path):
    r = wss.simulate(wss.load_scenario(FC, ["hardware.wafers=256", f"{OVERRIDE}=true"]))
    lines = override_lines(format_result(r))
    assert len(lines) == 1 and "256 x wse2" in lines[0]
    loaded = Result.load(r.save(tmp_path / "result.json"))
    assert loaded == r and override_lines(format_result(loaded)) == lines


def test_without_the_override_the_summaries_say_nothing_of_limits():
    s = wss.load_scenario(FC)
    assert not override_lines(format_plan(wss.plan(s)))
    assert not override_lines(format_result(wss.simulate(s)))


def test_an_unset_override_leaves_the_scenario_and_its_hash_alone():
    s = wss.load_scenario(CS2)
    dumped = s.model_dump(mode="json")
    assert "allow_beyond_published_limits" not in dumped["hardware"]
    assert "max_cluster_wafers" not in dumped["hardware"]["wafer"]
    assert scenario_hash(s) == load_baseline(REPO / "baselines" / "gpt3_175b.json").scenario_sha256
    # Set, the override is part of the scenario: serialised, hashed, and kept through a round trip.
    what_if = wss.load_scenario(CS2, [f"{OVERRIDE}=true"])
    assert what_if.model_dump(mode="json")["hardware"]["allow_beyond_published_limits"] is True
    assert scenario_hash(what_if) != scenario_hash(s)
    assert wss.load_scenario(what_if.model_dump(mode="json")) == what_if


def test_a_sweep_beyond_the_limit_reports_error_rows():
    df = wss.sweep(FC, {"hardware.wafers": [4, 256]}, executor="serial")
    assert df["status"].tolist() == ["ok", "error"]
    assert "256 wafers exceed the largest published wse2 cluster, 192 wafers" in df["error"][1]
    assert OVERRIDE in df["error"][1]


def test_the_cli_prints_one_error_line_and_exits_2(tmp_path):
    run = run_wss_here(["validate", str(CS2), "--set", "hardware.wafers=384"], cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and run.stderr.count("\n") == 1
    assert "hardware.wafers: 384 wafers exceed the largest published wse2 cluster, 192 wafers" in run.stderr
