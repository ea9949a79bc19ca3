"""Byte formats: a kernel's weights on the wire to a wafer, and its sparsity mask in MemoryX.

These are the byte conventions of :mod:`wss.model.plan` as code: a pass streams
a kernel dense (``M K b_w``) or sparse (``nnz (b_w + 2) + 4 M``), whichever is
smaller, and MemoryX stores a pruned kernel's mask as a bitmask or as indices,
whichever is smaller.  Both the activation SRAM step (a retained output layer's
weights) and the kernel step (bytes per pass, chunks) read the stream figures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wss.model.kernels.cycles import NnzProfile
from wss.model.workload import StreamedKernel

__all__ = [
    "INDEX_BYTES",
    "CONTROL_BYTES",
    "STORED_INDEX_BYTES",
    "WeightStream",
    "stream_bytes",
    "weight_streams",
    "mask_bytes",
]

INDEX_BYTES = 2  # 16-bit index beside each streamed sparse weight
CONTROL_BYTES = 4  # one 32-bit control wavelet closes each output feature
STORED_INDEX_BYTES = 4  # an int32 index per non-zero, if MemoryX stores the mask as indices


@dataclass(frozen=True)
class WeightStream:
    """How one kernel's weights travel to one wafer in one pass.

    Kept per kernel so the SRAM step and the kernel step read the same
    figures instead of recomputing them.

    Attributes
    ----------
    stream_bytes
        Bytes of one pass into one wafer, in the chosen format.
    sparse_format
        True when the sparse format (weights with indices) is smaller than dense.
    """

    stream_bytes: float
    sparse_format: bool


def stream_bytes(k: StreamedKernel, p: NnzProfile, b_w: int) -> tuple[float, bool]:
    """Bytes of one pass of a kernel into one wafer, and whether the sparse format is used.

    Parameters
    ----------
    k
        The kernel.
    p
        Its non-zero profile.
    b_w
        Bytes of one streamed weight.
    """
    dense = float(k.params * b_w)
    sparse = float(p.nnz * (b_w + INDEX_BYTES) + k.out_features * CONTROL_BYTES)
    return (sparse, True) if sparse < dense else (dense, False)


def weight_streams(kernels: list[StreamedKernel], profiles: list[NnzProfile], b_w: int) -> list[WeightStream]:
    """The stream format of every kernel, in kernel order (see :func:`stream_bytes`)."""
    return [WeightStream(*stream_bytes(k, p, b_w)) for k, p in zip(kernels, profiles)]


def mask_bytes(k: StreamedKernel, p: NnzProfile) -> float:
    """MemoryX bytes for a kernel's sparsity mask: none when dense, else bitmask or indices, the smaller."""
    if p.nnz >= k.params:
        return 0.0
    return float(min(math.ceil(k.params / 8), p.nnz * STORED_INDEX_BYTES))
