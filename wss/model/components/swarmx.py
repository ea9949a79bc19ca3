"""SwarmX: the broadcast/reduce tree between MemoryX and the wafers.

The tree has ``D = ceil(log_f N)`` levels of nodes.  Weights go down
(each node replicates a chunk to its children on separate ports at once) and
gradients come up (each node sums its children's chunks at line rate).
Because every wafer gets the same chunks at the same time, all root-to-leaf
paths are identical and the tree folds into one chain of links per direction;
per-level byte totals multiply by the number of edges at that level.  With
uneven shards the slowest wafer sets the pace of the lock-step broadcast and
of every reduction, so the representative chain follows the busiest wafer.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from wss.model.components.links import Inlet, Link
from wss.model.components.part import Carried, Held, Process, Reading, Track, counters_of, state_of, waits_of

__all__ = ["SwarmXSettings", "SwarmX"]


@dataclass(frozen=True)
class SwarmXSettings:
    """The tree's shape and link figures.

    ``nodes_per_level[l]`` counts the nodes of level ``l + 1`` (level 1 is the
    root's); the last level's edges go to the wafers and run at
    ``leaf_bandwidth_Bps`` (the slower of a SwarmX link and a wafer's I/O).
    Every link's inbox is a port buffer of ``port_buffer_bytes``.
    """

    levels: int
    nodes_per_level: tuple[int, ...]
    link_bandwidth_Bps: float
    leaf_bandwidth_Bps: float
    hop_latency_s: float
    port_buffer_bytes: int
    name: str = "swarmx"


class SwarmX:
    """The folded tree: ``down`` links root-to-leaf, ``up`` links leaf-to-root.

    The edges between MemoryX and the root belong to MemoryX (its network ports).  As a part of the cluster
    the tree is its links that run (:meth:`simulated_links`), in their start order.
    """

    def __init__(self, env: simpy.Environment, settings: SwarmXSettings):
        self.settings = settings
        self.name = settings.name
        self.levels = settings.levels
        self.nodes_per_level = list(settings.nodes_per_level)
        self.down: list[Link] = []
        self.up: list[Link] = []
        for level in range(1, self.levels + 1):
            self.down.append(self._link(env, "down", level))
        for level in range(self.levels, 0, -1):
            self.up.append(self._link(env, "up", level))
        for a, b in zip(self.down, self.down[1:]):
            a.connect(b.inbox)
        for a, b in zip(self.up, self.up[1:]):
            a.connect(b.inbox)

    def _link(self, env: simpy.Environment, direction: str, level: int) -> Link:
        s = self.settings
        bw = s.leaf_bandwidth_Bps if level == self.levels else s.link_bandwidth_Bps
        return Link(env, f"{s.name}.{direction}.l{level}", bw, s.hop_latency_s, s.port_buffer_bytes)

    def simulated_links(self) -> list[Link]:
        """The links that run, in the order they start: down the chain, then up."""
        return [*self.down, *self.up]

    @property
    def root(self) -> Inlet:
        """Where MemoryX puts the weight chunks (the chain's first link's buffer)."""
        return self.down[0].inbox

    def connect_root(self, out: Inlet) -> None:
        """Wire where the root's summed gradients go (MemoryX's network ports)."""
        self.up[-1].connect(out)

    def leaf_down(self, wafer: int) -> Link:
        """The edge into ``wafer`` (the chain's last link down, for every wafer)."""
        return self.down[-1]

    def leaf_up(self, wafer: int) -> Link:
        """The edge out of ``wafer`` (the chain's first link up, for every wafer)."""
        return self.up[0]

    def record(self) -> None:
        """Keep every link's spans (for traces)."""
        for link in self.simulated_links():
            link.record()

    def processes(self) -> list[tuple[str, Process]]:
        return [process for link in self.simulated_links() for process in link.processes()]

    def counters(self) -> dict[str, float]:
        return counters_of(self.simulated_links())

    def waits(self) -> dict[int, str]:
        return waits_of(self.simulated_links())

    def state(self) -> dict[str, Held]:
        return state_of(self.simulated_links())

    def utilisation(self, at: Reading) -> dict[str, float]:
        """Each level's links down, then up (in an unfolded tree: each level's busiest link)."""
        return {k: v for link in (*self.down, *self.up) for k, v in link.utilisation(at).items()}

    def tracks(self) -> list[Track]:
        """One trace process per level (root first): the weights down, the gradients up (in an unfolded tree: the
        links on the representative wafer's path)."""
        ups = {link.name.rsplit(".", 1)[1]: link for link in self.up}
        out: list[Track] = []
        for i, down in enumerate(self.down):
            level = i + 1
            n = self.nodes_per_level[i] if i < len(self.nodes_per_level) else 1
            process = f"SwarmX level {level} ({n} node{'s' if n != 1 else ''})"
            out.append(down.track(process, "weights down"))
            up = ups.get(f"l{level}")
            if up is not None:
                out.append(up.track(process, "gradients up"))
        return out

    def carried(self, at: Reading) -> dict[str, Carried]:
        """Each level's bytes down, then up, over every edge of that level toward the wafers that train."""
        out: dict[str, Carried] = {}
        for i, link in enumerate(self.down):
            level = i + 1
            target = "wafer" if level == self.levels else f"{self.name}.l{level + 1}"
            out[f"{self.name}.l{level}->{target}"] = Carried(self.edges_below(level, at.wafers),
                                                             at.total(link.name + ".bytes"))
        for link in self.up:
            level = int(link.name.rsplit("l", 1)[1])
            source = "wafer" if level == self.levels else f"{self.name}.l{level + 1}"
            out[f"{source}->{self.name}.l{level}"] = Carried(self.edges_below(level, at.wafers),
                                                             at.total(link.name + ".bytes"))
        return out

    def edges_below(self, level: int, wafers: int) -> int:
        """Number of physical edges leaving level ``level`` toward the wafers (level D: one per wafer)."""
        if level == self.levels:
            return wafers
        return self.nodes_per_level[level]  # children of level `level` are the nodes of level+1
