"""The layer-by-layer schedule as a flat list of passes.

For every simulated step and micro-batch (all of them, unless folded): forward over the operations 1..L, then
backward L..1 (the loss is the last forward operation); with layer folding, the blocks in the middle of a
run of identical ones are left out (:mod:`wss.model.folding.layer_fold`).  With block
checkpointing, the backward of a transformer block is preceded by a
recompute of its forward.  The same list drives MemoryX (which streams the
streamed passes in this order) and the wafer (which executes all of them in
this order), so both agree on what comes next without talking.

Only the forward pass of a kernel in micro-batch 0 of step ``s > 0`` waits
for the kernel's update from step ``s - 1``: later micro-batches and the
backward pass use the same (not yet updated) weights.  That wait is the
iteration-boundary bubble.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wss.model.machine.figures import offload_chunks
from wss.model.plan import Plan
from wss.model.plan.activation_sram import offloaded_block_inputs
from wss.model.workload import StreamedKernel

__all__ = ["Pass", "build_program", "gradient_passes", "updated_kernels", "offload_bytes_per_token", "chunk_passes"]


@dataclass(frozen=True)
class Pass:
    """One operation executed once: a kernel or wafer op, in one phase of one micro-batch."""

    index: int
    step: int
    micro_batch: int
    op: int
    phase: str  # "forward", "recompute" or "backward"
    kernel: int | None
    streamed: bool
    waits_for_update: bool
    tokens: int


def build_program(plan: Plan) -> list[Pass]:
    """Every pass of the run, in execution order."""
    ops = plan.ops
    retain = plan.scenario.training.retain_output_layer
    blocks: dict[int, list[int]] = {}
    for pos, op in enumerate(ops):
        if op.block is not None:
            blocks.setdefault(op.block, []).append(pos)
    recompute = plan.checkpointing in ("blocks", "offload")
    out: list[Pass] = []

    def add(step: int, mb: int, pos: int, phase: str, tokens: int) -> None:
        op = ops[pos]
        kernel = plan.kernel_of_op.get(pos)
        streamed = isinstance(op, StreamedKernel) and not (phase == "backward" and retain and op.is_output)
        waits = kernel is not None and phase == "forward" and mb == 0 and step > 0
        out.append(Pass(len(out), step, mb, pos, phase, kernel, streamed, waits, tokens))

    for step in range(plan.simulated_steps):
        for mb in plan.simulated_micro_batches:
            tokens = plan.micro_batches[mb] * plan.tokens_per_sample
            # The middle of each folded run of identical blocks is left out (wss.model.folding.layer_fold).
            dropped_fw, dropped_bw = plan.dropped_in("forward", mb), plan.dropped_in("backward", mb)
            forward = [pos for pos, op in enumerate(ops) if op.block not in dropped_fw]
            backward = [pos for pos, op in enumerate(ops) if op.block not in dropped_bw]
            for pos in forward:
                add(step, mb, pos, "forward", tokens)
            seen: set[int] = set()
            for pos in reversed(backward):
                b = ops[pos].block
                if recompute and b is not None and b not in seen:
                    seen.add(b)
                    for rpos in blocks[b]:
                        add(step, mb, rpos, "recompute", tokens)
                add(step, mb, pos, "backward", tokens)
    return out


def gradient_passes(program: Sequence[Pass]) -> dict[tuple[int, int, int], int]:
    """(kernel, step, micro-batch) -> the index of the backward pass that sends that kernel's gradient."""
    return {(p.kernel, p.step, p.micro_batch): p.index for p in program
            if p.phase == "backward" and p.kernel is not None}


def updated_kernels(program: Sequence[Pass]) -> set[int]:
    """Kernels whose gradient the program sends in the last micro-batch (and so updates): with layer folding, not
    those left out (a micro-batch whose every block runs may send theirs earlier, to accumulate)."""
    last = max((p.micro_batch for p in program), default=0)
    return {p.kernel for p in program if p.kernel is not None and p.phase == "backward" and p.micro_batch == last}


def offload_bytes_per_token(plan: Plan) -> dict[int, float]:
    """With activation offload: the op position starting each block -> its input's bytes per token (what
    the block's forward pass sends out of the wafer and its recompute reads back)."""
    if plan.checkpointing != "offload":
        return {}
    return offloaded_block_inputs(plan.scenario, plan.ops)


def chunk_passes(plan: Plan, program: Sequence[Pass]) -> tuple[int, int]:
    """The chunk passes a run of ``program`` makes on one wafer's path: (weight chunks, offloaded activation
    chunks).

    Each streamed pass moves its kernel's chunks (down, and in a backward pass as many gradient chunks up
    beside them); with activation offload each block's forward sends its input out and its recompute reads
    it back, in chunks of :func:`~wss.model.machine.figures.offload_chunk_bytes`.  This is the run's work
    after folding: the program lists only the passes simulated.
    """
    weights = 0
    for p in program:
        if p.streamed and p.kernel is not None:
            weights += plan.kernels[p.kernel].n_chunks
    offload = offload_bytes_per_token(plan)
    chunk_bytes = plan.scenario.simulation.chunk_bytes
    activations = sum(offload_chunks(offload[p.op] * p.tokens, chunk_bytes) for p in program
                      if p.op in offload and p.phase in ("forward", "recompute"))
    return weights, activations
