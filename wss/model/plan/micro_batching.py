"""Step 2: the global batch across wafers, and each wafer's share in micro-batches that fit activation SRAM.

A wafer keeps the activations of a micro-batch in SRAM between its forward and
backward pass.  This step chooses the checkpointing mode (``'auto'``: keep
everything if one sample fits, else keep only transformer-block inputs), the
largest micro-batch that fits (or checks the one asked for), cuts the busiest
wafer's samples into micro-batches with the remainder last, and picks the
micro-batches the SimPy run executes when identical middle ones are folded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wss.model.plan.formats import WeightStream
from wss.model.plan.problems import fmt_bytes, infeasible
from wss.model.scenario import PRECISION_BYTES, Scenario
from wss.model.workload import Op, StreamedKernel, WaferOp

__all__ = [
    "FOLD_MIN_COPIES",
    "FOLDED_PREFIX",
    "MicroBatching",
    "wafer_samples",
    "retained_weight_bytes",
    "plan_micro_batching",
    "choose_checkpointing",
    "micro_batch_samples",
    "simulated_micro_batches",
    "activation_elements_per_token",
]

#: Fold only when it removes at least this many micro-batches per step.
FOLD_MIN_COPIES = 2
#: Micro-batches simulated when folding: 0 and 1 settle after the iteration boundary, 2 and 3 are
#: compared to prove the period, the last one carries the update.
FOLDED_PREFIX = 4


@dataclass(frozen=True)
class MicroBatching:
    """How the busiest wafer's samples of one step are cut into micro-batches, and the SRAM that takes.

    The plan copies these fields; the kernel step costs each distinct micro-batch size
    (:attr:`token_counts`) once.

    Attributes
    ----------
    checkpointing
        ``'none'`` or ``'blocks'``: the mode chosen or asked for.
    micro_batches
        Samples per micro-batch on the busiest wafer: full ones, the remainder last.
    simulated
        Indices of the micro-batches the SimPy run executes (all of them unless folded).
    tokens_per_sample
        Tokens of one sample.
    sram_bytes_needed
        Activation SRAM the largest micro-batch needs (retained output-layer weights included).
    sram_bytes_available
        Activation SRAM of one wafer.
    """

    checkpointing: str
    micro_batches: list[int]
    simulated: list[int]
    tokens_per_sample: int
    sram_bytes_needed: float
    sram_bytes_available: float

    @property
    def token_counts(self) -> list[int]:
        """The distinct token counts of the micro-batches, ascending."""
        return sorted({m * self.tokens_per_sample for m in self.micro_batches})


def wafer_samples(global_batch: int, wafers: int) -> list[int]:
    """Samples on each wafer: the global batch split as evenly as possible, the larger shares first."""
    return [len(a) for a in np.array_split(np.arange(global_batch), wafers)]


def retained_weight_bytes(scenario: Scenario, kernels: list[StreamedKernel], streams: list[WeightStream]) -> float:
    """SRAM the output layer's streamed weights take when ``training.retain_output_layer`` keeps them on the wafer."""
    retained = 0.0
    if scenario.training.retain_output_layer:
        retained = sum(st.stream_bytes for k, st in zip(kernels, streams) if k.is_output)
    return retained


def plan_micro_batching(scenario: Scenario, ops: list[Op], retained: float, busiest: int, fold: bool) -> MicroBatching:
    """Checkpointing mode, micro-batches and simulated micro-batches of the busiest wafer.

    Parameters
    ----------
    scenario
        The scenario (training settings, the wafer's SRAM, the folding switch).
    ops
        The model's operations in forward order.
    retained
        SRAM bytes taken by retained output-layer weights (:func:`retained_weight_bytes`).
    busiest
        Samples on the busiest wafer.
    fold
        Allow folding (``simulation.fold_micro_batches`` must also be on).

    Raises
    ------
    InfeasibleError
        One sample does not fit in any allowed mode, or the micro-batch asked for does not fit.
    """
    seq = scenario.seq_len
    mode, per_token = choose_checkpointing(scenario, ops, retained)
    mb = micro_batch_samples(scenario, per_token, retained, busiest)
    n_mb = math.ceil(busiest / mb)
    # Gradient accumulation: full micro-batches, the remainder last (so the middle ones are identical).
    micro_batches = [mb] * (n_mb - 1) + [busiest - mb * (n_mb - 1)]
    return MicroBatching(
        checkpointing=mode,
        micro_batches=micro_batches,
        simulated=simulated_micro_batches(n_mb, fold and scenario.simulation.fold_micro_batches),
        tokens_per_sample=seq,
        sram_bytes_needed=per_token * seq * max(micro_batches) + retained,
        sram_bytes_available=scenario.hardware.wafer.activation_sram_bytes,
    )


def choose_checkpointing(scenario: Scenario, ops: list[Op], retained: float) -> tuple[str, float]:
    """The first allowed checkpointing mode in which one sample fits, and its activation bytes per token.

    ``'auto'`` tries ``'none'`` then ``'blocks'``; ``'blocks'`` is skipped for a model without blocks.
    Raises :class:`~wss.errors.InfeasibleError` naming the last mode tried when none fits.
    """
    tr, wafer = scenario.training, scenario.hardware.wafer
    seq = scenario.seq_len
    act_b = PRECISION_BYTES[tr.activation_precision]
    available = wafer.activation_sram_bytes
    modes = ["none", "blocks"] if tr.activation_checkpointing == "auto" else [tr.activation_checkpointing]
    has_blocks = any(op.block is not None for op in ops)
    for mode in modes:
        if mode == "blocks" and not has_blocks:
            continue
        per_token = activation_elements_per_token(ops, mode) * act_b
        need_one = per_token * seq + retained
        if need_one <= available:
            return mode, per_token
    mode = modes[-1] if has_blocks else "none"
    per_token = activation_elements_per_token(ops, mode) * act_b
    raise infeasible(
        scenario,
        "training.micro_batch",
        f"activations of one sample need {fmt_bytes(per_token * seq + retained)} of wafer SRAM "
        f"(checkpointing '{mode}') but {fmt_bytes(available)} is available "
        f"({wafer.name}: {fmt_bytes(wafer.sram_bytes)} less "
        f"{wafer.sram_reserved_fraction:.0%} reserved)",
    )


def micro_batch_samples(scenario: Scenario, per_token: float, retained: float, busiest: int) -> int:
    """Samples per micro-batch: the most that fit SRAM (``'auto'``) or the number asked for, at most ``busiest``.

    Raises :class:`~wss.errors.InfeasibleError` when the micro-batch asked for does not fit.
    """
    tr = scenario.training
    seq = scenario.seq_len
    available = scenario.hardware.wafer.activation_sram_bytes
    max_mb = int((available - retained) // (per_token * seq))
    if tr.micro_batch == "auto":
        return max(1, min(busiest, max_mb))
    mb = min(tr.micro_batch, busiest)
    if mb > max_mb:
        raise infeasible(
            scenario,
            "training.micro_batch",
            f"a micro-batch of {mb} samples needs {fmt_bytes(per_token * seq * mb + retained)} of "
            f"wafer SRAM but {fmt_bytes(available)} is available; at most {max_mb} fit",
        )
    return mb


def simulated_micro_batches(n_mb: int, fold: bool) -> list[int]:
    """Indices of the micro-batches the SimPy run executes out of ``n_mb``.

    All of them, unless folding is on and removes at least :data:`FOLD_MIN_COPIES`: then the
    first :data:`FOLDED_PREFIX` and the last (the others repeat the measured period).
    """
    if fold and n_mb - (FOLDED_PREFIX + 1) >= FOLD_MIN_COPIES:
        return list(range(FOLDED_PREFIX)) + [n_mb - 1]
    return list(range(n_mb))


def activation_elements_per_token(ops: list[Op], mode: str) -> float:
    """Activation elements per token that must be resident in SRAM at the peak.

    ``'none'`` keeps every op's stored activations; ``'blocks'`` keeps those outside blocks, each
    block's input and, at the peak, one block's stored activations while it is recomputed.  Both add
    the largest working set of a non-weight op.
    """
    working = max((op.working_elements_per_token for op in ops if isinstance(op, WaferOp)), default=0)
    if mode == "none":
        return sum(op.stored_elements_per_token for op in ops) + working
    per_block: dict[int, int] = {}
    outside = 0
    block_inputs = 0
    for op in ops:
        if op.block is None:
            outside += op.stored_elements_per_token
        else:
            per_block[op.block] = per_block.get(op.block, 0) + op.stored_elements_per_token
    for op in ops:  # a checkpointed block keeps only its input: the width entering its first kernel
        if isinstance(op, StreamedKernel) and op.block is not None and op.name.endswith(".qkv"):
            block_inputs += op.in_features
    return outside + block_inputs + max(per_block.values(), default=0) + working
