"""What each optimizer costs MemoryX per parameter.

State (capacity): fp32 scalars kept per parameter, the blog's count for Adam
being weight, gradient, m and v = 16 B (M. James, "Scaling Up and Out:
Training Massive Models on Cerebras Systems using Weight Streaming", Cerebras
blog, 2021: 100T parameters need 1.6 PB).  Traffic per update: scalars read
and written by the coprocessor, not counting the incoming gradient (it
arrives from SwarmX).  FLOPs per update: elementwise operations counted by
hand (a declared assumption):

* SGD: ``w -= lr * g`` -> 2;
* momentum: ``u = mu u + g`` (2), ``w -= lr u`` (2) -> 4;
* Adam: ``m = b1 m + (1-b1) g`` (3), ``v = b2 v + (1-b2) g^2`` (4),
  ``w -= lr m_hat / (sqrt(v_hat) + eps)`` with bias corrections folded into
  ``lr`` (5) -> 12;
* AdamW: Adam plus decoupled decay ``w -= lr wd w`` (2) -> 14;
* LAMB (You et al., "Large Batch Optimization for Deep Learning: Training
  BERT in 76 minutes", 2019, Algorithm 2): Adam's moments ``m`` (3) and
  ``v`` (4); the Adam ratio ``r = m_hat / (sqrt(v_hat) + eps)`` with the
  bias corrections folded in as for Adam (3: sqrt, add, divide); decoupled
  decay ``u = r + wd w`` (2); the two norms of the per-layer trust ratio,
  ``||w||^2`` and ``||u||^2`` accumulated (2 each); the update
  ``w -= (lr ||w|| / ||u||) u`` (2) -> 18.  The ratio needs both norms over
  the whole kernel before any weight changes, so the update is two passes:
  the first reads ``w, m, v``, writes ``m, v`` and ``u`` (into the gradient's
  slot, so the state stays Adam's 16 B), the second reads ``w`` and ``u``
  again and writes ``w``: 5 reads and 4 writes against Adam's 3 and 3.
  The per-kernel work (two square roots and a divide, and summing each
  shard's partial norms across MemoryX's shards) is a few scalars per
  kernel and not counted.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OptimizerCost", "OPTIMIZER_COSTS", "SCALAR_BYTES"]

#: MemoryX keeps master weights and optimizer state in fp32.
SCALAR_BYTES = 4


@dataclass(frozen=True)
class OptimizerCost:
    """Per-parameter cost of one optimizer in MemoryX."""

    state_scalars: int
    read_scalars: int
    write_scalars: int
    flops: float

    @property
    def state_bytes(self) -> int:
        return self.state_scalars * SCALAR_BYTES

    @property
    def moved_bytes(self) -> int:
        return (self.read_scalars + self.write_scalars) * SCALAR_BYTES


OPTIMIZER_COSTS: dict[str, OptimizerCost] = {
    "sgd": OptimizerCost(state_scalars=2, read_scalars=1, write_scalars=1, flops=2.0),
    "momentum": OptimizerCost(state_scalars=3, read_scalars=2, write_scalars=2, flops=4.0),
    "adam": OptimizerCost(state_scalars=4, read_scalars=3, write_scalars=3, flops=12.0),
    "adamw": OptimizerCost(state_scalars=4, read_scalars=3, write_scalars=3, flops=14.0),
    "lamb": OptimizerCost(state_scalars=4, read_scalars=5, write_scalars=4, flops=18.0),
}
