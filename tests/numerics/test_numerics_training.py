"""Training end to end: learning, sparsity, optimizers, determinism, spec checks."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from wss.model.numerics import NumericsSpec, evaluate, initial_weights, train
from wss.model.numerics.data import make_task
from wss.model.numerics.optimizers import SGD, Adam, Momentum, make_optimizer


def _mean(xs):
    return float(np.mean(xs))


def test_fc_mnist_network_learns():
    spec = NumericsSpec(
        layer_sizes=(784, 256, 256, 10),
        densities=(0.5, 0.5, 0.5),
        optimizer="adam",
        learning_rate=1e-3,
        global_batch=64,
        wafers=2,
        steps=150,
        seed=0,
    )
    out = train(spec)
    assert len(out.losses) == len(out.accuracies) == 150
    assert _mean(out.losses[:10]) > 1.8  # starts near log(10)
    assert _mean(out.losses[-20:]) < 0.6 * _mean(out.losses[:10])
    held_out_loss, held_out_accuracy = evaluate(spec, out.final_weights)
    assert held_out_accuracy > 0.5  # chance is 0.1
    assert held_out_loss < 1.2


@pytest.mark.parametrize("dataset", ["teacher", "gaussian_mixture"])
@pytest.mark.parametrize(
    ("optimizer", "lr"), [("sgd", 0.2), ("momentum", 0.05), ("adam", 3e-3), ("adamw", 3e-3), ("lamb", 0.02)]
)
def test_each_optimizer_decreases_loss(optimizer, lr, dataset):
    spec = NumericsSpec(
        layer_sizes=(64, 32, 5),
        densities=(0.7, 0.9),
        optimizer=optimizer,
        learning_rate=lr,
        weight_decay=0.01 if optimizer in ("adamw", "lamb") else 0.0,
        global_batch=64,
        wafers=2,
        steps=80,
        dataset=dataset,
        seed=1,
    )
    out = train(spec)
    assert _mean(out.losses[-10:]) < 0.75 * _mean(out.losses[:5])
    assert _mean(out.accuracies[-10:]) > 0.4  # chance is 0.2


def test_sparse_weights_stay_sparse():
    spec = NumericsSpec(
        # 2% takes the sparse (padded) kernel path, 30% the dense one.
        layer_sizes=(784, 128, 10), densities=(0.02, 0.3), prune="magnitude", optimizer="adamw",
        weight_decay=0.1, global_batch=32, steps=20, wafers=3,
    )
    start = initial_weights(spec)
    out = train(spec)
    for w0, w, mask, cols, rows in zip(start, out.final_weights, out.masks, out.col_nnz, out.row_nnz, strict=True):
        np.testing.assert_array_equal(mask, w0.mask)  # the mask never changes
        assert w.nnz == round(w0.density * w.shape[0] * w.shape[1])
        dense = w.to_dense()
        assert np.all(dense[~mask] == 0.0)
        assert not np.array_equal(w.values, w0.values)  # but the kept weights trained
        np.testing.assert_array_equal(cols, mask.sum(axis=0))
        np.testing.assert_array_equal(rows, mask.sum(axis=1))
        assert w.values.dtype == np.float32


def test_magnitude_pruning_keeps_the_largest_initial_draws():
    spec = NumericsSpec(layer_sizes=(30, 20, 4), densities=(0.25, 0.5), prune="magnitude", steps=0)
    for w in initial_weights(spec):
        kept = np.abs(w.values)
        assert kept.min() >= np.abs(w.to_dense()[~w.mask]).max()  # pruned entries are 0 now
        assert w.nnz == round(w.density * w.mask.size)


def test_initial_scale_is_he_after_pruning():
    spec = NumericsSpec(densities=(0.1, 0.5, 1.0))
    weights = initial_weights(spec)
    gains = (2.0, 2.0, 1.0)
    for w, gain in zip(weights, gains, strict=True):
        per_output = np.bincount(w.row_ids(), weights=w.values.astype(np.float64) ** 2, minlength=w.shape[0])
        # Scaled to the gain exactly in float64, then stored as float32: each square is off by at most 2^-23.
        assert per_output.mean() == pytest.approx(gain, rel=2**-23)


def test_training_is_deterministic():
    spec = NumericsSpec(layer_sizes=(784, 64, 10), densities=(0.3, 1.0), global_batch=40, wafers=3,
                        steps=5, stream_dtype="float16", seed=11)
    a, b = train(spec), train(spec)
    assert a.losses == b.losses and a.accuracies == b.accuracies
    for wa, wb in zip(a.final_weights, b.final_weights, strict=True):
        assert np.array_equal(wa.values, wb.values) and np.array_equal(wa.mask, wb.mask)
    c = train(replace(spec, seed=12))
    assert c.losses != a.losses


def test_tasks_are_balanced_enough_and_reproducible():
    for dataset in ("teacher", "gaussian_mixture"):
        spec = NumericsSpec(dataset=dataset)
        task = make_task(spec)
        x, labels = task.batch(spec.seed, 2, 0, 4000)
        assert x.shape == (784, 4000) and x.dtype == np.float32
        counts = np.bincount(labels, minlength=10)
        assert counts.min() > 0.03 * 4000
        x2, labels2 = make_task(spec).batch(spec.seed, 2, 0, 4000)
        assert np.array_equal(x, x2) and np.array_equal(labels, labels2)


def test_optimizer_updates():
    g = np.array([0.5, -2.0, 0.0], dtype=np.float32)
    w = np.array([1.0, 1.0, 1.0], dtype=np.float32)

    p = w.copy()
    SGD(0.1).update(p, g, {})
    np.testing.assert_allclose(p, w - 0.1 * g)

    opt, p = Momentum(0.1, 0.9), w.copy()
    state = opt.init_state(3)
    opt.update(p, g, state)
    opt.update(p, g, state)
    np.testing.assert_allclose(p, w - 0.1 * g - 0.1 * (0.9 * g + g), rtol=1e-6)

    opt, p = Adam(0.01), w.copy()
    state = opt.init_state(3)
    opt.update(p, g, state)  # first bias-corrected step is lr * sign(g)
    np.testing.assert_allclose(p, w - 0.01 * np.sign(g), rtol=1e-6)
    assert state["m"].dtype == state["v"].dtype == np.float32

    opt, p = make_optimizer("adamw", 0.01, weight_decay=0.5), w.copy()
    opt.update(p, g, opt.init_state(3))
    np.testing.assert_allclose(p, w * (1 - 0.01 * 0.5) - 0.01 * np.sign(g), rtol=1e-6)

    with pytest.raises(ValueError, match="float32"):
        SGD(0.1).update(w.astype(np.float64), g, {})
    with pytest.raises(ValueError, match="unknown"):
        make_optimizer("lars", 0.1)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"layer_sizes": (784,)}, "layer_sizes"),
        ({"layer_sizes": (10, 1)}, "layer_sizes"),
        ({"densities": (0.5,)}, "densities"),
        ({"densities": (0.5, 0.0, 1.0)}, "densities"),
        ({"activation": "gelu"}, "activation"),
        ({"optimizer": "lars"}, "optimizer"),
        ({"prune": "movement"}, "prune"),
        ({"dataset": "mnist"}, "dataset"),
        ({"stream_dtype": "int8"}, "stream_dtype"),
        ({"learning_rate": 0.0}, "learning_rate"),
        ({"global_batch": 0}, "global_batch"),
        ({"wafers": 0}, "wafers"),
        ({"micro_batches": 0}, "micro_batches"),
        ({"betas": (0.9, 1.0)}, "betas"),
        ({"fan_out": 1}, "fan_out"),
    ],
)
def test_spec_validation(kwargs, field):
    with pytest.raises(ValueError, match=field):
        NumericsSpec(**kwargs)


def test_spec_defaults():
    spec = NumericsSpec()
    assert spec.layer_sizes == (784, 256, 256, 10)
    assert spec.densities == (1.0, 1.0, 1.0)
    assert spec.n_classes == 10 and spec.n_layers == 3
    assert NumericsSpec(layer_sizes=[5, 4, 3], densities=[0.5, 1]).densities == (0.5, 1.0)
