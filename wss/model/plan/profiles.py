"""Step 1: where each streamed kernel's non-zeros are.

Everything downstream (bytes on the wire, MemoryX state, cycles) depends on a
kernel's non-zero profile.  A profile is real (counted from a numerics mask),
dense, or sampled from an i.i.d. mask of the kernel's density.  Sampling is done
once per distinct (shape, density) with a generator seeded from the scenario
seed, the shape and the density, so equal kernels share one profile (and one
cycle count) and a profile does not depend on the rest of the model.
"""

from __future__ import annotations

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
                sampled[shape] = sampled_profile(k.out_features, k.in_features, k.density, mask_rng(scenario.seed, k))
            prof = sampled[shape]
        profiles.append(prof)
    return profiles


def mask_rng(seed: int, k: StreamedKernel) -> np.random.Generator:
    """The generator of a kernel's sampled mask: the scenario seed, the shape, the density to 1e-9."""
    # int() kept: on numpy 1.x round() of a numpy float is not an int, and the seed list needs ints.
    density_key = int(round(k.density * 1e9))  # noqa: RUF046
    return np.random.default_rng([seed, k.out_features, k.in_features, density_key])
