"""SwarmX as a tree of real nodes: one link per edge and direction, a broadcast and a reduction per node.

The folded tree (:mod:`wss.model.components.swarmx`) is one chain of links per
direction standing for every root-to-leaf path.  Here every edge is its own
:class:`~wss.model.components.links.Link` in each direction (bandwidth, latency,
its own port buffer), so one slow edge or one slow wafer slows only what really
waits for it:

* **Broadcast** (:class:`Fanout`): a chunk arriving at a node is copied into
  the port buffer of every child edge; the node takes the next chunk only when
  every child has taken its copy (lock-step: the parent edge holds the chunk
  until then, which is how a full buffer below one child reaches MemoryX).
* **Reduction** (:class:`Reduce`): a node waits for a gradient chunk from every
  child, then sends one summed chunk up.  The sum runs at line rate (it adds no
  time: the summed chunk leaves when the last child's arrives); each child's
  edge holds its chunk until the sum is taken upward.

Level ``l`` (root: 1) has ``nodes_per_level[l - 1]`` nodes; the edges leaving
level ``l`` go to the nodes of level ``l + 1`` or, at the last level, to the
wafers, and a child ``c`` hangs under node ``c // fan_out``.  Edge ``c`` of
level ``l`` is named ``swarmx.l<l>.<c>``; its links ``swarmx.down.l<l>.<c>`` and
``swarmx.up.l<l>.<c>``; node ``i`` of level ``l`` is ``swarmx.l<l>.n<i>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import simpy

from wss.model.components.links import Chunk, Inlet, Link
from wss.model.components.swarmx import SwarmX, SwarmXSettings

__all__ = ["Fanout", "Reduce", "LinkGroup", "SwarmXTree", "edge_names"]


def _children(level: int, nodes_per_level: Sequence[int], wafers: int) -> int:
    """Edges leaving level ``level`` toward the wafers (the number of nodes, or wafers, one level down)."""
    return wafers if level == len(nodes_per_level) else nodes_per_level[level]


def edge_names(nodes_per_level: Sequence[int], wafers: int, name: str = "swarmx") -> list[str]:
    """Every edge of the tree, root first: ``swarmx.l1.0``, ..., ``swarmx.l<D>.<wafers - 1>``."""
    return [f"{name}.l{level}.{c}" for level in range(1, len(nodes_per_level) + 1)
            for c in range(_children(level, nodes_per_level, wafers))]


class Fanout:
    """A node's broadcast: a chunk put here goes into every child edge's port buffer (each its own copy).

    The put succeeds when every child has taken its copy, so the parent edge waits for the fullest child.
    """

    def __init__(self, env: simpy.Environment, name: str, children: Sequence[Link]):
        self.env = env
        self.name = name
        self.inboxes = [link.inbox for link in children]

    def put(self, item: Chunk) -> simpy.Event:
        if len(self.inboxes) == 1:
            return self.inboxes[0].put(item)
        # Each child gets its own copy: a link stamps the chunk with its arrival time downstream.
        puts = [box.put(dataclasses.replace(item)) for box in self.inboxes]
        pending = [p for p in puts if not p.triggered]
        if not pending:
            return puts[-1]
        if len(pending) == 1:
            return pending[0]
        return self.env.all_of(pending)


class Reduce:
    """A node's reduction: the gradient chunk of every child, summed into one that goes up.

    Children send the same chunks in the same order; a chunk is matched by its pass and sequence
    number.  Each child's put succeeds when the summed chunk has been taken by the edge above.
    """

    def __init__(self, env: simpy.Environment, name: str, n_children: int):
        self.env = env
        self.name = name
        self.n_children = n_children
        self.out: Inlet | None = None
        self._arrived: dict[tuple[int, int], list[tuple[Chunk, simpy.Event]]] = {}

    def connect(self, out: Inlet) -> None:
        self.out = out

    @property
    def partial(self) -> int:
        """Chunks waiting for the rest of their children."""
        return len(self._arrived)

    def put(self, item: Chunk) -> simpy.Event:
        assert self.out is not None, f"{self.name} is not connected"
        key = (item.pass_index, item.seq)
        arrived = self._arrived.setdefault(key, [])
        if len(arrived) + 1 < self.n_children:
            wait = self.env.event()
            arrived.append((item, wait))
            return wait
        del self._arrived[key]
        summed = dataclasses.replace(item, ready_at=max([item.ready_at, *(c.ready_at for c, _ in arrived)]))
        taken = self.out.put(summed)
        if arrived:
            def release(_event: simpy.Event) -> None:
                for _, wait in arrived:
                    wait.succeed()

            assert taken.callbacks is not None
            taken.callbacks.append(release)
        return taken


class LinkGroup(Link):
    """The parallel links of one level seen as one link class: the view a Result reports.

    Busy time and bytes are the busiest member's (:meth:`sync`); spans and buffer occupancy are
    those of the member on the representative wafer's path (``path``), for traces and plots.
    A group does not run: its members do.
    """

    def __init__(self, name: str, members: Sequence[Link], path: Link):
        super().__init__(path.env, name, path.bandwidth_Bps, path.latency_s, path.inbox.capacity_bytes)
        self.members = list(members)
        self.path = path
        self.inbox = path.inbox

    def busiest(self) -> tuple[float, float]:
        """The largest busy seconds and the largest bytes over the members (one member on a uniform level; with a
        degraded edge the slow one is the busiest while every member carries the same bytes)."""
        return max(m.busy_s for m in self.members), max(m.bytes for m in self.members)

    def sync(self) -> None:
        """Copy the members' largest figures into this view (after a run)."""
        self.busy_s, self.bytes = self.busiest()
        self.chunks = max(m.chunks for m in self.members)

    def record(self) -> None:
        for m in self.members:
            m.record()
        self.spans, self.occupancy = self.path.spans, self.path.occupancy

    def run(self) -> Generator[simpy.Event, Any, None]:
        raise TypeError(f"{self.name} is a view of {len(self.members)} links: run them instead")


class SwarmXTree(SwarmX):
    """The unfolded tree: real nodes and one link per edge and direction.

    ``down`` and ``up`` are the levels as :class:`LinkGroup` views, in the folded chain's order and
    with its names (``swarmx.down.l1`` ... and ``swarmx.up.l<D>`` ... ``swarmx.up.l1``), so a Result
    reads the same either way; ``down_edges[l - 1][c]`` and ``up_edges[l - 1][c]`` are the links.

    Parameters
    ----------
    fan_out
        Children per node.
    wafers
        Leaves of the tree.
    path_wafer
        The wafer whose root-to-leaf path the level views draw (the representative wafer).
    bandwidth_factor
        Edge name -> factor on both of its links' bandwidth (a degraded edge).
    """

    def __init__(self, env: simpy.Environment, settings: SwarmXSettings, fan_out: int, wafers: int,
                 path_wafer: int = 0, bandwidth_factor: Mapping[str, float] | None = None):
        self.settings = settings
        self.levels = settings.levels
        self.nodes_per_level = list(settings.nodes_per_level)
        self.fan_out = fan_out
        self.wafers = wafers
        factor = dict(bandwidth_factor or {})
        name, depth = settings.name, settings.levels
        widths = [_children(level, self.nodes_per_level, wafers) for level in range(1, depth + 1)]
        self.down_edges = [[self._edge(env, "down", level, c, factor) for c in range(widths[level - 1])]
                           for level in range(1, depth + 1)]
        self.up_edges = [[self._edge(env, "up", level, c, factor) for c in range(widths[level - 1])]
                         for level in range(1, depth + 1)]
        self.fanouts: list[list[Fanout]] = []
        self.reducers: list[list[Reduce]] = []
        for level in range(1, depth + 1):
            below = self.down_edges[level - 1]
            nodes = range(self.nodes_per_level[level - 1])
            self.fanouts.append([Fanout(env, f"{name}.l{level}.n{i}", below[i * fan_out:(i + 1) * fan_out])
                                 for i in nodes])
            self.reducers.append([Reduce(env, f"{name}.l{level}.n{i}", len(below[i * fan_out:(i + 1) * fan_out]))
                                  for i in nodes])
        for level in range(1, depth + 1):
            for c, link in enumerate(self.down_edges[level - 1]):
                if level < depth:
                    link.connect(self.fanouts[level][c])
            for c, link in enumerate(self.up_edges[level - 1]):
                link.connect(self.reducers[level - 1][c // fan_out])
            if level > 1:
                for i, node in enumerate(self.reducers[level - 1]):
                    node.connect(self.up_edges[level - 2][i].inbox)
        path = [path_wafer // fan_out ** (depth - level) for level in range(1, depth + 1)]
        self.down = [LinkGroup(f"{name}.down.l{level}", self.down_edges[level - 1],
                               self.down_edges[level - 1][path[level - 1]]) for level in range(1, depth + 1)]
        self.up = [LinkGroup(f"{name}.up.l{level}", self.up_edges[level - 1],
                             self.up_edges[level - 1][path[level - 1]]) for level in range(depth, 0, -1)]

    def _edge(self, env: simpy.Environment, direction: str, level: int, child: int,
              factor: Mapping[str, float]) -> Link:
        s = self.settings
        bw = s.leaf_bandwidth_Bps if level == self.levels else s.link_bandwidth_Bps
        edge = f"{s.name}.l{level}.{child}"
        return Link(env, f"{s.name}.{direction}.l{level}.{child}", bw * factor.get(edge, 1.0), s.hop_latency_s,
                    s.port_buffer_bytes)

    @property
    def root(self) -> Fanout:
        """Where MemoryX puts the weight chunks: the root's broadcast."""
        return self.fanouts[0][0]

    def connect_root(self, out: Inlet) -> None:
        """Wire where the root's summed gradients go (MemoryX's network ports)."""
        self.reducers[0][0].connect(out)

    def leaf_down(self, wafer: int) -> Link:
        return self.down_edges[-1][wafer]

    def leaf_up(self, wafer: int) -> Link:
        return self.up_edges[-1][wafer]

    def links(self) -> list[Link]:
        """Every link, down the tree level by level, then up from the wafers: the order they start in."""
        return [link for level in self.down_edges for link in level] + \
            [link for level in reversed(self.up_edges) for link in level]

    def partial_sums(self) -> int:
        """Gradient chunks waiting at a node for the rest of its children."""
        return sum(node.partial for level in self.reducers for node in level)
