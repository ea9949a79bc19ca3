"""MemoryX's aggregate rates: the number of shards times the slowest shard's rate.

Every MemoryX shard holds an even slice of every kernel (its weights, gradient accumulator and
optimizer state), and a chunk of the stream is one slice from every shard: it is ready when the
slowest shard has read and sent its slice, and an update is done when the slowest shard has applied
its own.  So with one shard at factor ``f`` of a rate (``faults.shards``), the stream, the gradient
intake, the optimizer and the checkpoint copy all go at ``shards x f x`` that rate, as if every shard
were as slow.  The simulation folds the shards into one part at these rates (docs/faults.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from wss.model.scenario import Scenario

__all__ = ["MemoryXRates", "memoryx_rates"]


@dataclass(frozen=True)
class MemoryXRates:
    """MemoryX's shards together: bytes/s, and the optimizer's FLOP/s."""

    dram_Bps: float
    flash_read_Bps: float
    flash_write_Bps: float
    network_Bps: float
    optimizer_flops: float


def memoryx_rates(scenario: Scenario) -> MemoryXRates:
    """The shards' rates added up, each at the slowest shard's (``faults.shards``)."""
    mx = scenario.hardware.memoryx
    slowest = scenario.faults.slowest_shard()
    n = mx.shards
    return MemoryXRates(
        dram_Bps=n * mx.dram_bandwidth_Bps * slowest["dram"],
        flash_read_Bps=n * mx.flash_read_bandwidth_Bps * slowest["flash"],
        flash_write_Bps=n * mx.flash_write_bandwidth_Bps * slowest["flash"],
        network_Bps=n * mx.network_bandwidth_Bps * slowest["network"],
        optimizer_flops=n * mx.optimizer_flops * slowest["optimizer"],
    )
