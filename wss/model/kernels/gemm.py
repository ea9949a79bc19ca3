"""Sparse GEMM kernels: a fast path for training and a wafer-faithful reference.

Layout follows the wafer: activations are ``features x tokens`` (features to
engine rows, tokens to columns), weights are ``out x in``
(:class:`~wss.model.kernels.sparse_format.SparseWeights`).  The three kernels of one
layer are

* forward           ``Y  = W X``               (``X``: ``in x T``),
* backward (data)   ``dX = W^T dY``             (``dY``: ``out x T``),
* backward (weight) ``dW = (dY X^T)`` restricted to the mask, returned as a
  vector in the order of ``W.values`` (what flows back to MemoryX).

Precision: weights may be stored as float16 (the precision they are streamed
in); the arithmetic is float32 (or float64 when an operand is float64, which
the finite-difference check uses).  Both paths agree with the dense masked
product to within float32 rounding.

Fast path and switch-over density
---------------------------------
``method="auto"`` picks by density:

* ``density >= SPARSE_DENSITY_THRESHOLD``: the dense masked matrix (cached on
  the weights) times the activations through BLAS.
* below it, forward and delta propagation go through ``scipy.sparse`` CSR
  (``csr @ X`` and ``csr.T @ dY``; the CSR view shares ``W``'s index arrays
  and is cached on the weights), whose compiled loop fuses the gather and the
  multiply-add that numpy must do in two passes.  The weight gradient is a
  sampled dense-dense product (SDDMM), which scipy does not offer; it uses a
  padded-row ("sliced ELL") layout: output features sorted by non-zero count
  (as the wafer's compiler sorts rows) and cut into segments padded to their
  longest row, each as long as it can be with at most 5% padding; for each
  slice of rows (a gather of about ``_CHUNK_BYTES``) and block of at most
  ``_TOKEN_BLOCK`` tokens, ``np.take`` gathers the activation rows named by
  the indices into one reused buffer and one batched ``matmul`` contracts
  them with the gathered deltas, keeping the reduction inside BLAS.

Why 5%: on the benchmark machine (2 cores, OpenBLAS, 4096 x 4096 weights,
128-2048 tokens; ``python benchmarks/bench_kernels.py --sweep``) dense BLAS
takes the same time at any density while the sparse products grow with the
non-zeros; scipy CSR and dense BLAS cross between 4% and 6%, as does the
padded weight gradient.  Switching at 5% costs at most about 20% on either
side of the crossing.  An earlier numpy-only padded forward product was
1.1-2x slower than scipy CSR at 1% density, which is why scipy is a run-time
dependency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from wss.model.kernels.mapping import deal_rows
from wss.model.kernels.sparse_format import SparseWeights

if TYPE_CHECKING:  # scipy is imported where a CSR product is built, so the plan and the CLI do not load it
    import scipy.sparse as sps

__all__ = [
    "SPARSE_DENSITY_THRESHOLD",
    "compute_dtype",
    "forward",
    "backward_data",
    "backward_weight",
    "reference_forward",
    "reference_backward_data",
    "reference_backward_weight",
]

#: Below this density ``method="auto"`` uses the padded sparse product.
SPARSE_DENSITY_THRESHOLD = 0.05

#: Gather buffer per slice of rows (best of 256 KiB - 2 MiB in the benchmark).
_CHUNK_BYTES = 2 << 20
#: Tokens per pass, so a slice holds many rows even at 2048+ tokens.
_TOKEN_BLOCK = 256
#: A padded segment grows while its padding stays under this fraction.
_MAX_PADDING = 0.05

Method = Literal["auto", "dense", "sparse"]


# --------------------------------------------------------------------- helpers
def compute_dtype(W: SparseWeights, *arrays: np.ndarray) -> np.dtype:
    """Arithmetic precision: float32, or float64 if any operand is float64.

    float16 weights or activations are promoted to float32, so fp16 storage
    never means fp16 accumulation.
    """
    return np.result_type(W.values.dtype, *(a.dtype for a in arrays), np.float32)


def _activations(a: np.ndarray, n_features: int, name: str) -> np.ndarray:
    a = np.asarray(a)
    if a.ndim != 2 or a.shape[0] != n_features:
        raise ValueError(f"{name} must be 2-D with {n_features} feature rows, got shape {a.shape}")
    if not np.issubdtype(a.dtype, np.floating):
        raise ValueError(f"{name} must be floating point, got {a.dtype}")
    return a


def _use_sparse(W: SparseWeights, method: Method) -> bool:
    if method == "auto":
        return W.density < SPARSE_DENSITY_THRESHOLD
    if method not in ("dense", "sparse"):
        raise ValueError(f"method must be 'auto', 'dense' or 'sparse', got {method!r}")
    return method == "sparse"


def _dense(W: SparseWeights, dtype: np.dtype) -> np.ndarray:
    """Dense masked matrix in ``dtype``, cached on ``W`` (read-only)."""
    key = ("dense", dtype)
    if key not in W._cache:
        dense = W.to_dense(dtype)
        dense.flags.writeable = False
        W._cache[key] = dense
    return W._cache[key]


@dataclass(frozen=True)
class _Padded:
    """Padded-row layout of a sparse matrix in one orientation.

    ``rows``/``cols`` of the stored entries are the rows being produced and the
    activation rows being read.  ``order`` lists the rows by increasing count;
    segment ``j`` covers sorted positions ``bounds[j]:bounds[j + 1]``, every
    row padded to ``width[j]`` entries starting at ``offset[j]`` in a flat
    buffer; ``slot[k]`` is where value ``k`` (in ``W.values`` order) lives in
    that buffer; ``idx[j]`` holds the padded column indices (padding reads
    column 0 with weight 0).
    """

    n_rows: int
    order: np.ndarray
    first: int
    bounds: tuple[int, ...]
    width: tuple[int, ...]
    offset: tuple[int, ...]
    idx: tuple[np.ndarray, ...]
    slot: np.ndarray
    size: int


def _segment_bounds(c_sorted: np.ndarray, first: int) -> list[int]:
    """Cut rows sorted by count into segments padded by at most ``_MAX_PADDING``.

    Longer segments mean fewer, larger numpy calls; the padding bound keeps
    the wasted gathers small.  Counts are sorted, so a segment's padding is
    ``rows * last_count - sum(counts)``.
    """
    bounds = [first]
    a, total = first, 0
    for b in range(first, c_sorted.shape[0]):
        if b > a and (b + 1 - a) * c_sorted[b] > (1 + _MAX_PADDING) * (total + c_sorted[b]):
            bounds.append(b)
            a, total = b, 0
        total += int(c_sorted[b])
    if bounds[-1] != c_sorted.shape[0]:
        bounds.append(c_sorted.shape[0])
    return bounds


def _build_padded(rows: np.ndarray, cols: np.ndarray, n_rows: int) -> _Padded:
    counts = np.bincount(rows, minlength=n_rows)
    order = np.argsort(counts, kind="stable")
    rank = np.empty(n_rows, dtype=np.intp)
    rank[order] = np.arange(n_rows)
    c_sorted = counts[order]
    first = int(np.searchsorted(c_sorted, 0, side="right"))  # empty rows come first
    bounds = _segment_bounds(c_sorted, first)
    width = [int(c_sorted[b - 1]) for b in bounds[1:]]
    seg_sizes = [(b - a) * w for a, b, w in zip(bounds[:-1], bounds[1:], width, strict=True)]
    offset = np.concatenate([[0], np.cumsum(seg_sizes, dtype=np.int64)]).astype(np.intp)
    # Entries sorted by (row, col); position inside the row follows.
    perm = np.lexsort((cols, rows))
    r_sorted = rows[perm]
    row_start = np.concatenate([[0], np.cumsum(counts)])
    pos = np.arange(rows.shape[0]) - row_start[r_sorted]
    seg_of_rank = np.searchsorted(np.asarray(bounds), rank[r_sorted], side="right") - 1
    w_arr = np.asarray(width + [0], dtype=np.intp)
    b_arr = np.asarray(bounds, dtype=np.intp)
    slot = np.empty(rows.shape[0], dtype=np.intp)
    slot[perm] = offset[seg_of_rank] + (rank[r_sorted] - b_arr[seg_of_rank]) * w_arr[seg_of_rank] + pos
    flat_idx = np.zeros(int(offset[-1]), dtype=np.intp)
    flat_idx[slot] = cols
    idx = tuple(
        flat_idx[offset[j] : offset[j + 1]].reshape(bounds[j + 1] - bounds[j], width[j]) for j in range(len(width))
    )
    return _Padded(
        n_rows=n_rows,
        order=order,
        first=first,
        bounds=tuple(bounds),
        width=tuple(width),
        offset=tuple(int(o) for o in offset),
        idx=idx,
        slot=slot,
        size=int(offset[-1]),
    )


def _padded(W: SparseWeights) -> _Padded:
    """Padded-row layout of ``W`` by output feature, cached with the structure."""
    key = ("structure", "padded")
    if key not in W._cache:
        W._cache[key] = _build_padded(W.row_ids().astype(np.intp), W.indices.astype(np.intp), W.shape[0])
    return W._cache[key]


def _token_blocks(n_tokens: int) -> list[tuple[int, int]]:
    """Token ranges of at most ``_TOKEN_BLOCK`` (one range when ``n_tokens`` is 0)."""
    return [(t0, min(n_tokens, t0 + _TOKEN_BLOCK)) for t0 in range(0, max(n_tokens, 1), _TOKEN_BLOCK)]


def _slices(plan: _Padded, n_tokens: int, itemsize: int) -> list[tuple[int, int, int]]:
    """``(segment, a, b)``: sorted rows ``a:b`` of one segment, one ``_CHUNK_BYTES`` gather each."""
    out: list[tuple[int, int, int]] = []
    for j, w in enumerate(plan.width):
        a0, b0 = plan.bounds[j], plan.bounds[j + 1]
        step = max(1, _CHUNK_BYTES // max(1, w * n_tokens * itemsize))
        out.extend((j, a, min(b0, a + step)) for a in range(a0, b0, step))
    return out


def _csr(W: SparseWeights, dtype: np.dtype) -> sps.csr_array:
    """``W`` as a scipy CSR array in ``dtype``, sharing the index arrays; cached on ``W``."""
    key = ("csr", dtype)
    if key not in W._cache:
        import scipy.sparse as sps

        W._cache[key] = sps.csr_array((W.values.astype(dtype, copy=False), W.indices, W.indptr), shape=W.shape)
    return W._cache[key]


def _padded_weight_grad(W: SparseWeights, X: np.ndarray, dY: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Per-non-zero dot products ``dY[m] . X[i]`` with the padded-row layout."""
    plan = _padded(W)
    n_tok = X.shape[1]
    widest = max(plan.width, default=0)
    flat = np.zeros(plan.size, dtype=dtype)
    buf = np.empty(_CHUNK_BYTES // dtype.itemsize + widest * _TOKEN_BLOCK, dtype=dtype)
    dots_buf = np.empty(_CHUNK_BYTES // dtype.itemsize + widest, dtype=dtype)
    for t0, t1 in _token_blocks(n_tok):
        nt = t1 - t0
        xb = X if nt == n_tok else np.ascontiguousarray(X[:, t0:t1])
        db = dY if nt == n_tok else np.ascontiguousarray(dY[:, t0:t1])
        for j, a, b in _slices(plan, nt, dtype.itemsize):
            w, a0, off = plan.width[j], plan.bounds[j], plan.offset[j]
            gathered = buf[: (b - a) * w * nt].reshape(b - a, w, nt)
            np.take(xb, plan.idx[j][a - a0 : b - a0], axis=0, out=gathered, mode="clip")
            deltas = np.take(db, plan.order[a:b], axis=0, mode="clip")[:, :, None]  # r x T x 1
            dots = dots_buf[: (b - a) * w].reshape(b - a, w, 1)
            # Reporting only, not the values: one CI run saw the floating-point "invalid" flag raised here on
            # finite inputs, in the full suite only, with the results still equal to the reference (sNaN-filled
            # scratch buffers do not reproduce it, so it is not our buffers; BLAS scratch space is the suspect).
            # A real NaN still shows in the values; simulate() already ignores these flags for diverging runs.
            with np.errstate(invalid="ignore"):
                np.matmul(gathered, deltas, out=dots)
            flat[off + (a - a0) * w : off + (b - a0) * w] += dots.reshape(-1)
    return flat[plan.slot]


# ------------------------------------------------------------------ fast path
def forward(W: SparseWeights, X: np.ndarray, method: Method = "auto") -> np.ndarray:
    """Forward GEMM ``Y = W X``.

    Parameters
    ----------
    W
        ``out x in`` weights (float16/32/64 values).
    X
        ``in x T`` input activations.
    method
        ``"auto"`` (by density, see the module docstring), ``"dense"`` or
        ``"sparse"``; all give the same result up to rounding.

    Returns
    -------
    numpy.ndarray
        ``out x T`` in the compute precision (see :func:`compute_dtype`).
    """
    X = _activations(X, W.shape[1], "X")
    dtype = compute_dtype(W, X)
    X = X.astype(dtype, copy=False)
    if _use_sparse(W, method):
        return np.asarray(_csr(W, dtype) @ X)
    return _dense(W, dtype) @ X


def backward_data(W: SparseWeights, dY: np.ndarray, method: Method = "auto") -> np.ndarray:
    """Delta propagation ``dX = W^T dY`` (``dY``: ``out x T``; result ``in x T``)."""
    dY = _activations(dY, W.shape[0], "dY")
    dtype = compute_dtype(W, dY)
    dY = dY.astype(dtype, copy=False)
    if _use_sparse(W, method):
        return np.asarray(_csr(W, dtype).T @ dY)
    return _dense(W, dtype).T @ dY


def backward_weight(W: SparseWeights, X: np.ndarray, dY: np.ndarray, method: Method = "auto") -> np.ndarray:
    """Weight gradient on the mask: ``(dY X^T)[m, i]`` for every non-zero.

    Only the mask of ``W`` is used (the backward stream carries indices
    only); the result has shape ``(nnz,)`` in the order of ``W.values``.
    """
    X = _activations(X, W.shape[1], "X")
    dY = _activations(dY, W.shape[0], "dY")
    if X.shape[1] != dY.shape[1]:
        raise ValueError(f"X has {X.shape[1]} tokens but dY has {dY.shape[1]}")
    dtype = compute_dtype(W, X, dY)
    X, dY = X.astype(dtype, copy=False), dY.astype(dtype, copy=False)
    if _use_sparse(W, method):
        return _padded_weight_grad(W, X, dY, dtype)
    # Fancy indexing, not np.take: take copies a read-only index array first.
    return (dY @ X.T).reshape(-1)[W.flat_indices()]


# ------------------------------------------------------------ reference path
def _token_columns(n_tokens: int, n_cols: int) -> list[np.ndarray]:
    if n_cols < 1:
        raise ValueError(f"n_cols must be >= 1, got {n_cols}")
    return np.array_split(np.arange(n_tokens), n_cols)


def _ring_reduce(acc: np.ndarray) -> np.ndarray:
    """Sum per-row partial sums ``acc[row, feature, :]`` around the ring.

    The ring for feature ``f`` starts on engine row ``f mod n_rows`` so the
    outputs end up spread over the rows, as on the wafer.
    """
    n_rows, n_feat = acc.shape[:2]
    out = np.empty(acc.shape[1:], dtype=acc.dtype)
    for f in range(n_feat):
        start = f % n_rows
        total = acc[start, f].copy()
        for s in range(1, n_rows):
            total += acc[(start + s) % n_rows, f]
        out[f] = total
    return out


def _reference_axpy_gemm(
    out_feat: np.ndarray, in_feat: np.ndarray, vals: np.ndarray, A: np.ndarray, n_out: int, n_rows: int, n_cols: int
) -> np.ndarray:
    """One AXPY per streamed non-zero, into the engine row holding its input feature."""
    n_in, n_tok = A.shape
    counts = np.bincount(in_feat, minlength=n_in)
    row_of = deal_rows(counts, n_rows)
    cols = _token_columns(n_tok, n_cols)
    acc = np.zeros((n_rows, n_out, n_tok), dtype=A.dtype)
    for m, i, w in zip(out_feat.tolist(), in_feat.tolist(), vals, strict=True):
        r = row_of[i]
        for c in cols:  # every core of row r does the AXPY on its own tokens
            acc[r, m, c] += w * A[i, c]
    return _ring_reduce(acc)


def reference_forward(W: SparseWeights, X: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """Forward GEMM the way the wafer runs it (slow; for tests on small shapes).

    Input features are dealt to ``n_rows`` engine rows with
    :func:`~wss.model.kernels.mapping.deal_rows` on ``W.col_nnz()``; tokens are split
    over ``n_cols`` columns.  Weights stream in CSR order; each non-zero
    ``W[m, i]`` is one AXPY ``acc[row(i)][m, cols] += W[m, i] * X[i, cols]``.
    At the end of each output feature the per-row partial sums are reduced
    around the partial-sum ring.
    """
    X = _activations(X, W.shape[1], "X")
    dtype = compute_dtype(W, X)
    return _reference_axpy_gemm(
        W.row_ids(), W.indices, W.values.astype(dtype), X.astype(dtype), W.shape[0], n_rows, n_cols
    )


def reference_backward_data(W: SparseWeights, dY: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """``dX = W^T dY`` the way the wafer runs it (slow; for tests).

    Same algorithm with the roles of the features swapped: the output
    features of ``W`` (rows of ``dY``) are dealt to engine rows by
    ``W.row_nnz()``, the weights stream grouped by input feature, and the
    partial sums of each input feature are ring-reduced.
    """
    dY = _activations(dY, W.shape[0], "dY")
    dtype = compute_dtype(W, dY)
    rows = W.row_ids()
    perm = np.lexsort((rows, W.indices))  # stream grouped by input feature
    return _reference_axpy_gemm(
        W.indices[perm], rows[perm], W.values[perm].astype(dtype), dY.astype(dtype), W.shape[1], n_rows, n_cols
    )


def reference_backward_weight(
    W: SparseWeights, X: np.ndarray, dY: np.ndarray, n_rows: int, n_cols: int
) -> np.ndarray:
    """Weight gradient the way the wafer computes it (slow; for tests).

    Input features sit on engine rows as in the forward pass (``X`` is still
    resident); for each non-zero of the mask, every column computes the dot
    product of ``dY[m]`` and ``X[i]`` over its own tokens, and the column
    partials are reduced across columns in column order.  ``n_rows`` only
    places the work; it does not change the result.
    """
    X = _activations(X, W.shape[1], "X")
    dY = _activations(dY, W.shape[0], "dY")
    if X.shape[1] != dY.shape[1]:
        raise ValueError(f"X has {X.shape[1]} tokens but dY has {dY.shape[1]}")
    dtype = compute_dtype(W, X, dY)
    X, dY = X.astype(dtype), dY.astype(dtype)
    deal_rows(W.col_nnz(), n_rows)  # validates n_rows; placement does not change the sums
    cols = _token_columns(X.shape[1], n_cols)
    grad = np.zeros(W.nnz, dtype=dtype)
    for k, (m, i) in enumerate(zip(W.row_ids().tolist(), W.indices.tolist(), strict=True)):
        total = dtype.type(0.0)
        for c in cols:
            total += np.dot(dY[m, c], X[i, c])
        grad[k] = total
    return grad
