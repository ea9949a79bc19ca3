"""Cycle-cost model of one streamed kernel on one wafer (docs/model.md, "Cycles on the wafer").

The sparse GEMM of M. James, "Scaling Up and Out: Training Massive Models on
Cerebras Systems using Weight Streaming", Cerebras blog, 2021:

* activations: features on engine rows, tokens on columns, so each core holds
  ``t_c = ceil(T / C)`` tokens of its features;
* every non-zero weight is one AXPY of length ``t_c`` on each core of the row
  holding its input feature: ``ceil(t_c / simd)`` cycles;
* features are sorted by non-zero count and dealt round-robin to the ``R``
  engine rows; rows run in parallel and the busiest row sets the time (the
  tail-worker effect);
* every output feature costs a fixed partial-sum overhead (4 cycles) on every
  row whatever the sparsity (Amdahl's law for sparsity);
* a kernel also pays mesh fill/drain: ``(R + C)`` hops;
* the fabric: each completed output feature's partial sums (``t_c`` fp32 values per core) are
  reduced along the column's partial-sum ring, one 32-bit wavelet per link per cycle (Cerebras
  SDK documentation), concurrently with the next features' AXPYs.  Every link of the ring carries
  every feature's ``t_c`` values, so a kernel takes at least ``M t_c`` cycles: it binds when a row
  holds few input features (``ceil(K / R) x ceil(t_c / simd) + 4 < t_c``, narrow layers: d up to
  about 3 x 757 on WSE-2).  The weights' delivery along the rows (one wavelet per weight, index
  included) never binds: a weight costs at least one AXPY cycle, and a row receives one per cycle.

Backward = delta propagation ``dX = W^T dY`` (the same AXPYs with broadcast
and reduction swapped, dY's features on rows, one overhead per input feature)
plus weight gradients (one length-``t_c`` dot product per non-zero on the row
of its input feature, reduced across columns): about twice forward.

Embedding kernels gather rows: ``T x d`` element copies spread over the cores.

All of the above is an ideal schedule; ``WaferConfig.kernel_efficiency`` (1.0 by default) is
the achieved fraction of it, calibrated on published measured runs where a preset sets it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from wss.model.kernels.mapping import row_loads
from wss.model.scenario.hardware import WaferConfig

__all__ = ["NnzProfile", "KernelCycles", "kernel_cycles", "dense_profile", "sampled_profile"]


@dataclass(frozen=True)
class NnzProfile:
    """Where a weight matrix's non-zeros are.

    ``col_counts[i]``: non-zeros in input feature ``i`` (a column of W);
    ``row_counts[m]``: non-zeros in output feature ``m`` (a row of W).
    For a dense matrix both are ``None`` and the counts are implicit.
    """

    out_features: int
    in_features: int
    nnz: int
    col_counts: np.ndarray | None = None
    row_counts: np.ndarray | None = None
    # The busiest rows already dealt, by (counts, engine rows): a kernel is costed at every micro-batch size
    # the planner weighs, on the same profile and engine rows, and dealing sorts every feature's count.
    _busiest: dict[tuple[str, int], int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def busiest_input_row(self, engine_rows: int) -> int:
        """Non-zeros on the busiest engine row when input features are dealt to rows."""
        if self.col_counts is None:
            return math.ceil(self.in_features / engine_rows) * self.out_features
        return self._dealt("col", self.col_counts, engine_rows)

    def busiest_output_row(self, engine_rows: int) -> int:
        """Same, dealing output features (the backward-data mapping)."""
        if self.row_counts is None:
            return math.ceil(self.out_features / engine_rows) * self.in_features
        return self._dealt("row", self.row_counts, engine_rows)

    def _dealt(self, which: str, counts: np.ndarray, engine_rows: int) -> int:
        """The busiest of ``engine_rows`` rows dealt ``counts``, worked out once per profile."""
        key = (which, engine_rows)
        if key not in self._busiest:
            self._busiest[key] = int(row_loads(counts, engine_rows).max())
        return self._busiest[key]


def dense_profile(out_features: int, in_features: int) -> NnzProfile:
    return NnzProfile(out_features, in_features, out_features * in_features)


def sampled_profile(out_features: int, in_features: int, density: float, rng: np.random.Generator) -> NnzProfile:
    """Counts of an i.i.d. unstructured mask of the given density, drawn without building the mask.

    Column counts are drawn as independent binomials; row counts are then
    drawn as a multinomial split of the same total so both views agree on the
    number of non-zeros (their joint law differs from a real mask's only in
    the tiny row/column coupling, which does not move the busiest row).
    """
    if density >= 1.0:
        return dense_profile(out_features, in_features)
    cols = rng.binomial(out_features, density, size=in_features).astype(np.int64)
    nnz = int(cols.sum())
    rows = rng.multinomial(nnz, np.full(out_features, 1.0 / out_features)).astype(np.int64)
    return NnzProfile(out_features, in_features, nnz, cols, rows)


@dataclass(frozen=True)
class KernelCycles:
    """Cycles of one kernel pass on one wafer for one micro-batch.

    ``bound_by`` says what sets the forward pass: ``'axpy'`` (the cores' AXPYs and partial-sum
    overhead), ``'partial_sum_ring'`` (the column ring's bandwidth) or ``'gather'`` (an embedding).
    """

    forward: float
    backward: float
    busiest_row_nnz: int
    axpy_cycles: int
    tokens_per_core: int
    bound_by: str = "axpy"


def kernel_cycles(kind: str, profile: NnzProfile, tokens: int, wafer: WaferConfig) -> KernelCycles:
    """Forward and backward cycles of a kernel over ``tokens`` tokens on one wafer."""
    R, C = wafer.core_rows, wafer.core_cols
    t_c = max(1, math.ceil(tokens / C))
    axpy = math.ceil(t_c / wafer.simd_width)
    fill = (R + C) * wafer.hop_latency_cycles
    if kind == "embedding":
        gather = math.ceil(tokens * profile.in_features / (wafer.cores * wafer.simd_width))
        eff = wafer.kernel_efficiency
        return KernelCycles((gather + fill) / eff, (2 * gather + fill) / eff, 0, axpy, t_c, "gather")
    ovh = wafer.partial_sum_overhead_cycles
    busy_in = profile.busiest_input_row(R)
    busy_out = profile.busiest_output_row(R)
    ring = t_c / wafer.partial_sum_ring_wavelets_per_cycle  # cycles per feature on every link of the ring
    cores_f = busy_in * axpy + profile.out_features * ovh
    ring_f = profile.out_features * ring
    forward = max(cores_f, ring_f) + fill
    # Backward data: dY's features on rows, reductions over the input features on the ring.
    backward_data = max(busy_out * axpy + profile.in_features * ovh, profile.in_features * ring) + fill
    backward_weight = busy_in * axpy + C * wafer.hop_latency_cycles
    eff = wafer.kernel_efficiency  # achieved fraction of this ideal schedule (1.0 unless calibrated)
    bound = "partial_sum_ring" if ring_f > cores_f else "axpy"
    return KernelCycles(forward / eff, (backward_data + backward_weight) / eff, busy_in, axpy, t_c, bound)
