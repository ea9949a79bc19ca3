"""Step 4: what each op costs per micro-batch, and how each kernel's stream is chunked.

A streamed kernel gets its cycles for every distinct micro-batch token count
(from the sparse-GEMM cycle model), its stream cut into chunks of about
``simulation.chunk_bytes`` (at most ``simulation.max_chunks_per_kernel``, which
bounds the event count), and a :class:`~wss.model.plan.types.KernelPlan` that
gathers its bytes, tier and owner from the earlier steps.  A non-weight op gets
its forward and backward seconds at the wafer's sustained non-weight rate.
"""

from __future__ import annotations

import math

from wss.model.kernels.cycles import KernelCycles, NnzProfile, kernel_cycles
from wss.model.machine.optimizer_costs import SCALAR_BYTES
from wss.model.machine.release_rates import release_wafer
from wss.model.machine.wafer_rates import nonweight_flops
from wss.model.plan.formats import WeightStream
from wss.model.plan.placement import Placement
from wss.model.plan.types import KernelPlan
from wss.model.scenario import PRECISION_BYTES, Scenario, SimulationConfig, WaferConfig
from wss.model.workload import Op, StreamedKernel, WaferOp

__all__ = ["plan_kernels", "kernel_of_op", "cycles_by_tokens", "chunk_count", "wafer_op_seconds"]


def plan_kernels(
    scenario: Scenario,
    kernels: list[StreamedKernel],
    profiles: list[NnzProfile],
    streams: list[WeightStream],
    placement: Placement,
    token_counts: list[int],
) -> list[KernelPlan]:
    """The static figures of every streamed kernel, in forward order.

    Parameters
    ----------
    scenario
        The scenario (gradient precision, the wafer, chunking settings).
    kernels, profiles, streams
        The streamed kernels, their non-zero profiles and stream formats, in forward order.
    placement
        MemoryX state bytes, tiers and owners per kernel.
    token_counts
        The distinct token counts of a micro-batch; cycles are given for each.
    """
    b_g = PRECISION_BYTES[scenario.training.gradient_precision]
    cycles = cycles_by_tokens(kernels, profiles, token_counts, release_wafer(scenario.hardware))
    return [
        KernelPlan(
            kernel=k,
            index=ki,
            profile=p,
            sparse_format=st.sparse_format,
            stream_bytes=st.stream_bytes,
            grad_bytes=float(p.nnz * b_g),
            read_bytes=float(p.nnz * SCALAR_BYTES),
            state_bytes=float(placement.state_bytes[ki]),
            tier=placement.component_tiers[ki].weights,
            state_tiers=placement.component_tiers[ki],
            n_chunks=chunk_count(st.stream_bytes, scenario.simulation),
            cycles=cycles[ki],
            state_owner=placement.owners[ki],
        )
        for ki, (k, p, st) in enumerate(zip(kernels, profiles, streams))
    ]


def kernel_of_op(ops: list[Op]) -> dict[int, int]:
    """Position of each streamed kernel among the ops -> its index among the kernels."""
    positions = [pos for pos, op in enumerate(ops) if isinstance(op, StreamedKernel)]
    return {pos: ki for ki, pos in enumerate(positions)}


def cycles_by_tokens(
    kernels: list[StreamedKernel], profiles: list[NnzProfile], token_counts: list[int], wafer: WaferConfig
) -> list[dict[int, KernelCycles]]:
    """Per kernel, its cycles for each token count.

    Kernels that share a profile object, a kind, the share of the tokens they compute and their tokens per
    input (sampled profiles are shared per shape and density) are costed once and share the same dictionary.
    An expert of a mixture of experts is costed on its capacity of a micro-batch's tokens, a kernel applied
    once per sample on one input per sample (:meth:`StreamedKernel.computed_tokens`).
    """
    by_profile: dict[tuple[int, str, float, int], dict[int, KernelCycles]] = {}
    cycles = []
    for k, p in zip(kernels, profiles):
        cost_key = (id(p), k.kind, k.computed_share, k.tokens_per_input)
        if cost_key not in by_profile:
            by_profile[cost_key] = {t: kernel_cycles(k.kind, p, k.computed_tokens(t), wafer) for t in token_counts}
        cycles.append(by_profile[cost_key])
    return cycles


def chunk_count(stream_bytes: float, sim: SimulationConfig) -> int:
    """Chunks of one pass of a kernel: about ``chunk_bytes`` each, at least 1, at most ``max_chunks_per_kernel``."""
    return int(min(sim.max_chunks_per_kernel, max(1, math.ceil(stream_bytes / sim.chunk_bytes))))


def wafer_op_seconds(
    wafer: WaferConfig, ops: list[Op], token_counts: list[int]
) -> dict[tuple[int, int], tuple[float, float]]:
    """(op position, tokens) -> (forward, backward) seconds of each non-weight op, at the sustained non-weight rate."""
    rate = nonweight_flops(wafer)
    seconds = {}
    for pos, op in enumerate(ops):
        if isinstance(op, WaferOp):
            for t in token_counts:
                f = op.flops_per_token * t
                seconds[(pos, t)] = (f / rate, f * op.backward_factor / rate)
    return seconds
