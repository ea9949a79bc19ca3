"""Failures, checkpoints and goodput (faults.failures, faults.events) against closed forms.

* Under ``checkpoint_every_steps: auto`` the chosen interval maximises the expected goodput
  ``K T / E(K)``, ``E(K) = exp(lam R) (exp(lam (K T + C)) - 1) / lam``, and where ``C << M`` it agrees
  with Young's ``K T = sqrt(2 C M)`` within 5% (but not where C is a sizeable part of M).
* That expected goodput is what a Monte Carlo of exponential failures (during work, checkpoints and
  restarts alike) gives, within its sampling error.
* A checkpoint costs its bytes (weights and moments) over the slowest of storage, MemoryX's network
  ports and its memories; a scripted failure costs the steps since the last checkpoint plus a restart.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from core_helpers import deep_merge, dense_model, scenario_dict

import wss
from wss.cli import main
from wss.errors import ScenarioError


def _raw(steps: int = 1, **failures) -> dict:
    """A scenario with failures and no job costs (job: none): the checkpoint is its bytes alone, the closed
    forms' C (the job's fixed part has tests of its own, tests/core/test_job_costs.py)."""
    raw = scenario_dict(dense_model(512, 512, 512), wafers=4, global_batch=8, steps=steps, optimizer="adamw")
    return deep_merge(raw, {"faults": {"failures": failures}, "job": "none"})


def _segment(k: int, t: float, c: float, r: float, lam: float) -> float:
    return math.exp(lam * r) * math.expm1(lam * (k * t + c)) / lam


def _goodput(k: int, t: float, c: float, r: float, lam: float) -> float:
    return k * t / _segment(k, t, c, r, lam)


def _calibrated(ratio: float, young_steps: float = 2000.0, restart: float = 0.01) -> dict:
    """A scenario whose checkpoint is ``ratio`` of the cluster MTBF, whose restart is ``restart`` of it and
    whose Young interval is ``young_steps`` steps: the storage bandwidth and the MTBF are set from one plain
    run."""
    base = wss.simulate(_raw(checkpoint_every_steps=1, restart_s=0,
                             storage={"write_bandwidth_Bps": 1e3}))  # the slowest storage a scenario may give
    t, c_at_1 = base.step_time_s, base.failures.checkpoint_s * 1e3  # bytes / 1 B/s
    c = young_steps * t * math.sqrt(ratio / 2)   # sqrt(2 C M) = young_steps x T with C = ratio x M
    m = c / ratio
    return _raw(mtbf_hours_per_wafer=m * 4 / 3600, restart_s=restart * m,
                storage={"write_bandwidth_Bps": c_at_1 / c})


@pytest.mark.parametrize("ratio", [1e-4, 1e-3])
def test_auto_interval_maximises_goodput_and_agrees_with_young_daly(ratio: float):
    r = wss.simulate(_calibrated(ratio))
    f = r.failures
    assert f is not None and f.chosen_by == "auto" and r.wafer_folding.folded  # failures do not unfold
    t, c, m = r.step_time_s, f.checkpoint_s, f.cluster_mtbf_s
    assert c / m == pytest.approx(ratio, rel=1e-6)
    young = math.sqrt(2 * c * m) / t
    assert f.young_daly_steps == pytest.approx(young, rel=1e-12)
    assert abs(f.checkpoint_every_steps - young) / young < 0.05
    # The chosen interval is the best whole number of steps (brute force around it).
    k = f.checkpoint_every_steps
    best = max(range(max(1, k // 2), 2 * k), key=lambda n: _goodput(n, t, c, f.restart_s, 1 / m))
    assert k == best
    assert f.goodput == pytest.approx(_goodput(k, t, c, f.restart_s, 1 / m), rel=1e-12)
    assert f.expected_s_per_step == pytest.approx(t / f.goodput, rel=1e-12)


def test_young_daly_is_off_where_the_checkpoint_is_a_sizeable_part_of_the_mtbf():
    """The exact optimum is not Young's formula: at C = M / 10 they differ by 14%."""
    f = wss.simulate(_calibrated(0.1)).failures
    assert f is not None and f.young_daly_steps is not None
    assert abs(f.checkpoint_every_steps - f.young_daly_steps) / f.young_daly_steps > 0.10  # 14%


def _monte_carlo(k: int, t: float, c: float, r: float, lam: float, segments: int, seed: int) -> np.ndarray:
    """Wall time of each of ``segments`` independent segments: exponential failures during the work,
    the checkpoint and the restarts; a failure loses the segment so far and costs a restart."""
    rng = np.random.default_rng(seed)
    tau = k * t + c
    out = np.empty(segments)
    for i in range(segments):
        wall = 0.0
        while True:
            x = rng.exponential(1 / lam)
            if x >= tau:
                wall += tau
                break
            wall += x
            while True:  # restart, failing again meanwhile at the same rate
                y = rng.exponential(1 / lam)
                if y >= r:
                    wall += r
                    break
                wall += y
        out[i] = wall
    return out


def test_goodput_at_a_chosen_interval_matches_a_monte_carlo_of_failures():
    # Failures frequent enough that a segment fails about a third of the time, restarts long enough to fail too.
    raw = _calibrated(1e-3, young_steps=2000.0, restart=0.2)
    r = wss.simulate(raw)
    k = int(0.4 * r.failures.cluster_mtbf_s / r.step_time_s)
    raw["faults"]["failures"]["checkpoint_every_steps"] = k
    f = wss.simulate(raw).failures
    assert f is not None and f.checkpoint_every_steps == k and f.chosen_by == "scenario"
    t, c, rs, lam = r.step_time_s, f.checkpoint_s, f.restart_s, 1 / f.cluster_mtbf_s
    walls = _monte_carlo(k, t, c, rs, lam, 20000, seed=1)
    mean, err = walls.mean(), walls.std(ddof=1) / math.sqrt(len(walls))
    expected = f.expected_s_per_step * k
    assert abs(mean - expected) < 4 * err, (mean, expected, err)
    assert f.goodput == pytest.approx(k * t / expected, rel=1e-12)
    assert f.goodput < 0.8 * k * t / (k * t + c)  # failures cost far more than the checkpoints here


def test_checkpoint_writes_weights_and_moments_at_the_slowest_stage():
    slow = wss.simulate(_raw(checkpoint_every_steps=3, restart_s=0, storage={"write_bandwidth_Bps": 1e6}))
    comp = slow.memory.memoryx_components
    state = sum(comp["weights"].values()) + sum(comp["moments"].values())
    assert slow.failures.checkpoint_bytes == pytest.approx(state, rel=1e-12)
    assert slow.failures.checkpoint_s == pytest.approx(state / 1e6, rel=1e-12)
    mx = slow.scenario.hardware.memoryx
    fast = wss.simulate(_raw(checkpoint_every_steps=3, restart_s=0, storage={"write_bandwidth_Bps": 1e18}))
    net = state / (mx.shards * mx.network_bandwidth_Bps)  # the network ports now limit
    assert fast.failures.checkpoint_s == pytest.approx(net, rel=1e-12)
    assert slow.failures.goodput == pytest.approx(3 * slow.step_time_s / (3 * slow.step_time_s + state / 1e6))


def test_default_storage_is_the_preset_and_a_run_without_failures_has_no_summary():
    r = wss.simulate(_raw(mtbf_hours_per_wafer=1000, restart_s=60))
    assert r.scenario.faults.failures.storage.name == "parallel-fs"
    plain = wss.simulate(scenario_dict(dense_model(512, 512, 512), wafers=4, global_batch=8, optimizer="adamw"))
    assert plain.failures is None and "failures" not in json.loads(plain.to_json())
    assert "faults" not in json.loads(plain.to_json())["scenario"]


def test_a_scripted_failure_costs_the_steps_since_the_checkpoint_and_a_restart():
    raw = _raw(steps=6, checkpoint_every_steps=2, restart_s=5.0, storage={"write_bandwidth_Bps": 1e7})
    base = wss.simulate(raw)
    f0 = base.failures
    times = [s.time_s for s in base.steps]
    c = f0.checkpoint_s
    assert f0.run_time_s == pytest.approx(sum(times) + 3 * c, rel=1e-12)
    assert [x.kind for x in f0.timeline].count("checkpoint") == 3
    # Wafer 1 fails at the end of step 3: steps 2 and 3 (after the checkpoint of step 1) run again.
    r = wss.simulate(deep_merge(raw, {"faults": {"events": [{"at_step": 3, "wafer": 1, "kind": "fail"}]}}))
    f = r.failures
    assert f.run_time_s == pytest.approx(sum(times) + 3 * c + 5.0 + times[2] + times[3], rel=1e-12)
    restart = next(x for x in f.timeline if x.kind == "restart")
    assert (restart.step, restart.wafer, restart.lost_steps) == (3, 1, 2)
    assert [x.step for x in f.timeline if x.kind == "redo"] == [2, 3]
    assert r.step_time_s == base.step_time_s  # a failure costs time between steps, not in them
    # A failure in step 1 (before the first checkpoint) loses steps 0 and 1.
    r1 = wss.simulate(deep_merge(raw, {"faults": {"events": [{"at_step": 1, "wafer": 0}]}}))
    assert r1.failures.run_time_s == pytest.approx(sum(times) + 3 * c + 5.0 + times[0] + times[1], rel=1e-12)


def test_expected_time_to_train_adds_the_segments():
    raw = _raw(mtbf_hours_per_wafer=1e-3, checkpoint_every_steps=4, restart_s=1.0, train_steps=10,
               storage={"write_bandwidth_Bps": 1e8})
    r = wss.simulate(raw)
    f = r.failures
    t, c, lam = r.step_time_s, f.checkpoint_s, 1 / f.cluster_mtbf_s
    assert f.cluster_mtbf_s == pytest.approx(1e-3 * 3600 / 4)
    assert f.expected_time_to_train_s == pytest.approx(2 * _segment(4, t, c, 1.0, lam) + _segment(2, t, c, 1.0, lam),
                                                       rel=1e-12)
    tokens = deep_merge(raw, {"faults": {"failures": {"train_steps": None, "train_tokens": 8 * 10}}})
    assert wss.simulate(tokens).failures.train_steps == 10  # 8 samples of one token per step


@pytest.mark.parametrize(
    ("faults", "path", "words"),
    [
        ({"failures": {"mtbf_hours_per_wafer": -5, "restart_s": 60}}, "faults.failures.mtbf_hours_per_wafer",
         "must be more than 0"),
        ({"failures": {"mtbf_hours_per_wafer": ".inf", "restart_s": 60}}, "faults.failures.mtbf_hours_per_wafer",
         "finite"),
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": -1}}, "faults.failures.restart_s", "0"),
        ({"failures": {"checkpoint_every_steps": 0, "restart_s": 1}}, "faults.failures.checkpoint_every_steps", ""),
        ({"failures": {"restart_s": 1}}, "faults.failures.checkpoint_every_steps",
         "set faults.failures.mtbf_hours_per_wafer"),
        ({"failures": {"mtbf_hours_per_wafer": 5}}, "faults.failures.restart_s", ""),
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": 1, "storage": "tape"}},
         "faults.failures.storage", "unknown storage preset 'tape'"),
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": 1, "train_steps": 5, "train_tokens": 5}},
         "faults.failures.train_tokens", "not both"),
        ({"events": [{"at_step": 0, "wafer": 1}]}, "faults.events", "need faults.failures"),
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": 1}, "events": [{"at_step": 0, "wafer": 4}]},
         "faults.events.0.wafer", "wafer 4 is out of range"),
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": 1}, "events": [{"at_step": 2, "wafer": 0}]},
         "faults.events.0.at_step", "step 2 is out of range: training.steps is 2"),
        # two wafers failing at the end of the same step: the first stops the job, the second costs nothing more
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": 1},
          "events": [{"at_step": 1, "wafer": 0}, {"at_step": 1, "wafer": 1}]},
         "faults.events.1.at_step", "event 0 already fails the job at the end of step 1"),
        ({"failures": {"mtbf_hours_per_wafer": 5, "restart_s": 1}, "events": [{"at_step": 0, "wafer": 0,
                                                                               "kind": "melt"}]},
         "faults.events.0.kind", ""),
    ],
)
def test_bad_failure_settings_are_clear_errors(faults: dict, path: str, words: str, tmp_path: Path, capsys):
    raw = deep_merge(scenario_dict(dense_model(256, 256), wafers=4, global_batch=8, steps=2), {"faults": faults})
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(raw).replace('".inf"', ".inf"))
    with pytest.raises(ScenarioError) as err:
        wss.load_scenario(file)
    assert path in str(err.value) and words in str(err.value)
    assert main(["validate", str(file)]) == 2
    out = capsys.readouterr().err
    assert path in out and "Traceback" not in out


def test_failures_that_never_let_a_segment_finish_are_infeasible():
    with pytest.raises(ScenarioError, match="practically never finish"):
        wss.simulate(_raw(mtbf_hours_per_wafer=1e-9, checkpoint_every_steps=100, restart_s=100))


def test_simulate_prints_goodput_and_the_failure_and_writes_them(tmp_path: Path, capsys):
    raw = _raw(steps=4, mtbf_hours_per_wafer=2000, checkpoint_every_steps=2, restart_s=5.0, train_steps=1000)
    raw = deep_merge(raw, {"faults": {"events": [{"at_step": 2, "wafer": 3}]}})
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(raw))
    assert main(["simulate", str(file), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "goodput" in out and "checkpoint every 2 steps (faults.failures.checkpoint_every_steps" in out
    assert "to train 1,000 steps" in out
    assert "failure      wafer 3 at the end of step 2: restart 5 s, 1 step run again" in out
    saved = wss.Result.load(tmp_path / "out" / "result.json")
    assert saved.failures is not None and saved.failures.timeline[-1].kind == "checkpoint"
    assert saved.to_json() == wss.simulate(raw).to_json()  # deterministic, and it reads back as written


def test_failures_given_by_an_override_get_the_default_storage_and_a_storage_preset_by_name():
    raw = scenario_dict(dense_model(256, 256), wafers=4, global_batch=8)
    s = wss.load_scenario(raw, ["faults.failures={mtbf_hours_per_wafer: 100, restart_s: 60}"])
    assert s.faults.failures.storage.name == "parallel-fs"
    s = wss.load_scenario(raw, ["faults.failures={mtbf_hours_per_wafer: 100, restart_s: 60, storage: parallel-fs}",
                                "faults.failures.storage.write_bandwidth_Bps=5e9"])
    assert s.faults.failures.storage.write_bandwidth_Bps == 5e9


def test_failures_leave_the_wafers_folded_and_out_of_the_reason_to_unfold():
    raw = _raw(mtbf_hours_per_wafer=1000, restart_s=60)
    assert wss.simulate(raw).wafer_folding.folded
    raw["faults"]["stragglers"] = [{"wafer": 1, "slowdown": 1.2}]
    assert wss.simulate(raw).wafer_folding.reason == "auto: faults (wafer 1 1.2x slower)"
    assert wss.load_scenario(raw).faults.describe() == "wafer 1 1.2x slower, wafer MTBF 1000 h"
