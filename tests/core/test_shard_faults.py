"""A slow MemoryX shard (``faults.shards``), checked against its closed form; bad specifications.

Every shard holds an even slice of every kernel, so each chunk of the stream waits for the slowest
shard's slice: with one shard at factor ``f`` of a rate, MemoryX goes at ``shards x f x`` that rate.
On a step bound by that rate (everything else all but free), the step takes ``1 / f`` as long; a
shard faster than the others changes nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from core_helpers import assert_clear_scenario_error, deep_merge, dense_model, ideal_hardware, scenario_dict

import wss
from wss.cli import main
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.result.goodput import checkpoint_seconds


def _bound_by(rate: str, value: float) -> dict:
    """Two wafers, a compute all but free, MemoryX's ``rate`` the only slow stage."""
    hw = ideal_hardware(wafer={"clock_Hz": 1e11}, memoryx={rate: value})
    return scenario_dict(dense_model(2048, 2048, 2048), wafers=2, global_batch=8, steps=2, hardware=hw)


def _with_shards(raw: dict, *faults: dict) -> dict:
    return deep_merge(raw, {"faults": {"shards": list(faults)}})


@pytest.mark.parametrize(("rate", "value", "factor"), [("network_bandwidth_Bps", 1e9, "network_factor"),
                                                       ("dram_bandwidth_Bps", 1e9, "dram_factor")])
def test_a_slow_shard_slows_a_stream_it_bounds_by_its_factor(rate: str, value: float, factor: str):
    raw = _bound_by(rate, value)
    base = wss.simulate(raw)
    compute = base.breakdown_s["compute"]
    assert compute < 1e-3 * base.step_time_s
    for f in (0.5, 0.2):
        r = wss.simulate(_with_shards(raw, {"shard": 3, factor: f}))
        assert r.wafer_folding.folded  # MemoryX is shared: no wafer is set apart
        # the stream's time scales by 1 / f exactly; the compute it does not hide is at most C
        assert abs(r.step_time_s - base.step_time_s / f) <= compute / f
        assert r.breakdown_s["compute"] == pytest.approx(compute, rel=1e-9)


def test_a_faster_shard_changes_nothing_and_factors_on_one_shard_multiply():
    raw = _bound_by("network_bandwidth_Bps", 1e9)
    base = wss.simulate(raw)
    fast = wss.simulate(_with_shards(raw, {"shard": 0, "network_factor": 2.0}))
    assert fast.step_time_s == base.step_time_s
    twice = wss.load_scenario(_with_shards(raw, {"shard": 1, "network_factor": 0.5},
                                           {"shard": 1, "network_factor": 0.5, "dram_factor": 0.8},
                                           {"shard": 2, "network_factor": 0.3}))
    assert twice.faults.shard_factors()[1] == {"dram": 0.8, "flash": 1.0, "network": 0.25, "optimizer": 1.0}
    assert twice.faults.slowest_shard() == {"dram": 0.8, "flash": 1.0, "network": 0.25, "optimizer": 1.0}
    rates, nominal = memoryx_rates(twice), memoryx_rates(wss.load_scenario(raw))
    mx = twice.hardware.memoryx
    assert rates.network_Bps == mx.shards * mx.network_bandwidth_Bps * 0.25 == 0.25 * nominal.network_Bps
    assert rates.dram_Bps == 0.8 * nominal.dram_Bps and rates.optimizer_flops == nominal.optimizer_flops
    assert "MemoryX shard 1 at dram 0.8x, network 0.25x" in twice.faults.describe()


def test_a_slow_shard_slows_the_checkpoint_and_the_estimate_knows_it():
    """The checkpoint copy goes through the slowest shard's network ports; the closed-form estimate uses the
    same rates as the simulation."""
    raw = deep_merge(_bound_by("network_bandwidth_Bps", 1e9),
                     {"faults": {"failures": {"mtbf_hours_per_wafer": 1000, "restart_s": 60,
                                              "storage": {"write_bandwidth_Bps": 1e18}}}})
    slow = _with_shards(raw, {"shard": 0, "network_factor": 0.25})
    c0 = checkpoint_seconds(wss.plan(raw), wss.load_scenario(raw).faults.failures)
    c1 = checkpoint_seconds(wss.plan(slow), wss.load_scenario(slow).faults.failures)
    assert c1 == pytest.approx(4 * c0, rel=1e-12)
    e0, e1 = wss.estimate(raw), wss.estimate(slow)
    assert e1.step_time_s == pytest.approx(4 * e0.step_time_s, rel=0.01)


@pytest.mark.parametrize(
    ("fault", "path", "words"),
    [
        ({"shard": 12, "dram_factor": 0.5}, "faults.shards.0.shard",
         "shard 12 is out of range: hardware.memoryx.shards is 12 (shards 0 to 11)"),
        ({"shard": 1, "flash_factor": 0}, "faults.shards.0.flash_factor", "must be at least 1e-3"),
        ({"shard": 1, "network_factor": -0.5}, "faults.shards.0.network_factor", "must be at least 1e-3"),
        ({"shard": 1}, "faults.shards.0", "changes nothing: give at least one of dram_factor"),
        ({"shard": 1, "dram_factr": 0.5}, "faults.shards.0.dram_factr", ""),
    ],
)
def test_bad_shard_faults_are_clear_errors(fault: dict, path: str, words: str, tmp_path: Path, capsys):
    raw = _with_shards(scenario_dict(dense_model(256, 256), hardware={"memoryx": {"shards": 12}}), fault)
    assert_clear_scenario_error(raw, path, words, tmp_path, capsys)


def test_validate_lists_the_shard_indexes(tmp_path: Path, capsys):
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(scenario_dict(dense_model(256, 256), hardware={"memoryx": {"shards": 12}})))
    assert main(["validate", str(file)]) == 0
    assert "MemoryX shards 0-11 (for faults.shards)" in capsys.readouterr().out
