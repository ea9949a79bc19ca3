"""The network a wafer runs: a stack of sparse dense layers.

Layer ``l`` computes ``z_l = W_l h_{l-1}`` with the sparse GEMM kernels of
:mod:`wss.model.kernels.gemm` (activations ``features x tokens``), then the hidden
non-linearity; the last layer's output is the logits of a softmax
cross-entropy loss.  There are no biases: every trainable parameter is a
streamed weight, which is what the wafer's sparse kernels and MemoryX's
per-non-zero optimizer state model.

Initialisation is He (Kaiming) normal for relu and LeCun normal for tanh, with
the scale set *after* pruning: each layer's kept weights are rescaled so that,
averaged over output features, ``sum_i W[m, i]^2`` equals the gain (2 for
relu, 1 for tanh; 1 for the logit layer, which has no non-linearity after it).
That keeps activations at unit scale whatever the density or pruning rule
(magnitude pruning keeps the large draws, random pruning does not) and starts
the loss near ``log(n_classes)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from wss.model.kernels import gemm
from wss.model.kernels.sparse_format import SparseWeights

__all__ = ["init_weights", "prune_mask", "ShardResult", "forward_backward", "predict"]

_GAIN = {"relu": 2.0, "tanh": 1.0}


def prune_mask(draw: np.ndarray, density: float, rule: str, rng: np.random.Generator) -> np.ndarray:
    """Unstructured mask keeping ``max(1, round(density * size))`` entries.

    ``rule="random"`` keeps uniformly random positions; ``"magnitude"`` keeps
    the largest ``|draw|`` (ties broken by position, deterministically).
    """
    size = draw.size
    keep = min(size, max(1, round(density * size)))
    if rule == "random":
        chosen = rng.choice(size, size=keep, replace=False)
    elif rule == "magnitude":
        chosen = np.argsort(-np.abs(draw).reshape(-1), kind="stable")[:keep]
    else:
        raise ValueError(f"prune: unknown rule {rule!r}")
    mask = np.zeros(size, dtype=bool)
    mask[chosen] = True
    return mask.reshape(draw.shape)


def init_weights(
    layer_sizes: tuple[int, ...],
    densities: tuple[float, ...],
    activation: str,
    prune: str,
    rng: np.random.Generator,
) -> tuple[SparseWeights, ...]:
    """Pruned, scale-corrected initial fp32 weights (see the module docstring)."""
    layers = []
    n_layers = len(layer_sizes) - 1
    for l, (n_in, n_out, density) in enumerate(zip(layer_sizes[:-1], layer_sizes[1:], densities, strict=True)):
        gain = 1.0 if l == n_layers - 1 else _GAIN[activation]
        draw = rng.standard_normal((n_out, n_in))
        mask = prune_mask(draw, density, prune, rng)
        kept_sq = float(np.sum(draw[mask] ** 2))
        scale = np.sqrt(gain * n_out / kept_sq) if kept_sq > 0 else 0.0
        layers.append(SparseWeights.from_mask(mask, (draw * scale).astype(np.float32)))
    return tuple(layers)


def _activate(z: np.ndarray, activation: str) -> np.ndarray:
    return np.maximum(z, 0) if activation == "relu" else np.tanh(z)


def _activation_grad(z: np.ndarray, h: np.ndarray, activation: str) -> np.ndarray:
    return (z > 0).astype(z.dtype) if activation == "relu" else 1 - h * h


def _forward(
    weights: Sequence[SparseWeights], x: np.ndarray, activation: str
) -> tuple[np.ndarray, list[np.ndarray], list[np.ndarray]]:
    """Logits plus the (pre-activation, activation) pairs backward needs."""
    inputs, pre = [x], []
    h = x
    for l, W in enumerate(weights):
        z = gemm.forward(W, h)
        pre.append(z)
        if l < len(weights) - 1:
            h = _activate(z, activation)
            inputs.append(h)
    return pre[-1], inputs, pre


def predict(weights: tuple[SparseWeights, ...], x: np.ndarray, activation: str) -> np.ndarray:
    """Class scores (logits), ``n_classes x samples``."""
    return _forward(weights, x, activation)[0]


@dataclass(frozen=True)
class ShardResult:
    """What one wafer sends up for its shard.

    Attributes
    ----------
    loss_sum
        Sum of the per-sample cross-entropies (not the mean: the user node
        divides the tree-reduced sum by the global batch).
    n_correct
        Samples whose largest logit is the label.
    grads
        Per layer, the gradient of ``grad_scale * loss_sum`` on the mask, in
        ``W.values`` order.
    """

    loss_sum: float
    n_correct: int
    grads: tuple[np.ndarray, ...]


def forward_backward(
    weights: tuple[SparseWeights, ...],
    x: np.ndarray,
    labels: np.ndarray,
    grad_scale: float,
    activation: str,
) -> ShardResult:
    """Forward, softmax cross-entropy and backward on one shard of samples.

    Parameters
    ----------
    weights
        The weights as streamed (any float dtype; fp16 computes in fp32, fp64
        in fp64 for the gradient check).
    x
        ``in_features x n`` inputs.
    labels
        ``n`` class indices.
    grad_scale
        Multiplies the gradient of the summed loss; ``1 / global_batch`` makes
        the tree-reduced gradients those of the mean over the global batch.
    activation
        Hidden non-linearity.
    """
    logits, inputs, pre = _forward(weights, x, activation)
    n = logits.shape[1]
    cols = np.arange(n)
    shifted = logits - logits.max(axis=0, keepdims=True) if n else logits
    log_norm = np.log(np.exp(shifted).sum(axis=0, keepdims=True))
    log_probs = shifted - log_norm
    loss_sum = float(-log_probs[labels, cols].sum(dtype=np.float64))
    n_correct = int(np.count_nonzero(np.argmax(logits, axis=0) == labels)) if n else 0

    delta = np.exp(log_probs)  # d(loss_sum)/d(logits) = softmax - onehot
    delta[labels, cols] -= 1
    delta *= delta.dtype.type(grad_scale)
    grads: list[np.ndarray] = [np.empty(0)] * len(weights)  # every entry is set below
    for l in range(len(weights) - 1, -1, -1):
        grads[l] = gemm.backward_weight(weights[l], inputs[l], delta)
        if l > 0:  # the wafer does not propagate deltas into the data
            delta = gemm.backward_data(weights[l], delta) * _activation_grad(pre[l - 1], inputs[l], activation)
    return ShardResult(loss_sum, n_correct, tuple(grads))
