"""Sparse weight matrices as the wafer receives them.

MemoryX streams only the non-zero weights of a kernel, grouped by output
feature, each tagged with the index of its input feature; a control message
closes each output feature (M. James, "Scaling Up and Out: Training Massive
Models on Cerebras Systems using Weight Streaming", Cerebras blog, 2021,
section "Sparse GEMM").  That stream is
exactly compressed sparse row (CSR) storage of the ``out x in`` weight matrix:
``indptr`` marks where each output feature's run starts, ``indices`` holds the
input-feature tag of every non-zero and ``values`` the weights.  The boolean
mask is kept beside it because the backward pass streams "only the sparsity
mask" to say which gradient entries to compute, and because the optimizer must
keep pruned weights exactly zero.

:class:`SparseWeights` is immutable.  Derived forms that the kernels need
repeatedly (the dense matrix, the transposed index order, the padded layout of
the low-density kernel) are cached on the instance so one streamed matrix
serves a forward and a backward pass without rebuilding them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SparseWeights"]

_INDEX_DTYPES = (np.dtype(np.int32), np.dtype(np.int64))


def _index_dtype(n: int) -> np.dtype:
    """Smallest of int32/int64 that can index ``n`` entries."""
    return np.dtype(np.int32) if n < 2**31 - 1 else np.dtype(np.int64)


@dataclass(frozen=True, eq=False)
class SparseWeights:
    """An ``out_features x in_features`` weight matrix in CSR order.

    Parameters
    ----------
    shape
        ``(out_features, in_features)``.
    values
        Non-zero weights (length ``nnz``), grouped by output feature and, within
        an output feature, in increasing input-feature order.  Floating point;
        float16 is allowed for weights as streamed.
    indptr
        Length ``out_features + 1``; the non-zeros of output feature ``m`` are
        ``values[indptr[m]:indptr[m + 1]]``.
    indices
        Input-feature index of each non-zero (int32 or int64), strictly
        increasing within each output feature.
    mask
        Boolean ``out x in`` sparsity pattern; ``True`` exactly where a
        non-zero is stored.  A stored value may itself be 0.0 (e.g. a weight
        that the optimizer drove to zero): the mask, not the value, decides.

    Notes
    -----
    Equality is identity (``eq=False``): two matrices with equal entries are
    not interchangeable caches, and element-wise ``==`` on arrays is not a
    truth value.  Build instances with :meth:`from_dense` or
    :meth:`from_mask`; the constructor checks consistency but does not sort.
    """

    shape: tuple[int, int]
    values: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    mask: np.ndarray
    _cache: dict[Any, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = tuple(int(s) for s in self.shape)
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"shape must be (out_features, in_features) >= 0, got {self.shape}")
        object.__setattr__(self, "shape", shape)
        n_out, n_in = shape
        values, indptr, indices, mask = self.values, self.indptr, self.indices, self.mask
        for name, arr in (("values", values), ("indptr", indptr), ("indices", indices), ("mask", mask)):
            if not isinstance(arr, np.ndarray):
                raise ValueError(f"{name} must be a numpy array, got {type(arr).__name__}")
        if values.ndim != 1 or not np.issubdtype(values.dtype, np.floating):
            raise ValueError(f"values must be a 1-D floating array, got {values.dtype} with shape {values.shape}")
        if indptr.shape != (n_out + 1,) or indptr.dtype not in _INDEX_DTYPES:
            raise ValueError(
                f"indptr must be int32/int64 of length out_features + 1 = {n_out + 1}, "
                f"got {indptr.dtype} with shape {indptr.shape}"
            )
        if indices.ndim != 1 or indices.dtype not in _INDEX_DTYPES:
            raise ValueError(f"indices must be a 1-D int32/int64 array, got {indices.dtype} with shape {indices.shape}")
        if mask.shape != shape or mask.dtype != np.bool_:
            raise ValueError(f"mask must be a boolean array of shape {shape}, got {mask.dtype} with shape {mask.shape}")
        nnz = values.shape[0]
        if indices.shape[0] != nnz:
            raise ValueError(f"indices has {indices.shape[0]} entries but values has {nnz}")
        if indptr[0] != 0 or indptr[-1] != nnz or np.any(np.diff(indptr) < 0):
            raise ValueError("indptr must start at 0, be non-decreasing and end at nnz")
        if nnz:
            if indices.min() < 0 or indices.max() >= n_in:
                raise ValueError(f"indices must lie in [0, {n_in})")
            # CSR order: the key (output feature, input feature) strictly increases.
            key = self.row_ids().astype(np.int64) * max(n_in, 1) + indices
            if np.any(np.diff(key) <= 0):
                raise ValueError("indices must be strictly increasing within each output feature")
        if int(np.count_nonzero(mask)) != nnz or (nnz and not mask[self.row_ids(), indices].all()):
            raise ValueError("mask does not match indptr/indices")
        # Read-only views: the caches assume the arrays never change.  (The
        # caller's own arrays stay writeable; do not mutate them afterwards.)
        for name in ("values", "indptr", "indices", "mask"):
            view = getattr(self, name).view()
            view.flags.writeable = False
            object.__setattr__(self, name, view)

    # ------------------------------------------------------------------ build
    @classmethod
    def from_mask(cls, mask: np.ndarray, values_dense: np.ndarray) -> SparseWeights:
        """Keep the entries of ``values_dense`` where ``mask`` is True.

        Parameters
        ----------
        mask
            Boolean ``out x in`` pattern (any array castable to bool of that
            shape; non-boolean input must contain only 0 and 1).
        values_dense
            Floating ``out x in`` matrix; its dtype becomes the values dtype.
            Entries outside the mask are dropped, entries inside are kept even
            when they are zero.
        """
        values_dense = np.asarray(values_dense)
        mask = np.asarray(mask)
        if values_dense.ndim != 2:
            raise ValueError(f"values_dense must be 2-D, got shape {values_dense.shape}")
        if mask.shape != values_dense.shape:
            raise ValueError(f"mask shape {mask.shape} differs from values shape {values_dense.shape}")
        if not np.issubdtype(values_dense.dtype, np.floating):
            raise ValueError(f"values_dense must be floating point, got {values_dense.dtype}")
        if mask.dtype != np.bool_:
            if not np.isin(mask, (0, 1)).all():
                raise ValueError("a non-boolean mask may contain only 0 and 1")
            mask = mask.astype(bool)
        mask = np.array(mask, dtype=bool, copy=True)
        n_out, n_in = mask.shape
        idx_dtype = _index_dtype(max(mask.size, 1))
        # Row-major flat positions are CSR order: by output feature, then input index.
        flat = np.flatnonzero(mask)
        rows = flat // max(n_in, 1)
        indptr = np.zeros(n_out + 1, dtype=idx_dtype)
        np.cumsum(np.bincount(rows, minlength=n_out), out=indptr[1:])
        indices = (flat - rows * n_in).astype(idx_dtype)
        values = np.take(values_dense.reshape(-1), flat)
        out = cls((n_out, n_in), values, indptr, indices, mask)
        flat.flags.writeable = False
        out._cache[("structure", "flat")] = flat
        return out

    @classmethod
    def from_dense(cls, dense: np.ndarray, mask: np.ndarray | None = None) -> SparseWeights:
        """Sparse form of a dense matrix; the mask defaults to ``dense != 0``."""
        dense = np.asarray(dense)
        if mask is None:
            if dense.ndim != 2:
                raise ValueError(f"dense must be 2-D, got shape {dense.shape}")
            mask = dense != 0
        return cls.from_mask(mask, dense)

    def with_values(self, new_values: np.ndarray) -> SparseWeights:
        """Same sparsity pattern with other non-zero values (e.g. after an update).

        ``new_values`` is copied; the index arrays and mask are shared, not
        copied, and not re-validated (they already were), and the structural
        caches (flat positions, transpose order, padded layout) carry over.
        That keeps a training step from re-checking every mask entry.
        """
        new_values = np.array(new_values, copy=True)
        if new_values.shape != (self.nnz,) or not np.issubdtype(new_values.dtype, np.floating):
            raise ValueError(
                f"new_values must be floating with shape ({self.nnz},), got {new_values.dtype} {new_values.shape}"
            )
        new_values.flags.writeable = False
        out = object.__new__(SparseWeights)
        for name, value in (
            ("shape", self.shape),
            ("values", new_values),
            ("indptr", self.indptr),
            ("indices", self.indices),
            ("mask", self.mask),
            ("_cache", {k: v for k, v in self._cache.items() if k[0] == "structure"}),
        ):
            object.__setattr__(out, name, value)
        return out

    def astype(self, dtype: Any) -> SparseWeights:
        """Values cast to ``dtype`` (e.g. float16 as streamed); indices shared."""
        dtype = np.dtype(dtype)
        if not np.issubdtype(dtype, np.floating):
            raise ValueError(f"values dtype must be floating point, got {dtype}")
        if dtype == self.values.dtype:
            return self
        return self.with_values(self.values.astype(dtype))

    # ---------------------------------------------------------------- queries
    @property
    def nnz(self) -> int:
        """Number of stored non-zeros."""
        return int(self.values.shape[0])

    @property
    def density(self) -> float:
        """``nnz / (out * in)``; 0.0 for an empty matrix."""
        size = self.shape[0] * self.shape[1]
        return self.nnz / size if size else 0.0

    def row_nnz(self) -> np.ndarray:
        """Non-zeros per output feature (length ``out_features``, int64)."""
        return np.diff(self.indptr).astype(np.int64)

    def col_nnz(self) -> np.ndarray:
        """Non-zeros per input feature (length ``in_features``, int64)."""
        return np.bincount(self.indices, minlength=self.shape[1]).astype(np.int64)

    def row_ids(self) -> np.ndarray:
        """Output-feature index of every non-zero (the CSR row of each value)."""
        return np.repeat(np.arange(self.shape[0], dtype=self.indices.dtype), np.diff(self.indptr))

    def flat_indices(self) -> np.ndarray:
        """Row-major position of every non-zero in the dense matrix (cached).

        Scattering through these is several times faster than boolean-mask
        assignment on an unstructured mask.
        """
        key = ("structure", "flat")
        if key not in self._cache:
            flat = self.row_ids().astype(np.intp) * self.shape[1] + self.indices
            flat.flags.writeable = False
            self._cache[key] = flat
        return self._cache[key]

    def to_dense(self, dtype: Any = None) -> np.ndarray:
        """Dense ``out x in`` matrix (zeros outside the mask), a fresh array."""
        dtype = self.values.dtype if dtype is None else np.dtype(dtype)
        if self.nnz == self.shape[0] * self.shape[1]:
            return self.values.reshape(self.shape).astype(dtype, copy=True)
        dense = np.zeros(self.shape, dtype=dtype)
        dense.reshape(-1)[self.flat_indices()] = self.values
        return dense
