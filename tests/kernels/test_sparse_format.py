"""SparseWeights: construction, queries, casts and validation."""

from __future__ import annotations

import numpy as np
import pytest

from wss.model.kernels.sparse_format import SparseWeights


def _random(rng, shape=(6, 9), density=0.4, dtype=np.float32):
    mask = rng.random(shape) < density
    return SparseWeights.from_mask(mask, rng.standard_normal(shape).astype(dtype)), mask


def test_from_dense_round_trip_and_csr_order():
    dense = np.array([[0.0, 2.0, 0.0, 3.0], [0.0, 0.0, 0.0, 0.0], [1.0, 0.0, 5.0, 0.0]], dtype=np.float32)
    W = SparseWeights.from_dense(dense)
    assert W.shape == (3, 4)
    np.testing.assert_array_equal(W.values, [2.0, 3.0, 1.0, 5.0])
    np.testing.assert_array_equal(W.indices, [1, 3, 0, 2])
    np.testing.assert_array_equal(W.indptr, [0, 2, 2, 4])
    np.testing.assert_array_equal(W.mask, dense != 0)
    np.testing.assert_array_equal(W.to_dense(), dense)
    assert W.to_dense().dtype == np.float32
    assert W.nnz == 4 and W.density == pytest.approx(4 / 12)
    np.testing.assert_array_equal(W.row_nnz(), [2, 0, 2])
    np.testing.assert_array_equal(W.col_nnz(), [1, 1, 1, 1])
    np.testing.assert_array_equal(W.row_ids(), [0, 0, 2, 2])
    np.testing.assert_array_equal(W.flat_indices(), np.flatnonzero(dense))


def test_explicit_mask_keeps_stored_zeros():
    dense = np.array([[0.0, 1.0], [2.0, 0.0]])
    mask = np.array([[True, True], [False, False]])
    W = SparseWeights.from_dense(dense, mask)
    assert W.nnz == 2
    np.testing.assert_array_equal(W.values, [0.0, 1.0])
    np.testing.assert_array_equal(W.to_dense(), [[0.0, 1.0], [0.0, 0.0]])
    assert W.values.dtype == np.float64


def test_from_mask_accepts_zero_one_integers():
    W = SparseWeights.from_mask(np.array([[1, 0], [0, 1]]), np.ones((2, 2)))
    np.testing.assert_array_equal(W.mask, [[True, False], [False, True]])


def test_counts_match_mask(rng):
    W, mask = _random(rng, (30, 17), 0.3)
    np.testing.assert_array_equal(W.row_nnz(), mask.sum(axis=1))
    np.testing.assert_array_equal(W.col_nnz(), mask.sum(axis=0))
    assert W.nnz == mask.sum()
    assert W.indices.dtype in (np.int32, np.int64) and W.indptr.dtype == W.indices.dtype


def test_empty_and_full_matrices():
    empty = SparseWeights.from_dense(np.zeros((0, 5), dtype=np.float32))
    assert empty.shape == (0, 5) and empty.nnz == 0 and empty.density == 0.0
    assert empty.to_dense().shape == (0, 5)
    np.testing.assert_array_equal(empty.col_nnz(), np.zeros(5))
    full = SparseWeights.from_mask(np.ones((3, 2), bool), np.arange(6.0).reshape(3, 2))
    assert full.density == 1.0
    np.testing.assert_array_equal(full.to_dense(), np.arange(6.0).reshape(3, 2))


def test_astype_float16_shares_structure(rng):
    W, _ = _random(rng)
    half = W.astype(np.float16)
    assert half.values.dtype == np.float16
    assert np.shares_memory(half.indices, W.indices) and np.shares_memory(half.indptr, W.indptr)
    assert np.shares_memory(half.mask, W.mask)
    np.testing.assert_array_equal(half.values, W.values.astype(np.float16))
    assert W.astype(np.float32) is W
    with pytest.raises(ValueError, match="floating"):
        W.astype(np.int32)


def test_with_values(rng):
    W, _ = _random(rng)
    new = W.with_values(np.arange(W.nnz, dtype=np.float32))
    np.testing.assert_array_equal(new.values, np.arange(W.nnz))
    assert np.shares_memory(new.indices, W.indices)
    np.testing.assert_array_equal(new.mask, W.mask)
    with pytest.raises(ValueError, match="new_values"):
        W.with_values(np.zeros(W.nnz + 1))
    with pytest.raises(ValueError, match="floating"):
        W.with_values(np.zeros(W.nnz, dtype=int))
    with pytest.raises(ValueError):
        new.values[0] = 1.0  # read-only like the original


def test_arrays_are_read_only(rng):
    W, _ = _random(rng)
    with pytest.raises(ValueError):
        W.values[0] = 1.0
    with pytest.raises(ValueError):
        W.mask[0, 0] = True


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shape": (2, 2, 1)}, "shape"),
        ({"values": np.array([1, 2])}, "values"),
        ({"indptr": np.array([0, 2])}, "indptr"),
        ({"indptr": np.array([0, 1, 1], dtype=np.float64)}, "indptr"),
        ({"indptr": np.array([0, 2, 1])}, "indptr"),
        ({"indices": np.array([1, 0])}, "strictly increasing"),
        ({"indices": np.array([0, 5])}, "indices must lie"),
        ({"mask": np.array([[True, False], [False, True]])}, "mask does not match"),
        ({"mask": np.ones((2, 3), bool)}, "mask must be"),
        ({"values": [1.0, 2.0]}, "numpy array"),
    ],
)
def test_validation(kwargs, message):
    good = {
        "shape": (2, 2),
        "values": np.array([1.0, 2.0]),
        "indptr": np.array([0, 2, 2]),
        "indices": np.array([0, 1]),
        "mask": np.array([[True, True], [False, False]]),
    }
    SparseWeights(**good)
    with pytest.raises(ValueError, match=message):
        SparseWeights(**{**good, **kwargs})


def test_from_mask_validation():
    with pytest.raises(ValueError, match="differs"):
        SparseWeights.from_mask(np.ones((2, 2), bool), np.ones((2, 3)))
    with pytest.raises(ValueError, match="floating"):
        SparseWeights.from_mask(np.ones((2, 2), bool), np.ones((2, 2), dtype=int))
    with pytest.raises(ValueError, match="only 0 and 1"):
        SparseWeights.from_mask(np.full((2, 2), 2), np.ones((2, 2)))
    with pytest.raises(ValueError, match="2-D"):
        SparseWeights.from_dense(np.ones(3))


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
