"""Model description expanded into the wafer's operations, with FLOP and byte accounting."""

from .builder import expand_model
from .ops import Op, StreamedKernel, WaferOp

__all__ = ["expand_model", "Op", "StreamedKernel", "WaferOp"]
