"""Data-parallel training exactly as the weight-streaming cluster does it.

One step:

1. MemoryX streams the fp32 master weights, cast to ``stream_dtype``; SwarmX
   broadcasts the same stream to every wafer.
2. The step's global batch is split into one shard per wafer, consecutive
   samples, each wafer taking the share the timing gives it
   (:func:`~wss.model.scenario.shards.placed_split`: where the batch does not
   divide, the larger shares spread over the tree); each wafer runs forward
   and backward on its shard
   with the :mod:`wss.model.kernels.gemm` fast path, micro-batch by micro-batch,
   accumulating gradients.  The loss is the mean softmax cross-entropy over
   the *global* batch, so a wafer's gradient is its shard's summed gradient
   divided by the global batch size.
3. SwarmX sums the wafer gradients (and loss sums) up its fan-out tree in a
   fixed order (:func:`~wss.model.numerics.swarmx.tree_reduce`).
4. With a ``max_gradient_norm``, MemoryX scales the step's summed gradients
   by one factor from their global norm (:func:`clip_global_norm`).
5. MemoryX's optimizer updates the fp32 masters, non-zeros only, so the mask
   never changes; the step's loss goes to the user node.
"""

from __future__ import annotations

import math

import numpy as np
from threadpoolctl import threadpool_limits

from wss.model.kernels.sparse_format import SparseWeights
from wss.model.numerics.data import STREAM_EVAL, STREAM_INIT, STREAM_TRAIN, make_task, stream_rng
from wss.model.numerics.model import ShardResult, forward_backward, init_weights, predict
from wss.model.numerics.optimizers import make_optimizer
from wss.model.numerics.precision import as_streamed
from wss.model.numerics.spec import NumericsOutcome, NumericsSpec
from wss.model.numerics.swarmx import tree_reduce
from wss.model.scenario.shards import placed_split

__all__ = ["train", "wafer_step", "evaluate", "initial_weights"]


def initial_weights(spec: NumericsSpec) -> tuple[SparseWeights, ...]:
    """The pruned fp32 initial masters of ``spec``."""
    rng = stream_rng(spec.seed, STREAM_INIT)
    return init_weights(spec.layer_sizes, spec.densities, spec.activation, spec.prune, rng)


def wafer_step(
    streamed: tuple[SparseWeights, ...],
    x: np.ndarray,
    labels: np.ndarray,
    global_batch: int,
    micro_batches: int,
    activation: str,
) -> ShardResult:
    """One wafer's work on its shard: micro-batches with gradient accumulation.

    Micro-batch results are added in order, so the accumulated gradient is the
    shard's summed gradient up to rounding, scaled by ``1 / global_batch``.
    """
    total = None
    parts = zip(np.array_split(x, micro_batches, axis=1), np.array_split(labels, micro_batches), strict=True)
    for xm, ym in parts:
        r = forward_backward(streamed, xm, ym, 1.0 / global_batch, activation)
        if total is None:
            total = r
        else:
            grads = tuple(a + b for a, b in zip(total.grads, r.grads, strict=True))
            total = ShardResult(total.loss_sum + r.loss_sum, total.n_correct + r.n_correct, grads)
    assert total is not None  # array_split gives at least one part
    return total


def train(spec: NumericsSpec) -> NumericsOutcome:
    """Train ``spec``'s network for ``spec.steps`` steps; deterministic in ``spec``.

    BLAS runs single-threaded here: a threaded GEMM splits its sums by the
    machine's core count, so results would differ in the last bits from one
    machine to another (and the small matrices of these networks gain nothing
    from threads; under load they lose ~10x).
    """
    with threadpool_limits(limits=1):
        return _train(spec)


def clip_global_norm(grads: list[np.ndarray], max_norm: float) -> list[np.ndarray]:
    """The gradients scaled so that their global L2 norm is at most ``max_norm``, as PyTorch's
    ``clip_grad_norm_`` does (factor ``max_norm / (norm + 1e-6)``, never above 1)."""
    norm = float(np.sqrt(math.fsum(float(np.dot(g.ravel(), g.ravel())) for g in grads)))
    factor = max_norm / (norm + 1e-6)
    if factor >= 1.0:
        return grads
    return [g * np.float32(factor) for g in grads]


def _train(spec: NumericsSpec) -> NumericsOutcome:
    task = make_task(spec)
    structure = initial_weights(spec)
    masters = [np.array(w.values, dtype=np.float32) for w in structure]  # MemoryX, fp32
    optimizer = make_optimizer(
        spec.optimizer, spec.learning_rate, spec.momentum, spec.betas, spec.eps, spec.weight_decay
    )
    states = [optimizer.init_state(w.nnz) for w in structure]
    losses, accuracies = [], []
    shards = placed_split(spec.global_batch, spec.wafers, spec.fan_out, spec.cut_off)  # each wafer's samples
    for step in range(spec.steps):
        streamed = tuple(
            as_streamed(w.with_values(v), spec.stream_dtype) for w, v in zip(structure, masters, strict=True)
        )
        x, labels = task.batch(spec.seed, STREAM_TRAIN, step, spec.global_batch)
        # The batch splits over the wafers the tree reaches; a wafer cut off has no result, and the tree's
        # sums skip it (its node adds the children it has).
        results: list = [None] * spec.wafers
        start = 0
        for w, n in enumerate(shards):
            if w not in spec.cut_off:
                results[w] = wafer_step(streamed, x[:, start:start + n], labels[start:start + n], spec.global_batch,
                                        spec.micro_batches, spec.activation)
            start += n
        loss_sum = tree_reduce([r and r.loss_sum for r in results], spec.fan_out)
        n_correct = tree_reduce([r and r.n_correct for r in results], spec.fan_out)
        losses.append(loss_sum / spec.global_batch)
        accuracies.append(n_correct / spec.global_batch)
        grads = [tree_reduce([r and r.grads[layer] for r in results], spec.fan_out).astype(np.float32, copy=False)
                 for layer in range(len(masters))]
        if spec.max_gradient_norm is not None:
            grads = clip_global_norm(grads, spec.max_gradient_norm)
        for values, state, grad in zip(masters, states, grads, strict=True):
            optimizer.update(values, grad, state)
    final = tuple(w.with_values(v) for w, v in zip(structure, masters, strict=True))
    return NumericsOutcome(
        spec=spec,
        losses=tuple(losses),
        accuracies=tuple(accuracies),
        final_weights=final,
        masks=tuple(w.mask for w in final),
        col_nnz=tuple(w.col_nnz() for w in final),
        row_nnz=tuple(w.row_nnz() for w in final),
    )


def evaluate(spec: NumericsSpec, weights: tuple[SparseWeights, ...], n_samples: int = 2048) -> tuple[float, float]:
    """Mean loss and accuracy of ``weights`` on a held-out batch of ``spec``'s task.

    The batch comes from its own random stream, never used for training.
    """
    x, labels = make_task(spec).batch(spec.seed, STREAM_EVAL, 0, n_samples)
    logits = predict(weights, x, spec.activation).astype(np.float64)
    shifted = logits - logits.max(axis=0, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=0, keepdims=True))
    loss = float(-log_probs[labels, np.arange(n_samples)].mean())
    accuracy = float(np.mean(np.argmax(logits, axis=0) == labels))
    return loss, accuracy
