"""Streamed precision of the weights: float16 as numpy stores it, bfloat16 emulated.

numpy has no bfloat16, so a bfloat16 weight is a float32 whose low 16 bits are
zero: the float32 value rounded to nearest (ties to even) at bfloat16's 8-bit
mantissa, as hardware converts it.  It keeps float32's exponent range, which is
the point of bfloat16; float16 has more mantissa and far less range.
"""

from __future__ import annotations

import numpy as np

from wss.model.kernels.sparse_format import SparseWeights

__all__ = ["round_to_bfloat16", "as_streamed"]


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to bfloat16 (nearest, ties to even), returned as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    rounded = (bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))) & np.uint32(0xFFFF0000)
    finite = np.isfinite(x)
    out = np.where(finite, rounded, bits).view(np.float32)  # NaN and inf keep their bits
    return out


def as_streamed(weights: SparseWeights, dtype: str) -> SparseWeights:
    """The weights as the wafer receives them in ``dtype`` (``float32``, ``float16`` or ``bfloat16``)."""
    if dtype == "bfloat16":
        return weights.with_values(round_to_bfloat16(weights.values))
    return weights.astype(dtype)
