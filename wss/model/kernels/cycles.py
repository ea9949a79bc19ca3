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
* a kernel also pays mesh fill/drain: ``(R' + C)`` hops;
* lanes (:mod:`wss.model.kernels.lanes`): a layer may fold into ``L`` lanes of ``R' = floor(R / L)``
  rows, each lane running the kernel on its ``1 / L`` of the tokens; below, ``R'`` and ``t_c`` are a
  lane's, and the compiler's choice of ``L`` is :func:`choose_lanes`;
* the partial-sum path: when an output feature completes, each core copies its ``t_c`` fp32 partial
  sums to the partial-sum thread, which reduces them along the lane's column ring "in a separate
  parallel thread" (the blog), i.e. concurrently with the next features' AXPYs: the pass takes the
  larger of the cores' work and the ring's.  The ring's width: one fp32 partial sum per wavelet (the
  blog's 38-bit message carries a 32-bit payload, the SDK documentation's wavelet; the blog's
  "double-wide" add is the fp32 add of a 16-bit datapath).  Its directions: every link carries one
  wavelet each way per cycle (the blog's 28 PB/s of bidirectional fabric bandwidth is 850k cores x 4
  links x 2 directions x 38 bits at 0.853 GHz = 27.6 PB/s), but a ring laid along a column of a mesh
  with no wrap-around links folds back on itself and so uses both directions of every link; and any
  reduction that leaves its results spread over the rows (the blog's ring "can start and end on any
  row") must send almost all of an edge row's partial sums through that row's one vertical link.  So
  a ring moves ``partial_sum_ring_wavelets_per_cycle`` (1) partial sums per cycle on each hop, each hop
  carrying ``(R' - 1) / R'`` of every feature's ``t_c`` values: at least ``M t_c (R' - 1) / R'`` cycles
  a pass.  With one lane it binds when a row holds fewer than about ``simd`` input features
  (``ceil(K / R) x ceil(t_c / simd) + 4 < t_c``); lanes divide ``t_c`` by ``L`` and lift that bound, so
  a sparse kernel's time follows its non-zeros down to the 4-cycle overhead (Amdahl's law, the blog).
  The weights' delivery along the rows (one wavelet per weight, index included) never binds: a weight
  costs at least one AXPY cycle, and a row receives one per cycle.

Backward = delta propagation ``dX = W^T dY`` (the same AXPYs with broadcast
and reduction swapped, dY's features on rows, one overhead per input feature)
plus weight gradients (one length-``t_c`` dot product per non-zero on the row
of its input feature, reduced across columns): about twice forward.

Embedding kernels gather rows: ``T x d`` element copies spread over the cores.

All of the above is an ideal schedule; ``WaferConfig.kernel_efficiency`` (1.0 by default) is
the achieved fraction of it, calibrated on published measured runs where a preset sets it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from wss.model.kernels.lanes import lane_candidates, lane_layout
from wss.model.kernels.mapping import row_loads
from wss.model.scenario.hardware import WaferConfig

__all__ = ["NnzProfile", "KernelCycles", "kernel_cycles", "choose_lanes", "dense_profile", "sampled_profile"]


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
    ``lanes`` is how many lanes the kernel folds into (:mod:`wss.model.kernels.lanes`); ``busiest_row_nnz``,
    ``axpy_cycles`` and ``tokens_per_core`` are those of one lane.
    """

    forward: float
    backward: float
    busiest_row_nnz: int
    axpy_cycles: int
    tokens_per_core: int
    bound_by: str = "axpy"
    lanes: int = 1


Cycles = TypeVar("Cycles", float, np.ndarray)


@dataclass(frozen=True)
class _Fabric:
    """The numbers of a kernel and its wafer that the closed form reads (hashable, for the lane choice's cache)."""

    out_features: int
    in_features: int
    cols: int
    hop: float
    overhead: float
    ring_wavelets: float

    @classmethod
    def of(cls, profile: NnzProfile, wafer: WaferConfig) -> _Fabric:
        return cls(profile.out_features, profile.in_features, wafer.core_cols, wafer.hop_latency_cycles,
                   wafer.partial_sum_overhead_cycles, wafer.partial_sum_ring_wavelets_per_cycle)


def _pass_cycles(busy_in: Cycles, busy_out: Cycles, rows: Cycles, t_c: Cycles, axpy: Cycles, fab: _Fabric,
                 mx: Callable[[Cycles, Cycles], Cycles]) -> tuple[Cycles, Cycles, Cycles, Cycles, Cycles]:
    """Forward, backward-data and weight-gradient cycles of one lane of ``rows`` rows (scalars, ``mx`` = max,
    or arrays of layouts, ``mx`` = numpy.maximum), and the forward's cores and ring terms: the closed form of
    docs/model.md, "Cycles on the wafer".

    A ring of ``rows`` rows carries each output feature's ``t_c`` partial sums over ``rows - 1`` of its
    ``rows`` hops (it starts after the feature's home row and ends on it), so each hop carries
    ``(rows - 1) / rows`` of them per feature; a lane of one row has no ring.
    """
    M, K, C = fab.out_features, fab.in_features, fab.cols
    ring = t_c * (rows - 1) / rows / fab.ring_wavelets  # per feature, on every hop
    fill = (rows + C) * fab.hop
    cores_f = busy_in * axpy + M * fab.overhead
    ring_f = M * ring
    forward = mx(cores_f, ring_f) + fill
    # Backward data: dY's features on rows, reductions over the input features on the ring.
    backward_data = mx(busy_out * axpy + K * fab.overhead, K * ring) + fill
    backward_weight = busy_in * axpy + C * fab.hop
    return forward, backward_data, backward_weight, cores_f, ring_f


#: Above this many lane counts to price, the choice is vectorised; below, plain arithmetic is faster.
_VECTOR_FROM = 48


@functools.lru_cache(maxsize=4096)
def _best_lanes(fab: _Fabric, nnz: int, tokens: int, rows_total: int, simd: int, max_lanes: int | None) -> int:
    """:func:`choose_lanes` on plain numbers (cached: a plan asks for the same kernels at the same sizes)."""
    lanes = lane_candidates(tokens, rows_total, fab.cols, max_lanes)
    M, K = fab.out_features, fab.in_features
    if lanes.size == 1:
        return 1
    if lanes.size >= _VECTOR_FROM:
        rows = rows_total // lanes
        per_lane = -(-tokens // lanes)  # ceil(T / L) tokens in a lane
        t_c = np.maximum(1, -(-per_lane // fab.cols))
        axpy = -(-t_c // simd)
        f, bd, bw, _, _ = _pass_cycles(-(-K // rows) * (nnz / K), -(-M // rows) * (nnz / M), rows.astype(float),
                                       t_c.astype(float), axpy.astype(float), fab, np.maximum)
        return int(lanes[int(np.argmin(f + bd + bw))])
    best, best_cost = 1, math.inf
    for n in range(1, int(lanes[-1]) + 1):
        rows_n = rows_total // n
        per_lane_n = -(-tokens // n)
        t_c_n = max(1, -(-per_lane_n // fab.cols))
        fs, bds, bws, _, _ = _pass_cycles(-(-K // rows_n) * (nnz / K), -(-M // rows_n) * (nnz / M), float(rows_n),
                                          float(t_c_n), float(-(-t_c_n // simd)), fab, max)
        if fs + bds + bws < best_cost:
            best, best_cost = n, fs + bds + bws
    return best


def choose_lanes(profile: NnzProfile, tokens: int, wafer: WaferConfig) -> int:
    """The lane count the compiler is taken to pick (:mod:`wss.model.kernels.lanes`): the fewest lanes of
    least forward + backward cycles, estimating each row's load from the layer's shape and mean density
    (``ceil(K / R')`` features of ``nnz / K`` non-zeros each)."""
    return _best_lanes(_Fabric.of(profile, wafer), profile.nnz, tokens, wafer.core_rows, wafer.simd_width,
                       wafer.max_lanes)


def kernel_cycles(kind: str, profile: NnzProfile, tokens: int, wafer: WaferConfig) -> KernelCycles:
    """Forward and backward cycles of a kernel over ``tokens`` tokens on one wafer."""
    R, C = wafer.core_rows, wafer.core_cols
    eff = wafer.kernel_efficiency  # achieved fraction of this ideal schedule (1.0 unless calibrated)
    if kind == "embedding":
        t_c = max(1, math.ceil(tokens / C))
        axpy = math.ceil(t_c / wafer.simd_width)
        fill = (R + C) * wafer.hop_latency_cycles
        gather = math.ceil(tokens * profile.in_features / (wafer.cores * wafer.simd_width))
        return KernelCycles((gather + fill) / eff, (2 * gather + fill) / eff, 0, axpy, t_c, "gather")
    fab = _Fabric.of(profile, wafer)  # read once: the lane choice and the closed form both take it
    lanes = _best_lanes(fab, profile.nnz, tokens, R, wafer.simd_width, wafer.max_lanes)  # choose_lanes
    lay = lane_layout(lanes, tokens, R, C, wafer.simd_width)
    busy_in = profile.busiest_input_row(lay.rows)
    busy_out = profile.busiest_output_row(lay.rows)
    f, bd, bw, cores_f, ring_f = _pass_cycles(float(busy_in), float(busy_out), float(lay.rows),
                                              float(lay.tokens_per_core), float(lay.axpy_cycles), fab, max)
    bound = "partial_sum_ring" if ring_f > cores_f else "axpy"
    return KernelCycles(float(f) / eff, float(bd + bw) / eff, busy_in, lay.axpy_cycles, lay.tokens_per_core,
                        bound, lay.lanes)
