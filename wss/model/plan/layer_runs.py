"""Runs of identical transformer blocks: what layer folding (:mod:`wss.model.folding.layer_fold`) may fold.

The plan finds them once; the program then leaves out the middle of each run and the simulation
repeats a measured block in its place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from wss.model.plan.micro_batching import FOLD_MIN_COPIES, FOLDED_PREFIX
from wss.model.workload import StreamedKernel

if TYPE_CHECKING:
    from wss.model.plan.types import Plan

__all__ = ["BlockRun", "block_runs"]


@dataclass(frozen=True)
class BlockRun:
    """Consecutive identical blocks ``lo .. hi`` (inclusive) long enough to fold, of which ``settle`` are simulated
    at each end: the first ``settle - 2`` of them let the run settle, the next two are compared
    (:mod:`wss.model.folding.layer_fold`).  :data:`FOLDED_PREFIX` at first; more where wafers that differ fill the
    buffers between them over more blocks than that (:mod:`wss.model.folding.ladder`).

    ``lead`` more blocks are simulated at the low end (where the forward passes start), the last two of them
    compared there: none at first; more where a later step's forward passes start behind the previous step's
    update backlog and repeat only once it has drained (:mod:`wss.model.folding.ladder`).

    ``forward_lead`` more blocks again are simulated there in the forward passes only: their backward passes are
    among the backward fold's copies.  None at first; more where wafers that differ settle later in the forward
    passes than in the backward ones, in a run of one simulated step (:mod:`wss.model.folding.ladder`): the backward
    passes simulate after their copies only what they need to run on from the state the copies end in, and no
    later step streams a block forward waiting for an update its folded backward pass never made."""

    lo: int
    hi: int
    settle: int = FOLDED_PREFIX
    lead: int = 0
    forward_lead: int = 0

    @property
    def head(self) -> int:
        """Blocks simulated at the low end in the forward passes: ``settle``, the ``lead`` and the
        ``forward_lead``."""
        return self.settle + self.lead + self.forward_lead

    def low_end(self, direction: str) -> int:
        """Blocks simulated at the low end in the ``direction``'s passes ("forward" or "backward"): the
        :attr:`head` in the forward passes, all but the ``forward_lead`` of it in the backward ones."""
        return self.head if direction == "forward" else self.settle + self.lead

    def copies_in(self, direction: str) -> int:
        """Blocks of the run whose ``direction``'s passes are not simulated (the copies of that fold point)."""
        return self.hi - self.lo + 1 - self.settle - self.low_end(direction)

    def dropped_in(self, direction: str) -> range:
        """The blocks whose ``direction``'s passes are not simulated."""
        return range(self.lo + self.low_end(direction), self.hi - self.settle + 1)

    @property
    def copies(self) -> int:
        """Blocks of the run that neither direction simulates."""
        return self.copies_in("forward")

    @property
    def dropped(self) -> range:
        """The blocks that neither direction simulates."""
        return self.dropped_in("forward")


def block_runs(plan: Plan) -> tuple[BlockRun, ...]:
    """The runs of consecutive identical blocks worth folding (at least :data:`FOLD_MIN_COPIES` copies).

    Two blocks are identical when their ops match position by position in everything but their names:
    each streamed kernel's chunks, bytes, tiers of its MemoryX state, non-zeros and cycles, and each
    non-weight op's seconds; and the blocks are adjacent in the op order (nothing runs between them).
    Sampled sparsity masks give every kernel its own non-zero count, so sparse blocks rarely match.
    """
    positions: dict[int, list[int]] = {}
    for pos, op in enumerate(plan.ops):
        if op.block is not None:
            positions.setdefault(op.block, []).append(pos)
    order = sorted(positions)
    tokens = sorted({t for (_, t) in plan.wafer_op_seconds} | {t for k in plan.kernels for t in k.cycles})
    runs: list[BlockRun] = []
    start = 0
    for i in range(1, len(order) + 1):
        same = (i < len(order) and positions[order[i]][0] == positions[order[i - 1]][-1] + 1
                and _signature(plan, positions[order[i]], tokens) == _signature(plan, positions[order[i - 1]], tokens))
        if not same:
            lo, hi = order[start], order[i - 1]
            if hi - lo + 1 - 2 * FOLDED_PREFIX >= FOLD_MIN_COPIES and hi - lo == i - 1 - start:
                runs.append(BlockRun(lo, hi))
            start = i
    return tuple(runs)


#: An op's fields that name it (and differ from block to block) rather than say what it does.
_NAMES = frozenset({"name", "layer", "block"})


def _signature(plan: Plan, positions: list[int], tokens: list[int]) -> tuple:
    """Everything about a block's ops that the simulation reads (at micro-batches of ``tokens``), without
    their names."""
    out: list[tuple] = []
    for pos in positions:
        op = plan.ops[pos]
        bare = (type(op), *(v for k, v in vars(op).items() if k not in _NAMES))
        if isinstance(op, StreamedKernel):
            k = plan.kernels[plan.kernel_of_op[pos]]
            out.append((bare, k.n_chunks, k.stream_bytes, k.grad_bytes, k.read_bytes, k.tier, k.state_tiers,
                        k.nnz, k.sparse_format, k.owns_state, plan.shares_accumulator(k.index),
                        tuple(sorted(k.cycles.items()))))
        else:
            out.append((bare, tuple(plan.wafer_op_seconds.get((pos, t)) for t in tokens)))
    return tuple(out)
