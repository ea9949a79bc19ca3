"""The per-wafer forward/backward against finite differences (float64 path)."""

from __future__ import annotations

import numpy as np
import pytest

from wss.model.numerics.model import forward_backward, init_weights


def _loss(weights, x, labels, scale, activation):
    return scale * forward_backward(weights, x, labels, scale, activation).loss_sum


@pytest.mark.parametrize("activation", ["relu", "tanh"])
@pytest.mark.parametrize("prune", ["random", "magnitude"])
def test_gradients_match_central_differences(activation, prune):
    rng = np.random.default_rng(5)
    sizes, densities = (12, 9, 7, 4), (0.6, 0.7, 0.8)
    weights = tuple(w.astype(np.float64) for w in init_weights(sizes, densities, activation, prune, rng))
    x = rng.standard_normal((sizes[0], 10))
    labels = rng.integers(0, sizes[-1], size=10)
    scale = 1 / 10
    result = forward_backward(weights, x, labels, scale, activation)
    assert all(g.dtype == np.float64 for g in result.grads)
    h = 1e-6
    for layer, W in enumerate(weights):
        numeric = np.empty(W.nnz)
        for k in range(W.nnz):
            plus, minus = W.values.copy(), W.values.copy()
            plus[k] += h
            minus[k] -= h
            up = weights[:layer] + (W.with_values(plus),) + weights[layer + 1 :]
            down = weights[:layer] + (W.with_values(minus),) + weights[layer + 1 :]
            numeric[k] = (_loss(up, x, labels, scale, activation) - _loss(down, x, labels, scale, activation)) / (2 * h)
        np.testing.assert_allclose(result.grads[layer], numeric, rtol=1e-5, atol=1e-8)


def test_loss_and_accuracy_of_a_known_case():
    # One identity layer: the logits are the inputs.
    from wss.model.kernels.sparse_format import SparseWeights

    W = SparseWeights.from_dense(np.eye(3))
    x = np.array([[2.0, 0.0], [0.0, 0.0], [0.0, 1.0]])
    labels = np.array([0, 1])
    r = forward_backward((W,), x, labels, 0.5, "relu")
    expected = -np.log(np.exp(2) / (np.exp(2) + 2)) - np.log(1 / (2 + np.e))
    assert r.loss_sum == pytest.approx(expected, rel=1e-12)  # float64 throughout
    assert r.n_correct == 1
    softmax = np.exp(x) / np.exp(x).sum(axis=0)
    onehot = np.eye(3)[:, labels]
    np.testing.assert_allclose(r.grads[0], 0.5 * np.diag((softmax - onehot) @ x.T))
