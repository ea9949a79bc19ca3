"""A SwarmX node down (``faults.nodes``): the wafers below it are cut off and the global batch is split
over the others.  Checked against closed forms; bad specifications.

* The lock-step tree without one subtree is the tree with it, less that subtree's identical copy: a
  node down over ``k`` of ``N`` wafers gives exactly the step of the whole cluster on the global batch
  ``B x N / (N - k)`` (each wafer that trains has the same shard in both).
* On a compute-bound step whose compute grows with the shard (fixed micro-batches), the step grows
  by ``N / (N - k)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from core_helpers import assert_clear_scenario_error, deep_merge, dense_model, ideal_hardware, scenario_dict

import wss
from wss.cli import main
from wss.errors import ScenarioError
from wss.model.scenario.shards import reachable_wafers, shard_samples
from wss.model.sim.unfolded import UnfoldedCluster
from wss.model.simulate import simulate_detailed

_GPT = {"name": "tiny-gpt", "input": "tokens", "seq_len": 2048, "layers": [
    {"kind": "embedding", "name": "embed", "vocab_size": 512, "d_model": 1024, "max_positions": 2048},
    {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": 1024, "n_heads": 8, "d_ff": 4096},
    {"kind": "output_head", "name": "head", "d_model": 1024, "vocab_size": 512, "tied": True},
]}


def _down(raw: dict, *nodes: str) -> dict:
    return deep_merge(raw, {"faults": {"nodes": [{"node": n} for n in nodes]}})


def _cluster(global_batch: int, wafers: int = 16) -> dict:
    return scenario_dict(_GPT, wafers=wafers, global_batch=global_batch, steps=2, hardware=ideal_hardware(),
                         training={"micro_batch": 4})


def test_the_wafers_below_a_node_that_is_down_are_cut_off_and_the_batch_goes_to_the_others():
    s = wss.load_scenario(_down(_cluster(48), "swarmx.l2.n1"))
    assert reachable_wafers(s) == [0, 1, 2, 3, *range(8, 16)]
    assert shard_samples(s) == [4, 4, 4, 4, 0, 0, 0, 0, *[4] * 8]
    uneven = wss.load_scenario(_down(_cluster(50), "swarmx.l2.n0", "swarmx.l2.n3"))
    # 50 over 8: two of 7, six of 6, the larger shares spread over the tree (one under each live leaf node)
    assert shard_samples(uneven) == [0] * 4 + [7, 6, 6, 6] + [7, 6, 6, 6] + [0] * 4


def test_a_node_down_gives_the_step_of_the_whole_cluster_on_the_larger_shards():
    """12 of 16 wafers train on 192 samples: 16 each, as the 16 wafers do on 256."""
    down = wss.simulate(_down(_cluster(192), "swarmx.l2.n1"))
    whole = wss.simulate(_cluster(256))
    assert down.step_time_s == pytest.approx(whole.step_time_s, rel=1e-12)
    assert down.breakdown_s == pytest.approx(whole.breakdown_s, rel=1e-12, abs=1e-18)
    assert not down.wafer_folding.folded and down.wafer_folding.reason == "auto: faults (node swarmx.l2.n1 down)"


def test_a_node_down_over_k_of_n_wafers_slows_a_compute_bound_step_by_n_over_n_minus_k():
    raw = _cluster(192)
    base = wss.simulate(raw)
    assert base.bound_by == "compute"
    for nodes, k in ((["swarmx.l2.n1"], 4), (["swarmx.l2.n1", "swarmx.l2.n2"], 8)):
        r = wss.simulate(_down(raw, *nodes))
        ratio = 16 / (16 - k)
        assert r.breakdown_s["compute"] == pytest.approx(ratio * base.breakdown_s["compute"], rel=1e-9)
        assert r.step_time_s == pytest.approx(ratio * base.step_time_s, rel=1e-6)
        assert r.wafers is not None
        cut = [w for w in r.wafers if w.samples == 0]
        assert len(cut) == k and all(w.compute_s == 0.0 and w.idle_s == r.step_time_s for w in cut)
        assert all(w.samples == 192 // (16 - k) for w in r.wafers if w.samples)
        # bytes count the edges that carry chunks: 16 - k into wafers, and the root's edges to live nodes
        assert r.link_bytes["swarmx.l2->wafer"].links == 16 - k
        assert r.link_bytes["swarmx.l1->swarmx.l2"].links == 4 - k // 4


def test_a_node_down_with_classes_and_every_wafer_apart_agree_and_tracks_stay_per_wafer():
    raw = deep_merge(_down(_cluster(100), "swarmx.l2.n2"), {"faults": {"stragglers": [{"wafer": 1, "slowdown": 1.2}]}})
    classes = wss.simulate(raw)
    apart = wss.simulate(deep_merge(raw, {"simulation": {"wafer_classes": False}}))
    a, b = json.loads(classes.to_json()), json.loads(apart.to_json())
    for data in (a, b):
        data.pop("sim_events")
        data["scenario"]["simulation"].pop("wafer_classes", None)
    assert a == b
    _, cluster = simulate_detailed(raw, record=True)
    assert isinstance(cluster, UnfoldedCluster) and cluster.reachable == 12
    assert [w.name for w in cluster.wafers] == [f"wafer.{w}" for w in range(16)]
    assert cluster.wafers[9].timeline == [] and cluster.tree.down_edges[0][2].bytes == 0.0


@pytest.mark.parametrize(
    ("nodes", "path", "words"),
    [
        (["swarmx.l1.n0"], "faults.nodes.0.node", "swarmx.l1.n0 is the root"),
        (["swarmx.l2.n4"], "faults.nodes.0.node", "unknown node 'swarmx.l2.n4'; did you mean 'swarmx.l2.n"),
        (["swarmx.l2.1"], "faults.nodes.0.node", "did you mean 'swarmx.l2.n1'?"),
        ([f"swarmx.l2.n{i}" for i in range(4)], "faults.nodes", "every one of the 16 wafers is below a node"),
    ],
)
def test_bad_node_faults_are_clear_errors(nodes: list[str], path: str, words: str, tmp_path: Path, capsys):
    raw = _down(scenario_dict(dense_model(256, 256), wafers=16, global_batch=16), *nodes)
    assert_clear_scenario_error(raw, path, words, tmp_path, capsys)


def test_a_node_down_cannot_be_folded_and_validate_lists_the_nodes(tmp_path: Path, capsys):
    raw = _down(scenario_dict(dense_model(256, 256), wafers=16, global_batch=16), "swarmx.l2.n1")
    with pytest.raises(ScenarioError, match="simulation.fold_wafers: true cannot show faults"):
        wss.load_scenario(deep_merge(raw, {"simulation": {"fold_wafers": True}}))
    file = tmp_path / "s.yaml"
    file.write_text(json.dumps(raw))
    assert main(["validate", str(file)]) == 0
    out = capsys.readouterr().out
    assert "nodes       swarmx.l1.n0, swarmx.l2.n0-3 (names for faults.nodes)" in out
    assert "node swarmx.l2.n1 down" in out


def test_the_wafers_figure_marks_the_wafers_cut_off():
    from wss.views.plots import wafers_figure

    r = wss.simulate(_down(_cluster(48), "swarmx.l2.n1"))
    handles, labels = wafers_figure(r).axes[0].get_legend_handles_labels()
    cut = handles[labels.index("cut off (node down)")]
    assert [round(bar.get_x() + bar.get_width() / 2) for bar in cut] == [4, 5, 6, 7]
