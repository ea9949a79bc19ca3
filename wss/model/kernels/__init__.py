"""Sparse GEMM on the wafer: the cycle-cost model, the row mapping, and numpy kernels for real numerics."""

from wss.model.kernels.cycles import KernelCycles, NnzProfile, kernel_cycles
from wss.model.kernels.gemm import backward_data, backward_weight, forward
from wss.model.kernels.mapping import deal_rows, row_loads
from wss.model.kernels.sparse_format import SparseWeights

__all__ = [
    "SparseWeights",
    "forward",
    "backward_data",
    "backward_weight",
    "kernel_cycles",
    "KernelCycles",
    "NnzProfile",
    "deal_rows",
    "row_loads",
]
