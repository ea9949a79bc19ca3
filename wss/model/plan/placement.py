"""Step 3: MemoryX capacity and placement of every kernel's state, component by component, in DRAM or flash.

Each kernel that owns its weights (tied weights live once, with their owner)
keeps three state components in MemoryX: its fp32 master weights with its
sparsity mask, its fp32 gradient accumulator, and the optimizer's moments
(:data:`~wss.model.machine.optimizer_costs.STATE_COMPONENTS`).  If all of
it fits DRAM, everything is DRAM.  Otherwise DRAM is filled hottest first:
every kernel's weights (read by both stream passes of every micro-batch),
then the gradient accumulators (touched by every micro-batch's
accumulation), then the moments (touched once per step by the update), each
in forward order (the first kernels are the ones the iteration boundary
waits for), first fit; what does not fit goes to flash.  MemoryX uses DRAM
and flash "in a hybrid fashion" (Cerebras, overview of the MemoryX service);
which state goes where is not published, so hottest-first, forward order and
first fit are ASSUMPTIONS of wss: the placement a runtime that knows the
access pattern would choose.  A share of DRAM
(``prefetch_buffer_fraction``) is kept to stage flash prefetches only when
some kernel's weights live in flash, since only streamed weights are
prefetched; flash-resident gradients and moments are read by the optimizer
over the flash channel directly.  A tied kernel is read from wherever its
owner's components live.
"""

from __future__ import annotations

from dataclasses import dataclass

from wss.model.kernels.cycles import NnzProfile
from wss.model.machine.optimizer_costs import SCALAR_BYTES, STATE_COMPONENTS, OptimizerCost, StateTiers
from wss.model.plan.formats import mask_bytes
from wss.model.plan.problems import fmt_bytes, infeasible
from wss.model.scenario import Scenario
from wss.model.workload import StreamedKernel

__all__ = [
    "Placement", "place_state", "state_owners", "component_bytes", "check_capacity",
    "assign_tiers",
]


@dataclass(frozen=True)
class Placement:
    """Where each kernel's MemoryX state lives, and how full MemoryX is.

    Built once so the kernel records and the plan's MemoryX totals agree.

    Attributes
    ----------
    owners
        Per kernel, the index of the kernel whose state it uses (itself unless tied).
    state_bytes
        Per kernel, MemoryX bytes of its state and mask (0 for a tied kernel).
    component_tiers
        Per kernel, the tier of each state component (a tied kernel's are its owner's).
    component_bytes
        Per state component, bytes in ``'dram'`` and in ``'flash'`` (for results and views).
    total_bytes
        All state in MemoryX.
    dram_bytes, flash_bytes
        State in DRAM and in flash.
    staging_bytes
        DRAM kept to stage flash prefetches (0 unless some weights live in flash).
    """

    owners: list[int]
    state_bytes: list[float]
    component_tiers: list[StateTiers]
    component_bytes: dict[str, dict[str, float]]
    total_bytes: float
    dram_bytes: float
    flash_bytes: float
    staging_bytes: float

    @property
    def tiers(self) -> list[str]:
        """Per kernel, where its weights live: the tier its stream passes read."""
        return [t.weights for t in self.component_tiers]


def place_state(
    scenario: Scenario, kernels: list[StreamedKernel], profiles: list[NnzProfile], opt: OptimizerCost,
    accumulates: bool = True,
) -> Placement:
    """Check MemoryX capacity and place every kernel's state components.

    Parameters
    ----------
    scenario
        The scenario (MemoryX shape, the optimizer's name for messages).
    kernels, profiles
        The streamed kernels in forward order and their non-zero profiles.
    opt
        The optimizer's per-parameter cost (state scalars per non-zero).
    accumulates
        Whether gradients accumulate over micro-batches: then the accumulators are hotter than the moments
        and go to DRAM first; with one micro-batch per step they are idle (but for tied weights) and go last.

    Raises
    ------
    InfeasibleError
        The state exceeds MemoryX, or the part that must live in flash exceeds flash.
    """
    owners = state_owners(kernels)
    parts = component_bytes(kernels, profiles, owners, opt)
    state = [sum(p.values()) for p in parts]
    total_state = float(sum(state))
    check_capacity(scenario, total_state, profiles, opt)
    order = STATE_COMPONENTS if accumulates else ("weights", "moments", "gradient")
    own_tiers, staging = assign_tiers(scenario, parts, total_state, order)
    tiers = [own_tiers[owners[i]] for i in range(len(own_tiers))]  # tied weights live where their owner's do
    by_component = {c: {"dram": 0.0, "flash": 0.0} for c in STATE_COMPONENTS}
    for p, t in zip(parts, own_tiers):
        for c in STATE_COMPONENTS:
            by_component[c][t.of(c)] += p[c]
    dram_used = sum(v["dram"] for v in by_component.values())
    return Placement(
        owners=owners,
        state_bytes=state,
        component_tiers=tiers,
        component_bytes=by_component,
        total_bytes=total_state,
        dram_bytes=dram_used,
        flash_bytes=total_state - dram_used,
        staging_bytes=staging,
    )


def state_owners(kernels: list[StreamedKernel]) -> list[int]:
    """Per kernel, the index of the kernel that owns its weights: the one it is tied to, else itself."""
    index_of = {k.name: i for i, k in enumerate(kernels)}
    return [index_of[k.tied_to] if k.tied_to is not None else i for i, k in enumerate(kernels)]


def component_bytes(
    kernels: list[StreamedKernel], profiles: list[NnzProfile], owners: list[int], opt: OptimizerCost
) -> list[dict[str, float]]:
    """Per kernel, MemoryX bytes of each state component: fp32 weights with the mask, the fp32 gradient
    accumulator, the moments (all 0 for a tied kernel, whose state is its owner's)."""
    out = []
    for i, (k, p) in enumerate(zip(kernels, profiles)):
        if owners[i] != i:
            out.append(dict.fromkeys(STATE_COMPONENTS, 0.0))
            continue
        scalars = opt.component_scalars()
        parts = {c: float(p.nnz * SCALAR_BYTES * scalars[c]) for c in STATE_COMPONENTS}
        parts["weights"] += mask_bytes(k, p)
        out.append(parts)
    return out


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


def assign_tiers(
    scenario: Scenario, parts: list[dict[str, float]], total_state: float,
    order: tuple[str, ...] = STATE_COMPONENTS,
) -> tuple[list[StateTiers], float]:
    """Per kernel, the tier of each of its own state components, and the DRAM kept for flash staging.

    Everything is DRAM if it fits.  Otherwise components fill DRAM hottest first (all weights, then
    all gradient accumulators, then all moments), each in forward order, first fit.  Staging is kept
    only when some weights must go to flash.  Raises :class:`~wss.errors.InfeasibleError` when what
    goes to flash exceeds flash.
    """
    mx = scenario.hardware.memoryx
    if total_state <= mx.dram_total_bytes:
        return [StateTiers() for _ in parts], 0.0
    tiers, flash_used = _fill_dram(parts, mx.dram_total_bytes, order)
    staging = 0.0
    if any(t.weights == "flash" for t in tiers):
        staging = mx.dram_total_bytes * mx.prefetch_buffer_fraction
        tiers, flash_used = _fill_dram(parts, mx.dram_total_bytes - staging, order)
    if flash_used > mx.flash_total_bytes:
        kept = f" (DRAM keeps {mx.prefetch_buffer_fraction:.0%} for prefetch staging)" if staging else ""
        raise infeasible(
            scenario,
            "hardware.memoryx",
            f"{fmt_bytes(flash_used)} must live in flash{kept} but flash holds {fmt_bytes(mx.flash_total_bytes)}",
        )
    return tiers, staging


def _fill_dram(parts: list[dict[str, float]], budget: float, order: tuple[str, ...]) -> tuple[list[StateTiers], float]:
    """Components into a DRAM ``budget`` in ``order`` (hottest first), first fit; the rest to flash."""
    where: list[dict[str, str]] = [{} for _ in parts]
    flash_used = 0.0
    for c in order:
        for i, p in enumerate(parts):
            if p[c] <= budget:
                where[i][c] = "dram"
                budget -= p[c]
            else:
                where[i][c] = "flash"
                flash_used += p[c]
    return [StateTiers(**w) for w in where], flash_used
