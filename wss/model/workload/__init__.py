"""Model description expanded into the wafer's operations, with FLOP and byte accounting."""

from wss.model.workload.builder import expand_model, kernel_density
from wss.model.workload.ops import Op, StreamedKernel, WaferOp

__all__ = ["expand_model", "kernel_density", "Op", "StreamedKernel", "WaferOp"]
