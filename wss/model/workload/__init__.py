"""Model description expanded into the wafer's operations, with FLOP and byte accounting."""

from wss.model.workload.builder import expand_model
from wss.model.workload.ops import Op, StreamedKernel, WaferOp

__all__ = ["expand_model", "Op", "StreamedKernel", "WaferOp"]
