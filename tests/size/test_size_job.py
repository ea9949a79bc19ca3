"""``wss size`` counts the job around the steps: its days are the steps and the job's costs (compile,
programming, weight initialisation, input priming, checkpoints), it says which it counted, and
``--job-costs`` leaves them out; the recommended size meets the deadline with them counted."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import wss
from wss.cli.app import main
from wss.model.result.goodput import checkpoint_write_seconds
from wss.model.scenario.loader import checkpoint_storage, job_of

REPO = Path(__file__).resolve().parents[2]
SCENARIO = str(REPO / "scenarios" / "gpt3_175b.yaml")
SMALL = {"workload.model": "gpt3-125m", "training.global_batch": 64, "hardware.wafers": 1}
SMALL_SET = [f"--set={k}={v}" for k, v in SMALL.items()]
TOKENS = 1e9
TOKENS_PER_STEP = 64 * 2048


def _job_seconds(wafers: int) -> float:
    """The cs2 job's costs for TOKENS, by hand: compile with the search, programming, weight initialisation, no
    priming (text), and a checkpoint (its fixed part and its bytes) every 1,000 steps and after the last."""
    s = wss.load_scenario(SCENARIO, {**SMALL, "hardware.wafers": wafers})
    job = job_of(s)
    write = checkpoint_write_seconds(wss.plan(s), checkpoint_storage(s))
    steps = TOKENS / TOKENS_PER_STEP
    once = job.compile_s + job.micro_batch_search_s + job.programming_s + job.weight_init_s
    return once + math.ceil(steps / job.checkpoint_every_steps) * (job.checkpoint_s + write)


@pytest.fixture(scope="module")
def tables():
    return {c: wss.size(SCENARIO, TOKENS, max_wafers=4, overrides=SMALL, job_costs=c)
            for c in ("all", "none", "programming,checkpoints")}


def test_days_are_the_steps_and_the_jobs_costs(tables):
    full, bare = tables["all"].set_index("wafers"), tables["none"].set_index("wafers")
    assert list(full.index) == [1, 2, 4]
    for n in full.index:
        steps_s = TOKENS / full.loc[n, "tokens_per_s"]
        assert bare.loc[n, "days"] == pytest.approx(steps_s / 86400, rel=1e-12) and bare.loc[n, "job_hours"] == 0
        assert full.loc[n, "days"] * 86400 == pytest.approx(steps_s + _job_seconds(n), rel=1e-9)
        assert full.loc[n, "job_hours"] * 3600 == pytest.approx(_job_seconds(n), rel=1e-6)
        assert full.loc[n, "wafer_hours"] == pytest.approx(n * full.loc[n, "days"] * 24)
    job = tables["all"].attrs["job"]
    assert job["name"] == "cs2" and job["counted"] == ["compile", "programming", "weight_init", "input_priming",
                                                       "checkpoints"]
    some = tables["programming,checkpoints"].attrs["job"]
    assert some["counted"] == ["programming", "checkpoints"] and some["once_s"] == {"programming": 141.0}


def test_the_table_says_which_costs_it_counted(tables):
    from wss.studies.size import format_size

    text = format_size(tables["all"])
    assert ("job costs counted (cs2): compile 24 min (with the micro-batch search), programming 2.35 min, "
            "weight_init 3 min, input_priming 0 s, a checkpoint of") in text
    assert "every 1,000 steps (8 in all)" in text and "job h" in text
    assert "job costs: none counted, the steps alone" in format_size(tables["none"])
    assert "not counted: compile, weight_init, input_priming" in format_size(tables["programming,checkpoints"])


def test_the_recommended_size_meets_the_deadline_with_the_job_counted(tables):
    full = tables["all"].set_index("wafers")
    deadline = math.sqrt(full.loc[1, "days"] * full.loc[2, "days"])
    df = wss.size(SCENARIO, TOKENS, days=deadline, max_wafers=4, overrides=SMALL)
    best = df.attrs["recommended"]
    assert best == 2

    def simulated_days(n: int) -> float:
        r = wss.simulate(wss.load_scenario(SCENARIO, {**SMALL, "hardware.wafers": n}))
        return (TOKENS / r.tokens_per_s + _job_seconds(n)) / 86400

    assert simulated_days(best) <= deadline < simulated_days(best - 1)
    # the steps alone would meet a deadline the job makes the same size miss
    steps_days = TOKENS / full.loc[2, "tokens_per_s"] / 86400
    tight = (steps_days + full.loc[2, "days"]) / 2
    assert wss.size(SCENARIO, TOKENS, days=tight, max_wafers=2, overrides=SMALL, job_costs="none").attrs["recommended"]
    assert wss.size(SCENARIO, TOKENS, days=tight, max_wafers=2, overrides=SMALL).attrs["recommended"] is None


def test_the_cli_counts_the_job_and_leaves_it_out_on_request(capsys):
    assert main(["size", SCENARIO, "--tokens", "1e9", "--max-wafers", "2", "--json", *SMALL_SET,
                 "--job-costs", "none"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["job"]["counted"] == [] and all(r["job_hours"] == 0 for r in out["rows"])
    assert main(["size", SCENARIO, "--tokens", "1e9", "--max-wafers", "2", *SMALL_SET]) == 0
    assert "job costs counted (cs2)" in capsys.readouterr().out
    assert main(["size", SCENARIO, "--tokens", "1e9", "--max-wafers", "2", *SMALL_SET, "--job-costs", "coffee"]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "unknown job cost 'coffee'" in err


def test_a_job_that_costs_nothing_adds_no_hours_at_any_rate():
    """The job's hours come from the same steps' seconds as the days: with no job costs they are exactly 0 at
    every rate (as a difference of two roundings of the steps' time they were not, at about a rate in four)."""
    import pandas as pd

    from wss.model.result.goodput import JobCosts
    from wss.studies.size import _add_columns

    rates = [1e5 + 9_973.0 * i for i in range(400)]
    df = pd.DataFrame({"wafers": [1] * len(rates), "status": ["ok"] * len(rates), "tokens_per_s": rates,
                       "energy_per_token_J": [1.0] * len(rates)})
    _add_columns(df, TOKENS, None, TOKENS_PER_STEP, JobCosts("none", {}, 0.0, None, ()))
    assert (df["job_hours"] == 0.0).all()
    assert list(df["days"] * 86400) == pytest.approx([TOKENS / r for r in rates], rel=1e-12)
