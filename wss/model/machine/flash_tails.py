"""Slow flash reads (``faults.flash``): a seeded fraction of MemoryX's prefetch reads take longer.

Flash has a latency tail: most reads complete at the device's rate, a few take many times as long
(garbage collection, read retries, a busy die).  With probability ``p`` a read takes ``f`` times its
time, so a stream bound by flash reads slows on average by ``1 + p (f - 1)``: 1.09 for 1% of reads 10x
slower.  The draws come from one :class:`numpy.random.Generator` keyed by the scenario's seed and this
stream, one per read in the order MemoryX issues them: the same scenario gives the same slow reads.
Only the prefetch's reads of flash-resident weights have the tail (not the optimizer's flash traffic).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from wss.model.scenario.faults import FlashConfig

__all__ = ["FLASH_STREAM", "flash_rng", "read_factors"]

#: The key of the flash tails' random stream under the scenario's seed.
FLASH_STREAM = 0x666C73


def flash_rng(seed: int) -> np.random.Generator:
    """The generator of the slow reads for a scenario's ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(FLASH_STREAM,)))


def read_factors(flash: FlashConfig, rng: np.random.Generator) -> Callable[[], float]:
    """A function giving the next read's factor on its time: ``tail_factor`` with ``tail_probability``, else 1."""
    p, f = flash.tail_probability, flash.tail_factor

    def factor() -> float:
        return f if rng.random() < p else 1.0

    return factor
