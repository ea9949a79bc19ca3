"""Wafers cut off by a SwarmX node that is down (``faults.nodes``) in the energy and the failure model.

A cut-off wafer trains on nothing: its system stays powered and idle (it draws ``power_idle_W``), and the
SwarmX nodes with no wafer below them that trains idle too.  It is not in the job, so its failures stop
nothing: the job fails at ``(N - k) / MTBF_wafer``.  Closed forms, ``k`` of ``N`` wafers cut off.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from core_helpers import assert_clear_scenario_error, deep_merge, ideal_hardware, scenario_dict

import wss
from wss.model.result.energy import live_nodes_per_level
from wss.model.result.goodput import goodput

N = 16
WAFER_W, WAFER_IDLE_W = 20_000.0, 5_000.0
SWARMX_W, SWARMX_IDLE_W = 1_000.0, 300.0

_MODEL = {"name": "tiny-gpt", "input": "tokens", "seq_len": 512, "layers": [
    {"kind": "embedding", "name": "embed", "vocab_size": 512, "d_model": 512, "max_positions": 512},
    {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": 512, "n_heads": 8, "d_ff": 2048},
    {"kind": "output_head", "name": "head", "d_model": 512, "vocab_size": 512, "tied": True},
]}


def _raw(global_batch: int = 96, *nodes: str, idle: bool = True, **faults: object) -> dict:
    hw = ideal_hardware(swarmx={"link_bandwidth_Bps": 2e10, "hop_latency_s": 1e-6})
    hw = deep_merge(hw, {"wafer": {"power_busy_W": WAFER_W}, "swarmx": {"power_busy_W": SWARMX_W}})
    if idle:
        hw = deep_merge(hw, {"wafer": {"power_idle_W": WAFER_IDLE_W}, "swarmx": {"power_idle_W": SWARMX_IDLE_W}})
    raw = scenario_dict(_MODEL, wafers=N, global_batch=global_batch, steps=2, hardware=hw,
                        training={"micro_batch": 2})
    return deep_merge(raw, {"faults": {"nodes": [{"node": n} for n in nodes], **faults}})


@pytest.mark.parametrize(("nodes", "k"), [(("swarmx.l2.n1",), 4), (("swarmx.l2.n0", "swarmx.l2.n3"), 8)])
def test_cut_off_wafers_draw_idle_power_and_compute_nothing(nodes: tuple[str, ...], k: int):
    r = wss.simulate(_raw(96, *nodes))
    assert r.energy is not None and r.wafers is not None
    t = r.step_time_s
    trained = [w for w in r.wafers if w.samples]
    assert len(trained) == N - k and len({w.compute_s for w in trained}) == 1
    u = trained[0].compute_s / t
    assert 0.05 < u < 0.95  # the busy and idle figures both matter
    draw = u * WAFER_W + (1 - u) * WAFER_IDLE_W
    assert r.energy.by_part_J["wafer"] == pytest.approx(((N - k) * draw + k * WAFER_IDLE_W) * t, rel=1e-12)
    assert r.energy.busy_fraction["wafer"] == pytest.approx((N - k) / N * u, rel=1e-12)


def test_swarmx_nodes_with_every_wafer_below_cut_off_idle():
    """16 wafers, fan-out 4: a root and four level-2 nodes; with swarmx.l2.n1 down, three of them carry."""
    raw = _raw(96, "swarmx.l2.n1")
    assert live_nodes_per_level(wss.load_scenario(raw)) == [1, 3]
    assert live_nodes_per_level(wss.load_scenario(_raw(96))) == [1, 4]
    r = wss.simulate(raw)
    assert r.energy is not None
    u1 = max(r.utilisation["swarmx.down.l1"], r.utilisation["swarmx.up.l1"])
    u2 = max(r.utilisation["swarmx.down.l2"], r.utilisation["swarmx.up.l2"])
    assert 0 < u2 < 1

    def draw(u: float) -> float:
        return u * SWARMX_W + (1 - u) * SWARMX_IDLE_W

    expected = (draw(u1) + 3 * draw(u2) + SWARMX_IDLE_W) * r.step_time_s
    assert r.energy.by_part_J["swarmx"] == pytest.approx(expected, rel=1e-12)
    assert r.energy.busy_fraction["swarmx"] == pytest.approx((u1 + 3 * u2) / 5, rel=1e-12)


def test_without_an_idle_figure_a_cut_off_system_draws_its_one_figure():
    """The shipped presets give no idle power: every system draws its one figure, cut off or not."""
    r = wss.simulate(_raw(96, "swarmx.l2.n1", idle=False))
    assert r.energy is not None
    assert r.energy.by_part_J["wafer"] == pytest.approx(N * WAFER_W * r.step_time_s, rel=1e-12)


def test_the_job_fails_at_the_rate_of_the_wafers_that_train():
    mtbf_h, restart = 2000.0, 300.0
    failures = {"mtbf_hours_per_wafer": mtbf_h, "restart_s": restart, "checkpoint_every_steps": 50,
                "storage": {"write_bandwidth_Bps": 1e10}}
    for nodes, k in (((), 0), (("swarmx.l2.n1",), 4), (("swarmx.l2.n0", "swarmx.l2.n3"), 8)):
        r = wss.simulate(_raw(96, *nodes, failures=failures))
        f = r.failures
        assert f is not None
        assert f.cluster_mtbf_s == pytest.approx(mtbf_h * 3600 / (N - k), rel=1e-15)
        rate = (N - k) / (mtbf_h * 3600)
        assert f.goodput == pytest.approx(goodput(50, r.step_time_s, f.checkpoint_s, restart, rate), rel=1e-12)
        assert f.young_daly_steps == pytest.approx(math.sqrt(2 * f.checkpoint_s / rate) / r.step_time_s, rel=1e-12)


def test_a_scripted_failure_of_a_cut_off_wafer_is_a_clear_error(tmp_path: Path, capsys):
    failures = {"restart_s": 60.0, "checkpoint_every_steps": 1}
    raw = _raw(96, "swarmx.l2.n1", failures=failures, events=[{"at_step": 0, "wafer": 5}])
    assert_clear_scenario_error(raw, "faults.events.0.wafer",
                                "wafer 5 is cut off by a SwarmX node that is down (faults.nodes)", tmp_path, capsys)
    wss.load_scenario(_raw(96, "swarmx.l2.n1", failures=failures, events=[{"at_step": 0, "wafer": 8}]))  # trains
