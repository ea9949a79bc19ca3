"""Step 1: where each streamed kernel's non-zeros are.

Everything downstream (bytes on the wire, MemoryX state, cycles) depends on a
kernel's non-zero profile.  A profile is real (counted from a numerics mask),
dense, or sampled from an i.i.d. mask of the kernel's density.  Sampling is done
once per distinct (shape, density) with a generator seeded from the scenario
seed, the shape and the density, so equal kernels share one profile (and one
cycle count) and a profile does not depend on the rest of the model.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from wss.model.kernels.cycles import NnzProfile, dense_profile, sampled_profile
from wss.model.scenario import Scenario
from wss.model.workload import StreamedKernel

__all__ = ["kernel_profiles", "mask_rng"]


def kernel_profiles(
    scenario: Scenario, kernels: list[StreamedKernel], given: dict[str, NnzProfile] | None
) -> list[NnzProfile]:
    """The non-zero profile of every kernel, in kernel order.

    Parameters
    ----------
    scenario
        Supplies the seed of sampled profiles.
    kernels
        The streamed kernels of the model, in forward order.
    given
        Real profiles by kernel name (from numerics masks); kernels not named are dense or sampled.
    """
    sampled: dict[tuple[int, int, float], NnzProfile] = {}
    profiles = []
    for k in kernels:
        if given and k.name in given:
            prof = given[k.name]
        elif k.density >= 1.0:
            prof = dense_profile(k.out_features, k.in_features)
        else:
            shape = (k.out_features, k.in_features, k.density)
            if shape not in sampled:
                sampled[shape] = _sampled(k.out_features, k.in_features, k.density, scenario.seed, _density_key(k))
            prof = sampled[shape]
        profiles.append(prof)
    return profiles


def mask_rng(seed: int, k: StreamedKernel) -> np.random.Generator:
    """The generator of a kernel's sampled mask: the scenario seed, the shape, the density to 1e-9."""
    return np.random.default_rng([seed, k.out_features, k.in_features, _density_key(k)])


def _density_key(k: StreamedKernel) -> int:
    # int() kept: on numpy 1.x round() of a numpy float is not an int, and the seed list needs ints.
    return int(round(k.density * 1e9))  # noqa: RUF046


@lru_cache(maxsize=256)
def _sampled(out_features: int, in_features: int, density: float, seed: int, density_key: int) -> NnzProfile:
    """:func:`sampled_profile` drawn from :func:`mask_rng`'s generator, kept: a profile is a function of these
    alone, and a scenario is planned more than once (checked, then simulated; a sweep's points share shapes),
    each time drawing every feature's count again.  Its counts are read-only, as every plan shares them."""
    rng = np.random.default_rng([seed, out_features, in_features, density_key])
    prof = sampled_profile(out_features, in_features, density, rng)
    for counts in (prof.col_counts, prof.row_counts):
        if counts is not None:
            counts.setflags(write=False)
    return prof
