"""SwarmX: the broadcast/reduce tree between MemoryX and the wafers.

The tree has ``D = ceil(log_f N)`` levels of nodes.  Weights go down
(each node replicates a chunk to its children on separate ports at once) and
gradients come up (each node sums its children's chunks at line rate).
Because every wafer gets the same chunks at the same time, all root-to-leaf
paths are identical and the tree folds into one chain of links per direction
(DESIGN.md, "Keeping it fast"); per-level byte totals multiply by the number
of edges at that level.  With uneven shards the slowest wafer sets the pace
of the lock-step broadcast and of every reduction, so the representative
chain follows the busiest wafer.
"""

from __future__ import annotations

import simpy

from wss.model.components.links import Link
from wss.model.scenario.hardware import HardwareConfig

__all__ = ["SwarmX"]


class SwarmX:
    """The folded tree: ``down`` links root-to-leaf, ``up`` links leaf-to-root.

    The edge into each wafer runs at ``min(swarmx link, wafer I/O)``.  The
    edges between MemoryX and the root belong to MemoryX (its network ports).
    """

    def __init__(self, env: simpy.Environment, hw: HardwareConfig, capacity: int):
        sx = hw.swarmx
        self.levels = sx.levels(hw.wafers)
        self.nodes_per_level = sx.nodes_per_level(hw.wafers)
        edge = min(sx.link_bandwidth_Bps, hw.wafer.io_bandwidth_Bps)
        self.down: list[Link] = []
        self.up: list[Link] = []
        for level in range(1, self.levels + 1):
            bw = edge if level == self.levels else sx.link_bandwidth_Bps
            self.down.append(Link(env, f"swarmx.down.l{level}", bw, sx.hop_latency_s, capacity))
        for level in range(self.levels, 0, -1):
            bw = edge if level == self.levels else sx.link_bandwidth_Bps
            self.up.append(Link(env, f"swarmx.up.l{level}", bw, sx.hop_latency_s, capacity))
        for a, b in zip(self.down, self.down[1:]):
            a.connect(b.inbox)
        for a, b in zip(self.up, self.up[1:]):
            a.connect(b.inbox)

    def edges_below(self, level: int, wafers: int) -> int:
        """Number of physical edges leaving level ``level`` toward the wafers (level D: one per wafer)."""
        if level == self.levels:
            return wafers
        return self.nodes_per_level[level]  # children of level `level` are the nodes of level+1

    def processes(self):
        for link in self.down + self.up:
            yield link.run()
