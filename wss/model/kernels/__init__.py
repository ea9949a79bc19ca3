"""Sparse GEMM on the wafer: the cycle-cost model, lanes, the row mapping, a core-level mesh model that checks
the cycle model, and numpy kernels for real numerics.

The names are imported the first time they are used: the planner needs only the cycle model
(:mod:`wss.model.kernels.cycles`), so ``wss validate`` does not load the numerics' kernels.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "SparseWeights",
    "forward",
    "backward_data",
    "backward_weight",
    "kernel_cycles",
    "KernelCycles",
    "NnzProfile",
    "choose_lanes",
    "deal_rows",
    "row_loads",
]

_HOME = {
    "SparseWeights": "sparse_format",
    "forward": "gemm",
    "backward_data": "gemm",
    "backward_weight": "gemm",
    "kernel_cycles": "cycles",
    "KernelCycles": "cycles",
    "NnzProfile": "cycles",
    "choose_lanes": "cycles",
    "deal_rows": "mapping",
    "row_loads": "mapping",
}


def __getattr__(name: str) -> Any:
    if name in _HOME:
        return getattr(importlib.import_module(f"wss.model.kernels.{_HOME[name]}"), name)
    if name in ("cycles", "gemm", "lanes", "mapping", "mesh_model", "sparse_format"):
        return importlib.import_module(f"wss.model.kernels.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
