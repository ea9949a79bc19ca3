"""MemoryX's DRAM as one bandwidth that every user shares.

The weight stream reads master weights (or flash-staged chunks) from DRAM,
the gradient intake writes the summed gradients that arrive from SwarmX,
flash prefetch writes staged chunks, and the optimizer reads and writes the
DRAM-resident state; with ``hardware.activation_store.location: memoryx`` the
offloaded block inputs of every wafer land there and are read back too.  They
all draw on the same memory, so :class:`SharedDram` serves transfers by
processor sharing (:class:`~wss.model.components.shared_bandwidth.SharedBandwidth`).
"""

from __future__ import annotations

import simpy

from wss.model.components.shared_bandwidth import SharedBandwidth

__all__ = ["SharedDram"]


class SharedDram(SharedBandwidth):
    """MemoryX's DRAM bandwidth (all shards together), shared fairly by the transfers in progress."""

    def __init__(self, env: simpy.Environment, bandwidth_Bps: float, name: str = "memoryx.dram"):
        super().__init__(env, bandwidth_Bps, name)
