"""How a weight matrix is laid over the wafer's engine rows.

M. James, "Scaling Up and Out: Training Massive Models on Cerebras Systems
using Weight Streaming" (Cerebras blog, 2021) describes the sparse GEMM
mapping: activation features go to engine rows, tokens to columns; each
non-zero weight is fanned out to the row that holds its input feature and
costs one AXPY there.  Unstructured sparsity makes some features busier than
others (the tail-worker effect), so the optimizer sorts matrix rows by their
non-zero count and deals them round-robin to the physical engine rows.  The
busiest engine row then sets the kernel's time.

This module holds that dealing step, shared by the cycle-cost model
(:mod:`wss.model.kernels.cycles`) and the reference GEMM that follows the wafer's
algorithm.
"""

from __future__ import annotations

import numpy as np

__all__ = ["deal_rows", "row_loads"]


def deal_rows(counts: np.ndarray, n_rows: int) -> np.ndarray:
    """Assign features to engine rows: sort by non-zero count, deal round-robin.

    Parameters
    ----------
    counts
        Non-zero count of each feature (one entry per matrix row as the wafer
        sees it, i.e. per feature being distributed).
    n_rows
        Number of physical engine rows.

    Returns
    -------
    numpy.ndarray
        ``assignment[i]`` is the engine row of feature ``i``.  The busiest
        feature goes to row 0, the next to row 1, ... wrapping after
        ``n_rows``.  Ties keep feature order (a stable sort), so the result
        is deterministic.
    """
    counts = np.asarray(counts)
    if n_rows < 1:
        raise ValueError(f"n_rows must be >= 1, got {n_rows}")
    order = np.argsort(-counts, kind="stable")
    assignment = np.empty(counts.shape[0], dtype=np.int64)
    assignment[order] = np.arange(counts.shape[0], dtype=np.int64) % n_rows
    return assignment


def row_loads(counts: np.ndarray, n_rows: int) -> np.ndarray:
    """Total non-zeros dealt to each engine row (length ``n_rows``).

    Equivalent to ``np.bincount(deal_rows(counts, n_rows), weights=counts)``
    but without building the assignment: after a descending sort, engine row
    ``r`` receives sorted positions ``r, r + n_rows, r + 2 n_rows, ...``.
    """
    counts = np.asarray(counts, dtype=np.int64)
    if n_rows < 1:
        raise ValueError(f"n_rows must be >= 1, got {n_rows}")
    ordered = -np.sort(-counts, kind="stable")
    pad = (-ordered.shape[0]) % n_rows
    if pad:
        ordered = np.concatenate([ordered, np.zeros(pad, dtype=np.int64)])
    return ordered.reshape(-1, n_rows).sum(axis=0)
