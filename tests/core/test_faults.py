"""Faults: a straggler and a degraded SwarmX edge, checked against closed forms; bad specifications.

* A wafer ``s`` times slower on a compute-bound step: every broadcast and reduction waits for it,
  so the step lengthens by exactly its extra compute, ``(s - 1) x`` its compute.
* One edge at ``f`` of its bandwidth on a step bound by the stream over the wafers' edges (compute,
  MemoryX and the rest of the tree all but free): the lock-step tree goes at the slow edge's pace,
  so the whole step takes ``1 / f`` as long.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from core_helpers import deep_merge, dense_model, ideal_hardware, scenario_dict

import wss
from wss.cli import main
from wss.errors import ScenarioError


def _with(raw: dict, **faults) -> dict:
    return deep_merge(raw, {"faults": faults})


def test_a_straggler_lengthens_a_compute_bound_step_by_its_extra_compute():
    raw = scenario_dict(dense_model(2048, 2048, 2048), wafers=4, global_batch=256, steps=2, hardware=ideal_hardware())
    base = wss.simulate(raw)
    assert base.bound_by == "compute" and base.wafer_folding.folded
    compute = base.breakdown_s["compute"]
    for s in (1.5, 2.0):
        r = wss.simulate(_with(raw, stragglers=[{"wafer": 2, "slowdown": s}]))
        assert not r.wafer_folding.folded and r.wafer_folding.reason == f"auto: faults (wafer 2 {s:g}x slower)"
        assert r.step_time_s == pytest.approx(base.step_time_s + (s - 1) * compute, rel=1e-9)
        assert r.wafers is not None
        assert r.wafers[2].compute_s == pytest.approx(s * compute, rel=1e-9)
        assert r.wafers[0].compute_s == pytest.approx(compute, rel=1e-9)
        assert r.wafers[0].idle_s == pytest.approx(r.step_time_s - compute, rel=1e-9)
        assert r.breakdown_s["compute"] == pytest.approx(s * compute, rel=1e-9)  # the straggler stands for all


def test_a_degraded_edge_slows_a_stream_bound_step_by_its_factor():
    # The fastest clock a scenario may give: the edges take nearly all the time.  The stream's time T scales
    # by 1 / f exactly; the step is T plus the part of the wafer's compute C the stream does not hide (between
    # 0 and C), so a step at factor f lies within C / f of the base step / f (C is under 0.1% of the step).
    hw = ideal_hardware(wafer={"io_bandwidth_Bps": 1e9, "clock_Hz": 1e11})
    raw = scenario_dict(dense_model(2048, 2048, 2048), wafers=2, global_batch=8, steps=2, hardware=hw)
    base = wss.simulate(raw)
    assert base.bound_by == "stream"
    assert base.breakdown_s["compute"] < 1e-3 * base.step_time_s
    for f in (0.5, 0.25):
        r = wss.simulate(_with(raw, links=[{"edge": "swarmx.l1.1", "bandwidth_factor": f}]))
        compute = base.breakdown_s["compute"]
        assert r.breakdown_s["compute"] == pytest.approx(compute, rel=1e-9)
        assert abs(r.step_time_s - base.step_time_s / f) <= compute / f
        assert r.bound_by == "stream"
        # the wafer behind the slow edge stands for all: its waits scale too, to the same compute
        waits, base_waits = (x.breakdown_s["stream"] + x.breakdown_s["bubble"] for x in (r, base))
        assert abs(waits - base_waits / f) <= compute / f


def test_a_degraded_edge_above_a_subtree_slows_every_wafer_and_one_below_it_stands_for_all():
    """16 wafers, fan-out 4 (two levels): the root's edge to node 1 (wafers 4-7) at half rate."""
    hw = ideal_hardware(swarmx={"link_bandwidth_Bps": 1e9, "hop_latency_s": 0.0}, wafer={"clock_Hz": 1e11})
    raw = scenario_dict(dense_model(2048, 2048), wafers=16, global_batch=16, hardware=hw)
    base = wss.simulate(raw)
    r = wss.simulate(_with(raw, links=[{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]))
    assert r.step_time_s > 1.5 * base.step_time_s
    assert r.wafers is not None
    assert r.breakdown_s == r.wafers[4].breakdown_s  # the first wafer behind the slow edge
    assert r.wafers[0].breakdown_s["stream"] < r.wafers[4].breakdown_s["stream"]


@pytest.mark.parametrize(
    ("faults", "path", "words"),
    [
        ({"stragglers": [{"wafer": 4, "slowdown": 1.5}]}, "faults.stragglers.0.wafer",
         "wafer 4 is out of range: hardware.wafers is 4 (wafers 0 to 3)"),
        ({"stragglers": [{"wafer": 1, "slowdown": -1.5}]}, "faults.stragglers.0.slowdown", "must be at least 1e-3"),
        ({"links": [{"edge": "swarmx.l1.9", "bandwidth_factor": 0.5}]}, "faults.links.0.edge",
         "unknown edge 'swarmx.l1.9'; did you mean"),
        ({"links": [{"edge": "swarmx.l1.1", "bandwidth_factor": -0.5}]}, "faults.links.0.bandwidth_factor",
         "must be at least 1e-3"),
        ({"links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}], "typo": 1}, "faults.typo", ""),
    ],
)
def test_bad_faults_are_clear_errors(faults: dict, path: str, words: str, tmp_path: Path, capsys):
    raw = _with(scenario_dict(dense_model(256, 256), wafers=4, global_batch=8), **faults)
    with pytest.raises(ScenarioError) as err:
        wss.load_scenario(raw)
    assert path in str(err.value) and words in str(err.value)
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(raw))
    assert main(["validate", str(file)]) == 2
    out = capsys.readouterr().err
    assert path in out and "Traceback" not in out


def test_unknown_edge_error_lists_the_tree_edges():
    raw = _with(scenario_dict(dense_model(256, 256), wafers=16, global_batch=16),
                links=[{"edge": "swarmx.l3.0", "bandwidth_factor": 0.5}])
    with pytest.raises(ScenarioError, match=r"the edges of this tree: swarmx\.l1\.0-3, swarmx\.l2\.0-15"):
        wss.load_scenario(raw)


def test_faults_cannot_be_folded_and_leave_a_scenario_without_them_unchanged():
    raw = scenario_dict(dense_model(256, 256), wafers=4, global_batch=8)
    with pytest.raises(ScenarioError, match="simulation.fold_wafers: true cannot show faults"):
        wss.load_scenario(_with(deep_merge(raw, {"simulation": {"fold_wafers": True}}),
                                stragglers=[{"wafer": 1, "slowdown": 2}]))
    assert "faults" not in wss.load_scenario(raw).model_dump(mode="json")
    dumped = wss.load_scenario(_with(raw, stragglers=[{"wafer": 1, "slowdown": 2}])).model_dump(mode="json")
    assert dumped["faults"] == {"stragglers": [{"wafer": 1, "slowdown": 2.0}]}


def test_tree_edge_names_agree_with_the_scenario():
    """The unfolded tree's links carry the scenario's edge names (what faults.links names), one per direction."""
    import simpy

    from wss.model.components.swarmx import SwarmXSettings
    from wss.model.components.swarmx_tree import SwarmXTree

    s = wss.load_scenario(scenario_dict(dense_model(256, 256), wafers=192, global_batch=192))
    sx = s.hardware.swarmx
    settings = SwarmXSettings(levels=sx.levels(192), nodes_per_level=tuple(sx.nodes_per_level(192)),
                              link_bandwidth_Bps=1.0, leaf_bandwidth_Bps=1.0, hop_latency_s=0.0, port_buffer_bytes=1)
    tree = SwarmXTree(simpy.Environment(), settings, sx.fan_out, 192)
    for direction, edges in (("down", tree.down_edges), ("up", tree.up_edges)):
        names = [link.name for level in edges for link in level]
        assert names == [e.replace("swarmx.", f"swarmx.{direction}.", 1) for e in sx.edge_names(192)]


def test_the_result_and_the_summary_say_which_wafer_or_edge_paced_each_step():
    from wss.views.summary import format_result

    raw = scenario_dict(dense_model(2048, 2048, 2048), wafers=4, global_batch=256, steps=3, hardware=ideal_hardware())
    r = wss.simulate(_with(raw, stragglers=[{"wafer": 2, "slowdown": 1.5}]))
    assert r.step_pacers is not None and [p.part for p in r.step_pacers] == ["wafer.2"] * 3
    assert r.step_pacers[1].busy_s == pytest.approx(r.wafers[2].compute_s, rel=1e-9)
    assert "paced by (steps) wafer.2 3 of 3" in format_result(r)
    hw = ideal_hardware(wafer={"io_bandwidth_Bps": 1e9, "clock_Hz": 1e11})  # the fastest clock allowed
    raw = scenario_dict(dense_model(2048, 2048, 2048), wafers=2, global_batch=8, steps=2, hardware=hw)
    r = wss.simulate(_with(raw, links=[{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]))
    assert [p.part for p in r.step_pacers] == ["swarmx.down.l1.1"] * 2
    assert wss.simulate(raw).step_pacers is None and "step_pacers" not in wss.simulate(raw).to_json()


def test_the_trace_of_an_unfolded_run_has_a_track_per_wafer_and_per_tree_link():
    from wss.model.simulate import simulate_detailed
    from wss.views.trace import build_trace

    hw = ideal_hardware(swarmx={"link_bandwidth_Bps": 1e10})
    raw = scenario_dict(dense_model(2048, 2048, 2048), wafers=4, global_batch=256, steps=2, hardware=hw)
    r, cluster = simulate_detailed(_with(raw, stragglers=[{"wafer": 2, "slowdown": 1.5}]), record=True)
    events = build_trace(r, cluster)["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    names = set(threads.values())
    assert {f"wafer.{w}" for w in range(4)} <= names
    links = [link.name for link in cluster.tree.links()]
    assert len(links) == 2 * 4 and set(links) <= names  # one level of 4 edges, both directions
    compute = dict.fromkeys(range(4), 0.0)
    for e in events:
        if e.get("ph") == "X" and e["cat"] == "compute" and threads[e["tid"]].startswith("wafer."):
            compute[int(threads[e["tid"]].split(".")[1])] += e["dur"] / 1e6
    for w in range(4):
        assert compute[w] == pytest.approx(r.wafers[w].compute_s * 2, rel=1e-4)  # spans are kept to the ns
    assert compute[2] == pytest.approx(1.5 * compute[0], rel=1e-4)
    busy = sum(e["dur"] for e in events if e.get("ph") == "X" and threads.get(e["tid"]) == "swarmx.up.l1.3")
    assert busy / 1e6 == pytest.approx(cluster.tree.up_edges[0][3].busy_s, rel=1e-4)


def test_wss_plot_draws_each_wafers_idle_time_for_an_unfolded_run(tmp_path: Path, capsys):
    from wss.views.plots import wafers_figure

    raw = scenario_dict(dense_model(2048, 2048, 2048), wafers=4, global_batch=256, steps=2, hardware=ideal_hardware())
    r = wss.simulate(_with(raw, stragglers=[{"wafer": 2, "slowdown": 1.5}]))
    saved = tmp_path / "result.json"
    r.save(saved)
    assert main(["plot", str(saved), "--format", "png"]) == 0
    assert (tmp_path / "plots" / "wafers.png").stat().st_size > 0
    fig = wafers_figure(r)
    ax = fig.axes[0]
    assert "most idle: wafer 0" in ax.get_title() and "idle (not computing)" in ax.get_title()
    # Stacked bars: each wafer's bars add up to its step (compute plus its waits).
    heights = [0.0] * 4
    for patch in ax.patches:
        heights[round(patch.get_x() + patch.get_width() / 2)] += patch.get_height()
    scale = heights[2] / r.step_time_s
    for w in r.wafers:
        assert heights[w.wafer] / scale == pytest.approx(sum(w.breakdown_s.values()), rel=1e-9)
    assert not (tmp_path / "plain").exists()
    plain = wss.simulate(raw)
    plain.save(tmp_path / "plain.json")
    assert main(["plot", str(tmp_path / "plain.json"), "-o", str(tmp_path / "plain"), "--format", "png"]) == 0
    assert not (tmp_path / "plain" / "wafers.png").exists()


def test_validate_lists_the_edge_names_wafer_indexes_and_storage_presets(tmp_path: Path, capsys):
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(scenario_dict(dense_model(256, 256), wafers=16, global_batch=16)))
    assert main(["validate", str(file)]) == 0
    out = capsys.readouterr().out
    assert "edges       swarmx.l1.0-3, swarmx.l2.0-15 (names for faults.links)" in out
    assert "wafers      0-15 (indexes for faults.stragglers and faults.events)" in out
    assert "storage presets for faults.failures.storage: parallel-fs" in out


def test_the_summary_names_every_active_fault_even_those_that_keep_the_wafers_folded():
    """A slow MemoryX shard or slow flash reads change no wafer, so the run stays folded: the summary still says so."""
    from wss.views.summary import format_result

    raw = scenario_dict(dense_model(256, 256), wafers=4, global_batch=64, steps=2, hardware=ideal_hardware())
    raw["faults"] = {"shards": [{"shard": 0, "dram_factor": 0.5}]}
    r = wss.simulate(raw)
    assert r.wafer_folding.folded
    assert "  faults       MemoryX shard 0 at dram 0.5x" in format_result(r).splitlines()
    assert not any(line.startswith("  faults") for line in format_result(wss.simulate(
        scenario_dict(dense_model(256, 256), wafers=4, global_batch=64, steps=2, hardware=ideal_hardware()))
    ).splitlines())
