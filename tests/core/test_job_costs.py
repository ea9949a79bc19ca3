"""The job around the steps (``job``, configs/job): compile, micro-batch search, programming, weight
initialisation, input priming and checkpoints, and the one time-to-train function that counts them.

* the presets load, each figure labelled with its source (a row read off, or an ASSUMPTION), and a scenario's
  default is its system's preset; a scenario without ``job`` keeps its serialisation (and so its hash);
* the costs counted follow the scenario: the micro-batch search only with ``micro_batch: auto``, the priming of
  its input kind, only the costs asked for;
* :func:`time_to_train` is start-up + steps + ceil(steps / K) checkpoints without failures, and Daly's
  segments with them; the Result's ``failures`` (goodput, expected time to train) come from it.
"""

from __future__ import annotations

import json
import math
import re

import pytest
import yaml
from core_helpers import REPO, deep_merge, dense_model, scenario_dict

import wss
from wss.errors import ScenarioError
from wss.model.result.goodput import JobCosts, job_costs, segment_seconds, time_to_train
from wss.model.scenario.job import JOB_COSTS, JobConfig, default_job_preset
from wss.model.scenario.loader import checkpoint_storage, job_of
from wss.model.scenario.presets import list_presets, load_part_preset

JOB_DIR = REPO / "configs" / "job"


def test_the_shipped_presets_load_and_each_figure_names_its_source():
    assert {"cs2", "cs3", "none"} <= set(list_presets()["job"])
    for name in ("cs2", "cs3"):
        job = JobConfig.model_validate(load_part_preset("job", name))
        assert job.compile_s > 0 and job.programming_s > 0 and job.checkpoint_every_steps is not None
        assert job.input_priming_s.image > job.input_priming_s.tokens == 0.0
        for line in (JOB_DIR / f"{name}.yaml").read_text().splitlines():
            if re.match(r"^\s*\w+:\s*[0-9]", line):  # a figure: its source beside it
                assert "READ OFF" in line or "ASSUMPTION" in line, line
    # the logs' CS-3 programs and initialises differently from the CS-2 (R2.5 vs R2.3/R2.4)
    cs2, cs3 = (JobConfig.model_validate(load_part_preset("job", n)) for n in ("cs2", "cs3"))
    assert (cs2.programming_s, cs2.weight_init_s) == (141, 180) and (cs3.programming_s, cs3.weight_init_s) == (222, 13)
    assert JobConfig.model_validate(load_part_preset("job", "none")).is_none


def test_the_default_is_the_systems_preset_and_a_scenario_without_a_job_keeps_its_serialisation():
    assert default_job_preset("wse2") == "cs2" and default_job_preset("wse3") == "cs3"
    assert default_job_preset("my-wafer") == "none" and default_job_preset("wse3", "R9.9") == "cs3"
    s = wss.load_scenario(REPO / "scenarios" / "cs3_gpt3_13b.yaml")
    assert s.job is None and "job" not in s.model_dump()
    assert job_of(s).name == "cs3" and checkpoint_storage(s).name == "parallel-fs"
    cs2 = wss.load_scenario(scenario_dict())
    assert job_of(cs2).name == "cs2"


def test_a_job_is_a_preset_or_fields_over_the_systems_preset():
    raw = scenario_dict()
    assert wss.load_scenario(raw, ["job=none"]).job.is_none
    over = wss.load_scenario(raw, ["job.compile_s=5"]).job
    assert over.name == "cs2" and over.compile_s == 5 and over.programming_s == 141
    in_file = wss.load_scenario(deep_merge(raw, {"job": {"weight_init_s": 1}})).job
    assert in_file.name == "cs2" and in_file.weight_init_s == 1 and in_file.compile_s == 720
    assert wss.load_scenario(deep_merge(raw, {"job": {"preset": "cs3"}})).job.programming_s == 222
    again = wss.load_scenario(wss.load_scenario(raw, ["job.compile_s=5"]), ["hardware.wafers=1"])
    assert again.job.compile_s == 5
    with pytest.raises(ScenarioError, match="unknown job preset"):
        wss.load_scenario(raw, ["job=cs9"])
    with pytest.raises(ScenarioError, match="job.compile_s"):
        wss.load_scenario(raw, ["job.compile_s=-1"])


def test_a_scenario_with_failures_gets_its_systems_job():
    raw = deep_merge(scenario_dict(), {"faults": {"failures": {"checkpoint_every_steps": 10, "restart_s": 60}}})
    s = wss.load_scenario(raw)
    assert s.job is not None and s.job.name == "cs2" and json.loads(s.model_dump_json())["job"]["name"] == "cs2"


def _job(**over) -> JobConfig:
    return JobConfig.model_validate({**load_part_preset("job", "cs2"), "name": "cs2", **over})


def test_the_costs_counted_follow_the_scenario():
    auto = wss.load_scenario(scenario_dict())
    fixed = wss.load_scenario(scenario_dict(), ["training.micro_batch=1"])
    job = _job()
    assert job_costs(auto, job, 0.0).once_s["compile"] == job.compile_s + job.micro_batch_search_s
    assert job_costs(fixed, job, 0.0).once_s["compile"] == job.compile_s  # no search with a micro-batch given
    case = yaml.safe_load((REPO / "scenarios" / "validation" / "measured_m12_vit_b16_cs3.yaml").read_text())
    vit = wss.load_scenario(case["scenario"])
    assert job_costs(auto, job, 0.0).once_s["input_priming"] == 0.0  # features
    assert job_costs(vit, job, 0.0).once_s["input_priming"] == job.input_priming_s.image
    some = job_costs(auto, job, 7.0, ("programming", "checkpoints"))
    assert some.once_s == {"programming": job.programming_s} and some.checkpoint_s == job.checkpoint_s + 7.0
    assert some.counted == ("programming", "checkpoints") and some.every == job.checkpoint_every_steps
    none = job_costs(auto, job, 7.0, ())
    assert none.once_s == {} and none.every is None and none.checkpoint_s == 0.0
    with pytest.raises(ValueError, match="unknown job costs"):
        job_costs(auto, job, 0.0, ("coffee",))
    assert set(JOB_COSTS) == {"compile", "programming", "weight_init", "input_priming", "checkpoints"}


def test_time_to_train_is_startup_steps_and_checkpoints_and_daly_segments_under_failures():
    costs = JobCosts(name="x", once_s={"compile": 100.0, "programming": 20.0}, checkpoint_s=30.0, every=10,
                     counted=("compile", "programming", "checkpoints"))
    t = time_to_train(25, 2.0, costs)
    assert t.total_s == pytest.approx(120 + 25 * 2 + 3 * 30)  # checkpoints after steps 10, 20 and the last
    assert (t.steps_s, t.checkpoints, t.checkpoints_s, t.failures_s) == (50.0, 3, 90.0, 0.0)
    rate, restart = 1e-3, 40.0
    f = time_to_train(25, 2.0, costs, rate, restart)
    daly = 2 * segment_seconds(10, 2.0, 30.0, restart, rate) + segment_seconds(5, 2.0, 30.0, restart, rate)
    assert f.total_s == pytest.approx(120 + daly, rel=1e-12) and f.failures_s > 0
    bare = JobCosts(name="none", once_s={}, checkpoint_s=0.0, every=None, counted=())
    assert time_to_train(25, 2.0, bare).total_s == 50.0
    with pytest.raises(ValueError, match="interval"):
        time_to_train(25, 2.0, bare, rate, restart)


def test_goodput_and_the_expected_time_to_train_count_the_job():
    failures = {"checkpoint_every_steps": 3, "restart_s": 0, "train_steps": 100,
                "storage": {"write_bandwidth_Bps": 1e6}}
    raw = deep_merge(scenario_dict(dense_model(512, 512, 512), wafers=4, global_batch=8, optimizer="adamw"),
                     {"faults": {"failures": failures}})
    bare = wss.simulate(deep_merge(raw, {"job": "none"})).failures
    r = wss.simulate(raw)
    f, t = r.failures, r.step_time_s
    job = r.scenario.job
    assert f.job == "cs2" and f.checkpoint_fixed_s == job.checkpoint_s
    assert f.checkpoint_s == pytest.approx(bare.checkpoint_s + job.checkpoint_s, rel=1e-12)
    assert f.goodput == pytest.approx(3 * t / (3 * t + f.checkpoint_s), rel=1e-12)
    assert f.goodput < bare.goodput
    startup = job.compile_s + job.micro_batch_search_s + job.programming_s + job.weight_init_s
    assert sum(f.startup_s.values()) == startup
    assert f.expected_time_to_train_s == pytest.approx(startup + 100 * t + math.ceil(100 / 3) * f.checkpoint_s,
                                                       rel=1e-12)
    assert bare.expected_time_to_train_s == pytest.approx(100 * t + 34 * bare.checkpoint_s, rel=1e-12)


def test_the_summary_shows_the_jobs_start_up():
    from wss.views.summary import format_result

    raw = deep_merge(scenario_dict(), {"faults": {"failures": {"checkpoint_every_steps": 3, "restart_s": 0,
                                                                "train_steps": 10}}})
    text = format_result(wss.simulate(raw))
    assert re.search(r"job +\d.* before the first step \(cs2\): compile 24 min", text)
    assert "of it fixed" in text
    assert "before the first step" not in format_result(wss.simulate(deep_merge(raw, {"job": "none"})))
