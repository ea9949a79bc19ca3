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

**Classes of identical subtrees.**  Given each wafer's *kind* (what sets it
apart: its shard, its slowdown, its jitter draws), sibling edges whose subtrees
are identical (the same edge factors and, below them, the same shape and the
same kinds in the same order) receive the same chunks at the same times and
send the same gradients back at the same times.  Only the first of them (its
class's *stand-in*) is simulated: the node's broadcast copies each chunk to
one child per class, and its reduction counts the stand-in's chunk once for
each member of the class.  This is exact, the same argument that lets one
wafer stand for a uniform cluster applied at every node
(:func:`wss.model.scenario.fold_rules.stand_ins`, which the cluster's builder
passes in; docs/unfolded.md, "Classes of identical wafers").  Where lighter
wafers, which never hold the busiest up, hang beside the busiest, a node is
classed by its busiest children alone, so a simulated node may also take in a
lighter child edge of a node it stands for (its broadcast copies to it, its
reduction counts that edge's members).
"""

from __future__ import annotations

import copy
from collections.abc import Generator, Mapping, Sequence
from typing import Any

import simpy

from wss.model.components.links import Chunk, Inlet, Link
from wss.model.components.part import Held
from wss.model.components.swarmx import SwarmX, SwarmXSettings

__all__ = ["Fanout", "Reduce", "LinkGroup", "SwarmXTree"]


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
        puts = [box.put(item.copy()) for box in self.inboxes]
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
    A child standing for a class of identical children (``SwarmXTree.stand_in``) puts through
    :meth:`inlet`, and its chunk counts once per member.
    """

    def __init__(self, env: simpy.Environment, name: str, n_children: int):
        self.env = env
        self.name = name
        self.n_children = n_children
        self.out: Inlet | None = None
        #: (pass, seq) -> [children counted so far, the chunks that arrived with their put events]
        self._arrived: dict[tuple[int, int], tuple[list[int], list[tuple[Chunk, simpy.Event]]]] = {}

    def connect(self, out: Inlet) -> None:
        self.out = out

    def inlet(self, members: int) -> Inlet:
        """Where a child standing for ``members`` identical children puts its chunks."""
        return self if members == 1 else _Counted(self, members)

    @property
    def partial(self) -> int:
        """Chunks waiting for the rest of their children."""
        return len(self._arrived)

    def put(self, item: Chunk, members: int = 1) -> simpy.Event:
        assert self.out is not None, f"{self.name} is not connected"
        key = (item.pass_index, item.seq)
        entry = self._arrived.get(key)
        if entry is None:
            entry = self._arrived[key] = ([0], [])
        count, arrived = entry
        count[0] += members
        if count[0] < self.n_children:
            wait = self.env.event()
            arrived.append((item, wait))
            return wait
        del self._arrived[key]
        summed = item.copy()
        summed.ready_at = max([item.ready_at, *(c.ready_at for c, _ in arrived)])
        taken = self.out.put(summed)
        if arrived:
            def release(_event: simpy.Event) -> None:
                for _, wait in arrived:
                    wait.succeed()

            assert taken.callbacks is not None
            taken.callbacks.append(release)
        return taken


class _Counted:
    """A reduction's input for a child standing for ``members`` identical children."""

    def __init__(self, node: Reduce, members: int):
        self.node, self.members = node, members

    def put(self, item: Chunk) -> simpy.Event:
        return self.node.put(item, self.members)


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

    def counters(self) -> dict[str, float]:
        """The busiest member's figures under the level's name (what a Result reports per link class)."""
        busy, moved = self.busiest()
        return {self.name: busy, self.name + ".bytes": moved}

    def run(self) -> Generator[simpy.Event, Any, None]:
        raise TypeError(f"{self.name} is a view of {len(self.members)} links: run them instead")


class SwarmXTree(SwarmX):
    """The unfolded tree: real nodes and one link per edge and direction.

    ``down`` and ``up`` are the levels as :class:`LinkGroup` views, in the folded chain's order and
    with its names (``swarmx.down.l1`` ... and ``swarmx.up.l<D>`` ... ``swarmx.up.l1``), so a Result
    reads the same either way; ``down_edges[l - 1][c]`` and ``up_edges[l - 1][c]`` are the links (an
    edge stood for by another is that edge's link until :meth:`name_members`).

    Parameters
    ----------
    fan_out
        Children per node.
    wafers
        Leaves of the tree.
    path_wafer
        The wafer whose root-to-leaf path the level views draw (the representative wafer; it must stand
        for itself).
    bandwidth_factor
        Edge name -> factor on both of its links' bandwidth (a degraded edge).
    stand_in
        Each edge's stand-in, level by level, root first (the edge simulated in its place: one subtree
        per class of identical ones, from :func:`wss.model.scenario.fold_rules.stand_ins`); ``None``:
        every edge stands for itself (every wafer and every edge apart).
    """

    def __init__(self, env: simpy.Environment, settings: SwarmXSettings, fan_out: int, wafers: int,
                 path_wafer: int = 0, bandwidth_factor: Mapping[str, float] | None = None,
                 stand_in: Sequence[Sequence[int]] | None = None):
        self.settings = settings
        self.name = settings.name
        self.levels = settings.levels
        self.nodes_per_level = list(settings.nodes_per_level)
        self.fan_out = fan_out
        self.wafers = wafers
        factor = dict(bandwidth_factor or {})
        name, depth = settings.name, settings.levels
        widths = [*self.nodes_per_level[1:], wafers]  # the edges leaving each level
        self.stand_in = ([list(range(w)) for w in widths] if stand_in is None else [list(row) for row in stand_in])
        #: Each level's simulated edges, root first: fixed once built, and read on every count of the parts.
        self._simulated_edges = [[c for c, s in enumerate(row) if s == c] for row in self.stand_in]
        self.down_edges = self._edges(env, "down", factor)
        self.up_edges = self._edges(env, "up", factor)
        self.fanouts: list[list[Fanout]] = []
        self.reducers: list[list[Reduce]] = []
        for level in range(1, depth + 1):
            self._nodes(env, level)
        for level in range(1, depth + 1):
            for c in self._simulated(level):
                node = c // fan_out
                if level < depth:
                    self.down_edges[level - 1][c].connect(self.fanouts[level][c])
                members = sum(1 for k in self._children(level, node) if self.stand_in[level - 1][k] == c)
                self.up_edges[level - 1][c].connect(self.reducers[level - 1][node].inlet(members))
            if level > 1:
                for i in self._simulated(level - 1):
                    self.reducers[level - 1][i].connect(self.up_edges[level - 2][i].inbox)
        self._reducers = self._distinct_nodes()  # each node once (a node stood for by another is that one)
        #: The links that run, in start order (:meth:`simulated_links`): fixed once built.
        down = [self.down_edges[level - 1][c] for level in range(1, depth + 1) for c in self._simulated(level)]
        up = [self.up_edges[level - 1][c] for level in range(depth, 0, -1) for c in self._simulated(level)]
        self._running = down + up
        path = [path_wafer // fan_out ** (depth - level) for level in range(1, depth + 1)]
        assert all(self.stand_in[level][c] == c for level, c in enumerate(path)), "the path must be simulated"
        self.down = [LinkGroup(f"{name}.down.l{level}", self._distinct(self.down_edges[level - 1]),
                               self.down_edges[level - 1][path[level - 1]]) for level in range(1, depth + 1)]
        self.up = [LinkGroup(f"{name}.up.l{level}", self._distinct(self.up_edges[level - 1]),
                             self.up_edges[level - 1][path[level - 1]]) for level in range(depth, 0, -1)]

    def _children(self, level: int, node: int) -> range:
        """The edges leaving node ``node`` of level ``level``."""
        width = len(self.stand_in[level - 1])
        return range(node * self.fan_out, min((node + 1) * self.fan_out, width))

    def _simulated(self, level: int) -> list[int]:
        """The edges of ``level`` that stand for themselves (each its own link)."""
        return self._simulated_edges[level - 1]

    @staticmethod
    def _distinct(links: list[Link]) -> list[Link]:
        return list({id(link): link for link in links}.values())

    def _edges(self, env: simpy.Environment, direction: str, factor: Mapping[str, float]) -> list[list[Link]]:
        """One link per simulated edge of each level; every other edge is its stand-in's link, and an edge
        that carries nothing (above wafers cut off) a link that never runs."""
        out = []
        for level, row in enumerate(self.stand_in, start=1):
            own = {c: self._edge(env, direction, level, c, factor) for c, s in enumerate(row) if s in (c, -1)}
            out.append([own[c if s == -1 else s] for c, s in enumerate(row)])
        return out

    def _nodes(self, env: simpy.Environment, level: int) -> None:
        """The broadcasts and reductions of ``level``'s nodes: a simulated node's broadcast copies to one
        child per class, its reduction counts every child; any other node is its stand-in's.

        A simulated node takes in the simulated edges of the nodes it stands for too: its own, and any a node it
        stands for has and it has no class of (a drifting child beside the busiest wafers:
        :func:`~wss.model.scenario.fold_rules.stand_ins`).  Its reduction counts, per chunk, every member each of
        them stands for under its own node."""
        name = self.settings.name
        below = self.down_edges[level - 1]
        row = self.stand_in[level - 1]
        above = [0] if level == 1 else self.stand_in[level - 2]
        fanouts: dict[int, Fanout] = {-1: Fanout(env, f"{name}.l{level}.down", [])}  # a node that is down, or
        reducers: dict[int, Reduce] = {-1: Reduce(env, f"{name}.l{level}.down", 0)}  # above wafers cut off
        taken_in: dict[int, list[int]] = {}  # a simulated node -> the simulated edges it takes in, in order
        for c in self._simulated(level):
            taken_in.setdefault(above[c // self.fan_out], []).append(c)
        for i in sorted(set(above) - {-1}):
            edges = taken_in.get(i, [])
            counted = sum(1 for c in edges for k in self._children(level, c // self.fan_out) if row[k] == c)
            fanouts[i] = Fanout(env, f"{name}.l{level}.n{i}", [below[c] for c in edges])
            reducers[i] = Reduce(env, f"{name}.l{level}.n{i}", counted)
        self.fanouts.append([fanouts[s] for s in above])
        self.reducers.append([reducers[s] for s in above])

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

    def record(self) -> None:
        """Keep every edge's spans, and the level views' (those on the representative wafer's path)."""
        for group in (*self.down, *self.up):
            group.record()

    def connect_root(self, out: Inlet) -> None:
        """Wire where the root's summed gradients go (MemoryX's network ports)."""
        self.reducers[0][0].connect(out)

    def leaf_down(self, wafer: int) -> Link:
        """The edge into ``wafer``."""
        return self.down_edges[-1][wafer]

    def leaf_up(self, wafer: int) -> Link:
        """The edge out of ``wafer``."""
        return self.up_edges[-1][wafer]

    def links(self) -> list[Link]:
        """Every edge's link, down the tree level by level, then up from the wafers (an edge stood for by
        another gives that one's link until :meth:`name_members`)."""
        return [link for level in self.down_edges for link in level] + \
            [link for level in reversed(self.up_edges) for link in level]

    def simulated_links(self) -> list[Link]:
        """The links that run, in the order of :meth:`links`: the order they start in."""
        return list(self._running)

    def edges_below(self, level: int, wafers: int) -> int:
        """Edges leaving level ``level`` that carry chunks (not those above wafers cut off)."""
        return sum(1 for s in self.stand_in[level - 1] if s >= 0)

    def link_names(self) -> list[str]:
        """Every edge's link name, in the order of :meth:`links`."""
        name, depth = self.settings.name, self.levels
        widths = [len(row) for row in self.stand_in]
        down = [f"{name}.down.l{level}.{c}" for level in range(1, depth + 1) for c in range(widths[level - 1])]
        up = [f"{name}.up.l{level}.{c}" for level in range(depth, 0, -1) for c in range(widths[level - 1])]
        return down + up

    def name_members(self) -> None:
        """After a run: give every edge stood for by another its own link, a copy of its stand-in's under its
        own name (the same counters and spans: it did exactly the same), for per-edge traces and figures."""
        name = self.settings.name
        for direction, edges in (("down", self.down_edges), ("up", self.up_edges)):
            for level, row in enumerate(edges, start=1):
                for c, s in enumerate(self.stand_in[level - 1]):
                    if s not in (c, -1):
                        row[c] = copy.copy(row[s])
                        row[c].name = f"{name}.{direction}.l{level}.{c}"

    def partial_sums(self) -> int:
        """Gradient chunks waiting at a node for the rest of its children."""
        return sum(node.partial for node in self._reducers)

    def state(self) -> dict[str, Held]:
        """Its links' inboxes, and the gradient chunks its nodes hold for the rest of their children."""
        return {**super().state(), f"{self.name}.partial_sums": Held(self.partial_sums())}

    def _distinct_nodes(self) -> list[Reduce]:
        return list({id(node): node for level in self.reducers for node in level}.values())
