"""Step 3: MemoryX capacity and placement of every kernel's state in DRAM or flash.

Each kernel that owns its weights (tied weights live once, with their owner)
keeps its non-zeros' optimizer state and its mask in MemoryX.  If all of it
fits DRAM, everything is DRAM.  Otherwise a fraction of DRAM is kept to stage
flash prefetches and, in forward order, each kernel's state goes to DRAM if it
fits what is left of the rest, else to flash (a kernel is never split across
tiers).  A tied kernel is read from wherever its owner lives.
"""

from __future__ import annotations

from dataclasses import dataclass

from wss.model.components.optimizer_costs import OptimizerCost
from wss.model.kernels.cycles import NnzProfile
from wss.model.plan.formats import mask_bytes
from wss.model.plan.problems import fmt_bytes, infeasible
from wss.model.scenario import Scenario
from wss.model.workload import StreamedKernel

__all__ = ["Placement", "place_state", "state_owners", "kernel_state_bytes", "check_capacity", "assign_tiers"]


@dataclass(frozen=True)
class Placement:
    """Where each kernel's MemoryX state lives, and how full MemoryX is.

    Built once so the kernel records and the plan's MemoryX totals agree.

    Attributes
    ----------
    owners
        Per kernel, the index of the kernel whose state it uses (itself unless tied).
    state_bytes
        Per kernel, MemoryX bytes of its optimizer state and mask (0 for a tied kernel).
    tiers
        Per kernel, ``'dram'`` or ``'flash'`` (a tied kernel's is its owner's).
    total_bytes
        All state in MemoryX.
    dram_bytes, flash_bytes
        State in DRAM and in flash.
    staging_bytes
        DRAM kept to stage flash prefetches (0 when everything fits DRAM).
    """

    owners: list[int]
    state_bytes: list[float]
    tiers: list[str]
    total_bytes: float
    dram_bytes: float
    flash_bytes: float
    staging_bytes: float


def place_state(
    scenario: Scenario, kernels: list[StreamedKernel], profiles: list[NnzProfile], opt: OptimizerCost
) -> Placement:
    """Check MemoryX capacity and place every kernel's state.

    Parameters
    ----------
    scenario
        The scenario (MemoryX shape, the optimizer's name for messages).
    kernels, profiles
        The streamed kernels in forward order and their non-zero profiles.
    opt
        The optimizer's per-parameter cost (state bytes per non-zero).

    Raises
    ------
    InfeasibleError
        The state exceeds MemoryX, or the part that must live in flash exceeds flash.
    """
    owners = state_owners(kernels)
    state = kernel_state_bytes(kernels, profiles, owners, opt)
    total_state = float(sum(state))
    check_capacity(scenario, total_state, profiles, opt)
    tiers, staging = assign_tiers(scenario, state, total_state)
    tiers = [tiers[owners[i]] for i in range(len(tiers))]  # tied weights are read where their owner lives
    dram_used = sum(b for b, t in zip(state, tiers) if t == "dram")
    return Placement(
        owners=owners,
        state_bytes=state,
        tiers=tiers,
        total_bytes=total_state,
        dram_bytes=dram_used,
        flash_bytes=total_state - dram_used,
        staging_bytes=staging,
    )


def state_owners(kernels: list[StreamedKernel]) -> list[int]:
    """Per kernel, the index of the kernel that owns its weights: the one it is tied to, else itself."""
    index_of = {k.name: i for i, k in enumerate(kernels)}
    return [index_of[k.tied_to] if k.tied_to is not None else i for i, k in enumerate(kernels)]


def kernel_state_bytes(
    kernels: list[StreamedKernel], profiles: list[NnzProfile], owners: list[int], opt: OptimizerCost
) -> list[float]:
    """Per kernel, MemoryX bytes of optimizer state and mask; tied weights live (and are updated) once."""
    return [
        p.nnz * opt.state_bytes + mask_bytes(k, p) if owners[i] == i else 0
        for i, (k, p) in enumerate(zip(kernels, profiles))
    ]


def check_capacity(scenario: Scenario, total_state: float, profiles: list[NnzProfile], opt: OptimizerCost) -> None:
    """Raise :class:`~wss.errors.InfeasibleError` when the state exceeds MemoryX's DRAM and flash together."""
    mx = scenario.hardware.memoryx
    if total_state > mx.capacity_bytes:
        raise infeasible(
            scenario,
            "hardware.memoryx",
            f"the model needs {fmt_bytes(total_state)} in MemoryX ({sum(p.nnz for p in profiles):.4g} "
            f"non-zero weights x {opt.state_bytes} B of {scenario.training.optimizer} state) but MemoryX holds "
            f"{fmt_bytes(mx.capacity_bytes)} ({mx.shards} shards x "
            f"({fmt_bytes(mx.dram_capacity_bytes)} DRAM + {fmt_bytes(mx.flash_capacity_bytes)} flash))",
        )


def assign_tiers(scenario: Scenario, state: list[float], total_state: float) -> tuple[list[str], float]:
    """Per kernel, the tier its own state goes to, and the DRAM kept for flash staging.

    Everything is DRAM if it fits.  Otherwise, in forward order (the first kernels are the ones the
    iteration boundary waits for), a kernel goes to DRAM while it fits the DRAM left after staging.
    Raises :class:`~wss.errors.InfeasibleError` when what goes to flash exceeds flash.
    """
    mx = scenario.hardware.memoryx
    if total_state <= mx.dram_total_bytes:
        return ["dram"] * len(state), 0.0
    staging = mx.dram_total_bytes * mx.prefetch_buffer_fraction
    budget = mx.dram_total_bytes - staging
    tiers = []
    for b in state:
        if b <= budget:
            tiers.append("dram")
            budget -= b
        else:
            tiers.append("flash")
    flash_used = sum(b for b, t in zip(state, tiers) if t == "flash")
    if flash_used > mx.flash_total_bytes:
        raise infeasible(
            scenario,
            "hardware.memoryx",
            f"{fmt_bytes(flash_used)} must live in flash (DRAM keeps "
            f"{mx.prefetch_buffer_fraction:.0%} for prefetch staging) but flash holds "
            f"{fmt_bytes(mx.flash_total_bytes)}",
        )
    return tiers, staging
