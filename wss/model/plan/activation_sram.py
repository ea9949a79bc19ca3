"""Activation SRAM: what a wafer holds of one micro-batch at the busiest moment of its forward and backward pass.

This is the one statement of the activation SRAM a micro-batch needs.  The planner's candidates
(:mod:`~wss.model.plan.micro_batching`) are the micro-batches it admits, the plan records it
(``Plan.sram_bytes_needed``, the Result's ``memory.wafer_sram_activation_bytes`` that ``wss check``
compares) and the refusal of a micro-batch that does not fit quotes it; the analytic level and the
simulator time the candidates it admits.

What is kept, per token (each op's ``stored_elements_per_token``, :mod:`wss.model.workload.builder`):

* a streamed matmul keeps its **input**, not its output: the weight gradient is the input times the
  output's gradient and the input's gradient is the weights times it ("the original input activations
  are still resident from the forward pass", Cerebras, "Scaling Up and Out", 2021); attention keeps Q,
  K, V and its softmax statistics and recomputes the scores (Dao et al., "FlashAttention", 2022), its
  output being the next matmul's input; norms and GELU keep their inputs.  Per GPT block this is
  ``16 d`` elements per token, the count of Korthikanti et al., "Reducing Activation Recomputation in
  Large Transformer Models" (2022), without dropout masks and without the ``s x s`` scores;
* in ``training.activation_precision`` (2 bytes for fp16 and bf16: mixed precision keeps activations
  in half precision, Micikevicius et al., "Mixed Precision Training", 2018; 4 bytes for fp32).

When it is kept: **the peak over the schedule**, not the sum of everything any op ever holds.  A tensor
lives from the op that makes it to the backward of the op that reads it, and memory whose lifetimes do
not overlap is shared (Chen et al., "Training Deep Nets with Sublinear Memory Cost", 2016: liveness
analysis of the training graph).  :func:`activation_peak` walks the forward pass op by op and the
backward pass in reverse, and at each op counts what is live there:

* ``'none'``: the stored activations of every op whose backward is still to come, and the op's own
  working set (the loss's logits, only while the loss runs);
* ``'blocks'``: the stored activations of ops outside blocks still to come, every block input not yet
  freed (a block's input is freed once its backward is done), and in the block being run (forward) or
  recomputed (backward) its stored activations up to the op, freed op by op as its backward proceeds;
* ``'offload'``: as ``'blocks'``, with at most two block inputs on the wafer: the current block's and
  the next one's (leaving in the forward pass, arriving for its recompute in the backward pass), as the
  simulated wafer sends and receives them (``Wafer._offload``).

So the loss's working set and a block's recompute are not counted together: they never are live at once.
The activation gradients flowing backward (one or two op widths per token at a time) are not counted;
they are scratch, inside the SRAM that ``wafer.sram_reserved_fraction`` sets aside (an ASSUMPTION, as that
fraction itself is).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from wss.model.machine.figures import block_input_bytes_per_token
from wss.model.scenario import PRECISION_BYTES, Scenario
from wss.model.workload import Op, StreamedKernel, WaferOp

__all__ = ["ActivationPeak", "activation_peak", "activation_elements_per_token", "activation_bytes_per_element",
           "block_input_widths", "offloaded_block_inputs"]


@dataclass(frozen=True)
class ActivationPeak:
    """The most activation elements per token live at one point of a micro-batch's schedule, and where.

    Attributes
    ----------
    elements_per_token
        Elements per token live at the peak (times the micro-batch's tokens and the bytes per element:
        the SRAM it needs).
    where
        The point of the schedule, e.g. ``'the forward pass of head.softmax_loss'``.
    """

    elements_per_token: float
    where: str


def activation_bytes_per_element(scenario: Scenario) -> int:
    """Bytes of one stored activation: ``training.activation_precision`` (fp16 and bf16 2, fp32 4)."""
    return PRECISION_BYTES[scenario.training.activation_precision]


def activation_elements_per_token(ops: list[Op], mode: str) -> float:
    """Activation elements per token live at the peak of the schedule in checkpointing ``mode``."""
    return activation_peak(ops, mode).elements_per_token


def activation_peak(ops: list[Op], mode: str) -> ActivationPeak:
    """The peak over the schedule of ``ops`` (forward order) in checkpointing mode ``'none'``, ``'blocks'`` or
    ``'offload'`` (the module docstring says what is live where); the first point of the peak on a tie."""
    best = ActivationPeak(0.0, "nowhere")
    for live, phase, op in _live_points(ops, mode):
        if live > best.elements_per_token:
            best = ActivationPeak(live, f"the {phase} pass of {op.name}")
    return best


def _live_points(ops: list[Op], mode: str) -> Iterator[tuple[float, str, Op]]:
    """Elements per token live at each op of the forward pass, then of the backward pass (reversed)."""
    widths = block_input_widths(ops)
    checkpointed = mode != "none"
    order = sorted(widths)  # the blocks in forward order
    prev = {b: order[i - 1] for i, b in enumerate(order) if i > 0}

    def inputs(b: int | None, started: list[int]) -> float:
        """Block inputs on the wafer at block ``b`` (None: outside blocks) with the blocks ``started``."""
        if mode == "blocks":
            return float(sum(widths.get(x, 0) for x in started))
        held = [b] if b is not None and b in widths else []
        if started and started[-1] != b:  # after the last block: its input, still leaving or already arriving
            held = [started[-1]]
        elif b in prev:
            held.append(prev[b])  # the one before: leaving (forward) or arriving for its recompute (backward)
        return float(sum(widths.get(x, 0) for x in held))

    kept = 0.0  # stored activations that wait for their backward ('none': all; else: those outside blocks)
    in_block = 0.0  # the stored activations of the block being run or recomputed, up to the op
    started: list[int] = []
    for op in ops:
        if checkpointed and op.block is not None:
            if not started or started[-1] != op.block:
                started.append(op.block)
                in_block = 0.0
            in_block += op.stored_elements_per_token
        else:
            kept += op.stored_elements_per_token
            in_block = 0.0 if checkpointed else in_block
        held = inputs(op.block, started) + in_block if checkpointed else 0.0
        yield kept + held + _working(op), "forward", op
    current: int | None = None
    for op in reversed(ops):
        if checkpointed and op.block is not None:
            if op.block != current:  # its recompute: every stored activation of the block comes back
                current = op.block
                in_block = sum(o.stored_elements_per_token for o in ops if o.block == current)
                started = started[: started.index(current) + 1]
            held = inputs(current, started) + in_block
            in_block -= op.stored_elements_per_token
        else:
            if checkpointed and current is not None:  # before the first block: every block's backward is done
                started = []
            held = inputs(None, started) if checkpointed else 0.0
        yield kept + held + _working(op), "backward", op
        if not (checkpointed and op.block is not None):
            kept -= op.stored_elements_per_token


def _working(op: Op) -> float:
    """Elements per token alive only while ``op`` runs (a streamed kernel has none: its output is the next
    op's to keep)."""
    return float(op.working_elements_per_token) if isinstance(op, WaferOp) else 0.0


def block_input_widths(ops: list[Op]) -> dict[int, int]:
    """Each block's input width (features per token): what a checkpointed block keeps, or offloads.

    The width entering the block's first streamed kernel applied to every token (its ``qkv``, or the
    first kernel of a block without attention; not a DiT block's adaLN linear, which reads the
    conditioning vector once per sample).
    """
    widths: dict[int, int] = {}
    for op in ops:
        if isinstance(op, StreamedKernel) and op.block is not None and op.block not in widths \
                and op.tokens_per_input == 1:
            widths[op.block] = op.in_features
    return widths


def offloaded_block_inputs(scenario: Scenario, ops: list[Op]) -> dict[int, float]:
    """With activation offload: the op position starting each block -> its input's bytes per token (what the
    block's forward pass sends out of the wafer and its recompute reads back).  The program's offload and the
    analytic level's returns both read this one statement."""
    per_token = block_input_bytes_per_token(scenario, block_input_widths(ops))
    starts: dict[int, int] = {}
    for pos, op in enumerate(ops):
        if op.block is not None:
            starts.setdefault(op.block, pos)
    return {pos: per_token[b] for b, pos in starts.items() if b in per_token}
