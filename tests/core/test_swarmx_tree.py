"""The unfolded SwarmX tree built alone: its shape, its names, the broadcast's lock-step and the reduction's wait.

Times are exact in binary floating point where compared with ``==``.
"""

from __future__ import annotations

import simpy

from wss.model.components.links import ByteStore, Chunk
from wss.model.components.swarmx import SwarmXSettings
from wss.model.components.swarmx_tree import SwarmXTree


def _settings(levels: int, nodes: tuple[int, ...], bw: float = 1024.0, hop: float = 0.25,
              buffer: int = 1 << 20) -> SwarmXSettings:
    return SwarmXSettings(levels=levels, nodes_per_level=nodes, link_bandwidth_Bps=bw, leaf_bandwidth_Bps=bw,
                          hop_latency_s=hop, port_buffer_bytes=buffer)


def test_tree_shape_and_names_follow_the_fan_out():
    env = simpy.Environment()
    tree = SwarmXTree(env, _settings(2, (1, 2)), fan_out=4, wafers=5, path_wafer=4)
    assert [len(level) for level in tree.down_edges] == [2, 5]
    assert [node.name for node in tree.fanouts[1]] == ["swarmx.l2.n0", "swarmx.l2.n1"]
    assert [len(f.inboxes) for f in tree.fanouts[1]] == [4, 1]  # wafers 0-3 under node 0, wafer 4 under node 1
    assert tree.down_edges[1][4].name == "swarmx.down.l2.4" and tree.up_edges[0][1].name == "swarmx.up.l1.1"
    assert [link.name for level in tree.down_edges for link in level] == [
        "swarmx.down.l1.0", "swarmx.down.l1.1", *(f"swarmx.down.l2.{w}" for w in range(5))]
    # The level views keep the folded chain's names and order, and draw wafer 4's path.
    assert [g.name for g in tree.down] == ["swarmx.down.l1", "swarmx.down.l2"]
    assert [g.name for g in tree.up] == ["swarmx.up.l2", "swarmx.up.l1"]
    assert tree.down[0].path is tree.down_edges[0][1] and tree.down[1].path is tree.down_edges[1][4]


def _run_links(env: simpy.Environment, tree: SwarmXTree) -> None:
    for link in tree.links():
        env.process(link.run())


def test_broadcast_reaches_every_wafer_and_a_slow_edge_paces_the_lock_step():
    """Edge swarmx.l2.2 at half rate: wafer 2 gets chunk k at (k + 1) x 2c/B + latency; the other wafers, held
    by the lock-step broadcast, are at most a buffer's worth of chunks ahead."""
    env = simpy.Environment()
    c, n = 256.0, 6
    tree = SwarmXTree(env, _settings(2, (1, 2), hop=0.0, buffer=512), fan_out=2, wafers=4,
                      bandwidth_factor={"swarmx.l2.2": 0.5})
    intakes = [ByteStore(env, 512) for _ in range(4)]
    for w, box in enumerate(intakes):
        tree.leaf_down(w).connect(box)
    _run_links(env, tree)
    got: dict[int, list[float]] = {w: [] for w in range(4)}

    def source():
        for k in range(n):
            yield tree.root.put(Chunk(0, k, n, c, ready_at=env.now))

    def sink(w: int):
        for _ in range(n):
            chunk = yield intakes[w].get()
            got[w].append(max(chunk.ready_at, env.now))

    env.process(source())
    for w in range(4):
        env.process(sink(w))
    env.run()
    t = c / 1024.0
    assert got[2] == [t + (k + 1) * 2 * t for k in range(n)]  # one hop at full rate, then the slow edge
    assert all(len(got[w]) == n for w in range(4))
    assert got[0][-1] < got[2][-1] and got[3][-1] < got[2][-1]
    assert tree.down_edges[1][2].bytes == tree.down_edges[1][0].bytes == n * c


def test_reduction_waits_for_every_child_and_sums_at_line_rate():
    """Children put their chunk at 0, 1 and 3 s: the sum leaves the root's edge at 3 + c/B + hop, once."""
    env = simpy.Environment()
    c, hop = 512.0, 0.25
    tree = SwarmXTree(env, _settings(1, (1,), hop=hop), fan_out=4, wafers=3)
    out = simpy.Store(env)
    tree.connect_root(out)
    for link in tree.up_edges[0]:
        env.process(link.run())

    def child(w: int, at: float):
        yield env.timeout(at)
        yield tree.leaf_up(w).inbox.put(Chunk(7, 0, 1, c, ready_at=env.now))

    for w, at in enumerate((0.0, 1.0, 3.0)):
        env.process(child(w, at))
    env.run()
    assert len(out.items) == 1
    summed = out.items[0]
    assert (summed.pass_index, summed.seq, summed.bytes) == (7, 0, c)
    assert summed.ready_at == 3.0 + c / 1024.0 + hop
    assert tree.partial_sums() == 0
