"""Compute jitter: a random factor on each wafer's compute in each step (``faults.jitter``).

Real wafers do not take exactly the same time for the same work (clock and power management, the
host's timing, contention on the input path).  Every wafer waits for the lock-step broadcast and
reduction, so a step lasts as long as its slowest wafer: with ``N`` wafers and a factor ``X`` per
wafer, a compute-bound step's compute takes ``max(X_1, ..., X_N)`` times as long, whose mean grows
with ``N`` although each ``X`` has mean 1.

The factors come from one :class:`numpy.random.Generator` keyed by the scenario's seed and this
stream (never a global seed), drawn step by step for every wafer: the same scenario gives the same
factors, byte for byte.
"""

from __future__ import annotations

import numpy as np

from wss.model.scenario.faults import JitterConfig

__all__ = ["JITTER_STREAM", "jitter_rng", "compute_factors"]

#: The key of the jitter's random stream under the scenario's seed (other streams use other keys).
JITTER_STREAM = 0x6A6974


def jitter_rng(seed: int) -> np.random.Generator:
    """The generator of the jitter's factors for a scenario's ``seed``."""
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(JITTER_STREAM,)))


def compute_factors(jitter: JitterConfig, rng: np.random.Generator, wafers: int, steps: int) -> np.ndarray:
    """Factors of shape ``(wafers, steps)``: lognormal of mean 1, ``exp(N(-sigma^2 / 2, sigma^2))``,
    drawn one step at a time for every wafer."""
    sigma = jitter.sigma
    return rng.lognormal(mean=-0.5 * sigma * sigma, sigma=sigma, size=(steps, wafers)).T
