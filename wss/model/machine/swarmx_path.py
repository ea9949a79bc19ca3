"""The way between MemoryX and a wafer through the SwarmX tree: its depth, its nodes and each level's rate.

The tree is balanced over the wafers (``hardware.swarmx``: ``levels`` and ``nodes_per_level`` give its
shape).  Every level's links run at a SwarmX link's rate but the last: the edge into a wafer runs no
faster than the wafer's I/O, so it is the slower of the two (``edge_Bps``).  The simulated tree takes
these as its settings, the planner and the analytic level price the stream with them, and the views
name the wafer's edge with them: one statement of each.
"""

from __future__ import annotations

from dataclasses import dataclass

from wss.model.scenario import HardwareConfig

__all__ = ["SwarmXPath", "swarmx_path", "edge_Bps"]


def edge_Bps(hw: HardwareConfig) -> float:
    """The wafer's edge: a SwarmX link into the wafer, no faster than the wafer's I/O."""
    return min(hw.swarmx.link_bandwidth_Bps, hw.wafer.io_bandwidth_Bps)


@dataclass(frozen=True)
class SwarmXPath:
    """One wafer's way through the tree: the levels root first, their rates, the hop latency, the port buffers."""

    depth: int
    nodes_per_level: tuple[int, ...]  # root first
    link_Bps: float  # a link between SwarmX levels
    edge_Bps: float  # the last level's link into a wafer
    hop_latency_s: float
    port_buffer_bytes: int

    @property
    def level_Bps(self) -> tuple[float, ...]:
        """Each level's rate going down, root first: the last is the wafer's edge."""
        return tuple(self.edge_Bps if level == self.depth else self.link_Bps for level in range(1, self.depth + 1))


def swarmx_path(hw: HardwareConfig) -> SwarmXPath:
    """The tree over ``hw.wafers`` wafers, as every wafer's way through it sees it."""
    sx = hw.swarmx
    return SwarmXPath(
        depth=sx.levels(hw.wafers),
        nodes_per_level=tuple(sx.nodes_per_level(hw.wafers)),
        link_Bps=sx.link_bandwidth_Bps,
        edge_Bps=edge_Bps(hw),
        hop_latency_s=sx.hop_latency_s,
        port_buffer_bytes=sx.port_buffer_bytes,
    )
