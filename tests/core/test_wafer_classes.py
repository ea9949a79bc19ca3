"""Classes of identical wafers (``simulation.wafer_classes``): one simulated wafer and one link per class.

Wafers with the same shard, slowdown and jitter draws under identical SwarmX subtrees have identical
timelines, so an unfolded run simulates one of each class and counts it for all its members at each
tree node.  The Result must be the one of a run with every wafer and every edge its own process, byte
for byte but for the number of simulated events, on scenarios where the wafers differ: a straggler,
a slow edge, uneven shards, activation offload, a shipped model.
"""

from __future__ import annotations

import json

import pytest
import simpy
from core_helpers import SCENARIOS, deep_merge, dense_model, ideal_hardware, larger_shards_first, scenario_dict

import wss
from wss.model.components.links import Chunk
from wss.model.components.swarmx import SwarmXSettings
from wss.model.components.swarmx_tree import SwarmXTree
from wss.model.scenario.fold_rules import simulated_wafers, stand_ins
from wss.model.sim.unfolded import UnfoldedCluster
from wss.model.simulate import simulate_detailed


def test_identical_subtrees_are_stood_for_by_their_first_member():
    """16 wafers, fan-out 4: uniform, the tree is one chain; wafer 5 apart, its node and itself are simulated
    apart; every kind distinct, nothing is stood for."""
    uniform = stand_ins((1, 4), 16, 4, [0] * 16)
    assert uniform == [[0, 0, 0, 0], [0] * 16]
    kinds = [0] * 16
    kinds[5] = 1
    one = stand_ins((1, 4), 16, 4, kinds)
    assert one[0] == [0, 1, 0, 0]
    assert one[1] == [0, 0, 0, 0, 4, 5, 4, 4, 0, 0, 0, 0, 0, 0, 0, 0]
    assert stand_ins((1, 4), 16, 4, list(range(16))) == [[0, 1, 2, 3], list(range(16))]
    # A degraded edge sets its subtree apart, and inside it the wafers are alike again.
    slow = stand_ins((1, 4), 16, 4, [0] * 16, {"swarmx.l1.2": 0.5})
    assert slow == [[0, 0, 2, 0], [0, 0, 0, 0, 0, 0, 0, 0, 8, 8, 8, 8, 0, 0, 0, 0]]
    # 5 wafers: node 0 has four wafers, node 1 one; a node's alike children time as one, so both nodes are one
    # class, and wafer 4 is stood for by wafer 0.
    assert stand_ins((1, 2), 5, 4, [0] * 5) == [[0, 0], [0, 0, 0, 0, 0]]
    # ... but not where node 1's one wafer differs from node 0's: [a, a, a, a] and [b] are two classes, while
    # [a, b, b] and [a, b] are one.
    assert stand_ins((1, 2), 5, 4, ["a"] * 4 + ["b"]) == [[0, 1], [0, 0, 0, 0, 4]]
    assert stand_ins((1, 2), 7, 4, ["a", "b", "b", "b", "a", "b", "b"]) == [[0, 0], [0, 1, 1, 1, 0, 1, 1]]
    # Same kinds in another order are another subtree (the order of first appearance is kept: a conservative
    # class); in the same order, the same subtree.
    assert stand_ins((1, 2), 4, 2, ["a", "b", "b", "a"]) == [[0, 1], [0, 1, 2, 3]]
    assert stand_ins((1, 2), 4, 2, ["a", "b", "a", "b"]) == [[0, 0], [0, 1, 0, 1]]


#: The chunk the reduction tests send up: its bytes, and the links' rate and hop latency.
_C, _RATE, _HOP = 512.0, 1024.0, 0.25


def _reducing_tree(nodes_per_level: tuple[int, ...], wafers: int, stand_in: list[list[int]]):
    """A fan-out-4 tree of ``stand_in``'s classes with its links going up running, the root's sums collected in
    ``out``, and ``send(w, at)``: wafer ``w`` sends one gradient chunk at time ``at``."""
    env = simpy.Environment()
    settings = SwarmXSettings(levels=len(nodes_per_level), nodes_per_level=nodes_per_level, link_bandwidth_Bps=_RATE,
                              leaf_bandwidth_Bps=_RATE, hop_latency_s=_HOP, port_buffer_bytes=1 << 20)
    tree = SwarmXTree(env, settings, fan_out=4, wafers=wafers, stand_in=stand_in)
    out = simpy.Store(env)
    tree.connect_root(out)
    for link in tree.simulated_links():
        if ".up." in link.name:
            env.process(link.run())

    def child(w: int, at: float):
        yield env.timeout(at)
        yield tree.leaf_up(w).inbox.put(Chunk(7, 0, 1, _C, ready_at=env.now))

    return env, tree, out, lambda w, at: env.process(child(w, at))


def test_a_reduction_counts_a_stand_in_once_per_member():
    """Three identical wafers under one node and one apart: the sum leaves once, when the one apart (the
    last) has sent, exactly as with four children."""
    env, tree, out, send = _reducing_tree((1,), 4, stand_ins((1,), 4, 4, ["x", "x", "x", "y"]))
    assert tree.stand_in == [[0, 0, 0, 3]] and len(tree.simulated_links()) == 4
    send(0, 1.0)
    send(3, 2.0)
    env.run()
    assert len(out.items) == 1 and out.items[0].ready_at == 2.0 + _C / _RATE + _HOP
    tree.name_members()
    names = [link.name for link in tree.links()]
    assert names == [*(f"swarmx.down.l1.{w}" for w in range(4)), *(f"swarmx.up.l1.{w}" for w in range(4))]
    assert tree.up_edges[0][2].bytes == tree.up_edges[0][0].bytes == _C


def test_the_nodes_above_the_busiest_stand_for_each_other_beside_lighter_wafers():
    """Nine wafers, fan-out 4: six busiest ("H") and three lighter ("L", which never hold the busiest up).
    Node 1 has [H, H, L, L], node 0 [H, H, H, H]: classed by their busiest children alone they are one class, and
    node 1's lighter wafers hang under node 0 in the simulated tree (wafer 6 stands for 6 and 7); node 2 has only
    lighter ones and keeps its class.  Without ``drifting`` every node is classed by all its children."""
    kinds = ["H"] * 6 + ["L"] * 3
    assert stand_ins((1, 3), 9, 4, kinds) == [[0, 1, 2], [0, 0, 0, 0, 4, 4, 6, 6, 8]]
    merged = stand_ins((1, 3), 9, 4, kinds, drifting={6, 7, 8})
    assert merged == [[0, 0, 2], [0, 0, 0, 0, 0, 0, 6, 6, 8]]
    # Nodes with only lighter wafers of different kinds stay apart (their own children time them).
    assert stand_ins((1, 3), 12, 4, ["H"] * 4 + ["L"] * 4 + ["M"] * 4, drifting=set(range(4, 12)))[0] == [0, 1, 2]
    # Busiest and lighter children in another order: still one class by the busiest alone.
    assert stand_ins((1, 2), 8, 4, ["H", "L", "H", "L", "L", "H", "L", "H"], drifting={1, 3, 4, 6}) == \
        [[0, 0], [0, 1, 0, 1, 1, 0, 1, 0]]
    # The tree: node 0's broadcast copies to wafer 0 and to wafer 6 (taken in from node 1), and its reduction
    # waits for a chunk from each, counting 4 members for wafer 0's edge and 2 for wafer 6's.
    env, tree, out, send = _reducing_tree((1, 3), 9, merged)
    node = tree.fanouts[1][0]
    assert tree.fanouts[1][1] is node and tree.reducers[1][1] is tree.reducers[1][0]
    assert node.inboxes == [tree.leaf_down(0).inbox, tree.leaf_down(6).inbox]
    assert tree.reducers[1][0].n_children == 6 and tree.reducers[1][2].n_children == 1
    assert tree.reducers[0][0].n_children == 3  # nodes 0 and 1 (one edge standing for two), node 2
    for w, at in ((6, 1.0), (8, 1.5), (0, 2.0)):  # the busiest last
        send(w, at)
    env.run()
    assert len(out.items) == 1 and out.items[0].ready_at == 2.0 + 2 * (_C / _RATE + _HOP)


def _comparable(result: wss.Result) -> dict:
    data = json.loads(result.to_json())
    data.pop("sim_events")
    data["scenario"]["simulation"].pop("wafer_classes", None)
    return data


def _both_ways(raw: dict | object, overrides: list[str] = ()) -> tuple[wss.Result, wss.Result]:
    classes = wss.simulate(wss.load_scenario(raw, [*overrides, "simulation.fold_wafers=false"]))
    apart = wss.simulate(wss.load_scenario(raw, [*overrides, "simulation.fold_wafers=false",
                                                 "simulation.wafer_classes=false"]))
    return classes, apart


_HW = ideal_hardware(swarmx={"link_bandwidth_Bps": 2e9, "hop_latency_s": 1e-6}, wafer={"io_bandwidth_Bps": 4e9})
_BASE = scenario_dict(dense_model(1024, 2048, 1024), wafers=16, global_batch=32, steps=2, optimizer="adamw",
                      hardware=_HW)


@pytest.mark.parametrize(
    "over",
    [
        {"faults": {"stragglers": [{"wafer": 5, "slowdown": 1.3}]}},
        {"faults": {"links": [{"edge": "swarmx.l2.9", "bandwidth_factor": 0.5}]}},
        {"faults": {"links": [{"edge": "swarmx.l1.2", "bandwidth_factor": 0.7}],
                    "stragglers": [{"wafer": 13, "slowdown": 1.1}, {"wafer": 0, "slowdown": 1.05}]}},
        {"training": {"global_batch": 37}},  # uneven shards: 5 wafers of 3, 11 of 2
        {"training": {"global_batch": 37}, "faults": {"stragglers": [{"wafer": 14, "slowdown": 2.0}]}},
    ],
    ids=["straggler", "slow-edge", "edge-and-stragglers", "uneven", "uneven-and-straggler"],
)
def test_classes_give_the_result_of_every_wafer_apart(over: dict):
    classes, apart = _both_ways(deep_merge(_BASE, over))
    assert _comparable(classes) == _comparable(apart)
    assert classes.sim_events < apart.sim_events / 2


def test_classes_on_a_shipped_model_with_uneven_shards_and_a_straggler():
    """GPT-3 1.3B-class work is too slow apart in the suite; the shipped BERT-Large on 6 wafers is not."""
    path = SCENARIOS / "bert_large.yaml"
    over = ["hardware.wafers=6", "training.global_batch=51", "training.steps=2",
            "faults.stragglers=[{wafer: 4, slowdown: 1.2}]"]
    classes, apart = _both_ways(path, over)
    assert _comparable(classes) == _comparable(apart)


def test_a_subtree_of_one_wafer_is_stood_for_by_one_of_many_alike():
    """Cerebras-GPT 13B on 25 wafers (20 of 29 samples, 5 of 28; fan-out 4, three levels): under the second
    top-level edge, one second-level edge leads to wafers 20 to 23 and another to wafer 24 alone, all of 28
    samples.  A node's alike children time as one, so wafer 24 is stood for by wafer 20; and the nodes above the
    busiest wafers stand for each other whatever lighter wafers hang beside them, so the run simulates 2 wafers
    (3 when a node was classed by all its children, 4 when by their counts too), with every number of the Result
    equal to every wafer apart, drift folds and all.  (The larger shards on the first wafers, the layout this was
    written on: ``larger_shards_first``.)"""
    import json

    from core_helpers import result_numbers

    over = {"hardware.wafers": 25, "training.steps": 1,
            "hardware.activation_store.bandwidth_Bps": None}  # the store its figures were found with
    path = SCENARIOS / "cerebras_gpt_13b.yaml"
    with larger_shards_first():
        classes, cc = simulate_detailed(wss.load_scenario(path, overrides=over), record=False)
        apart, ac = simulate_detailed(wss.load_scenario(path, overrides={**over, "simulation.wafer_classes": False}),
                                      record=False)
    assert cc.stand_in[24] == 20 and sum(1 for w, s in enumerate(cc.stand_in) if s == w) == 2
    assert cc.folding.drift is not None and cc.folding.drift.delays
    simulated = (".sim_events", ".cluster.", ".records[")
    got, want = ({k: v for k, v in result_numbers(json.loads(r.to_json())).items() if not k.startswith(simulated)}
                 for r in (classes, apart))
    assert got.keys() == want.keys()
    assert {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > 1e-9 * max(abs(v), 1e-12)} == {}
    assert cc.events < ac.events / 4


_TINY_GPT = {"name": "tiny-gpt", "input": "tokens", "seq_len": 64, "layers": [
    {"kind": "embedding", "name": "embed", "vocab_size": 512, "d_model": 256, "max_positions": 64},
    {"kind": "transformer_block", "name": "block", "repeat": 3, "d_model": 256, "n_heads": 4, "d_ff": 1024},
    {"kind": "output_head", "name": "head", "d_model": 256, "vocab_size": 512, "tied": True},
]}


def test_classes_with_activation_offload_on_the_shared_leaf_edges():
    """Offloaded block inputs share each wafer's edge with the weights: every simulated wafer has its own
    return channel and store, and the members' copy theirs."""
    raw = scenario_dict(_TINY_GPT, wafers=8, global_batch=44, steps=2, optimizer="adamw",
                        training={"activation_checkpointing": "offload", "micro_batch": 2},
                        faults={"links": [{"edge": "swarmx.l2.6", "bandwidth_factor": 0.6}]})
    classes, apart = _both_ways(raw)
    assert classes.memory.activation_checkpointing == "offload"
    assert _comparable(classes) == _comparable(apart)


def test_every_wafer_and_edge_keeps_its_own_name_and_record():
    raw = deep_merge(_BASE, {"faults": {"stragglers": [{"wafer": 5, "slowdown": 1.3}]}})
    result, cluster = simulate_detailed(raw, record=True)
    assert isinstance(cluster, UnfoldedCluster)
    assert len({id(w) for w in cluster.simulated}) == 3  # wafer 0 (for 14 wafers), 4 (for 3 of node 1) and 5
    assert [w.name for w in cluster.wafers] == [f"wafer.{w}" for w in range(16)]
    assert cluster.wafers[7].timeline == cluster.wafers[4].timeline
    names = [link.name for link in cluster.tree.links()]
    assert len(set(names)) == len(names) == 2 * (4 + 16)
    assert result.wafers is not None and [w.wafer for w in result.wafers] == list(range(16))
    assert result.wafers[9].breakdown_s == result.wafers[0].breakdown_s != result.wafers[5].breakdown_s


def test_wafer_classes_is_left_out_of_the_scenario_at_its_default():
    s = wss.load_scenario(_BASE)
    assert s.simulation.wafer_classes and "wafer_classes" not in json.loads(s.model_dump_json())["simulation"]
    off = wss.load_scenario(_BASE, ["simulation.wafer_classes=false"])
    assert json.loads(off.model_dump_json())["simulation"]["wafer_classes"] is False


def test_the_work_bound_counts_the_wafers_simulated():
    """GPT-3 175B on 192 wafers with 8 more samples than 8 each: 9 micro-batches, not folded; all 192 apart
    exceed the bound on simulated chunk passes, the classes (wafers 0-7 with 9 samples, the rest with 8) do not."""
    over = ["training.global_batch=1544", "simulation.fold_wafers=false"]
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", over)
    # Fan-out 4, four levels: a node of 9s (wafers 0-3, and 4-7 alike), one of 8s beside them (8-11), a
    # subtree of 8s beside theirs (16-31), and one beside the root's first child (64-127).
    assert simulated_wafers(s) == 4
    leaves = stand_ins(s.hardware.swarmx.nodes_per_level(192), 192, 4, [9] * 8 + [8] * 184)[-1]
    assert sorted(set(leaves)) == [0, 8, 16, 64]
    with pytest.raises(wss.ScenarioError, match="192 wafers simulated apart"):
        wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", [*over, "simulation.wafer_classes=false"])
    jitter = wss.load_scenario(_BASE, ["faults.jitter={sigma: 0.05}"])
    assert simulated_wafers(jitter) == 16
