"""A core-level model of one kernel on one lane of the mesh, to check the closed form against.

:func:`wss.model.kernels.cycles.kernel_cycles` prices a kernel in closed form: the larger of the busiest
row's AXPYs plus the 4-cycle partial-sum overhead per output feature and the ring's partial sums, plus
fill.  This module plays the same kernel out core by core on one lane (:mod:`wss.model.kernels.lanes`)
of ``R'`` rows, following M. James, "Scaling Up and Out" (Cerebras blog, 2021):

* the weights arrive grouped by output feature, each sent to the row holding its input feature (rows
  dealt by :func:`wss.model.kernels.mapping.deal_rows`); a row runs its own weights in stream order, one
  AXPY of ``ceil(t_c / simd)`` cycles each, and when a feature's control message comes it spends the
  overhead (copy, reset, add: 4 cycles) and hands the feature's ``t_c`` partial sums to its partial-sum
  thread.  No barrier: a row goes on to the next feature at once (the blog's separate thread);
* feature ``m``'s partial sums are reduced along the lane's ring, starting at the row after its home row
  ``-m mod R'`` and ending on it ("it can start and end on any row"): ``R' - 1`` hops, each a link that
  moves ``partial_sum_ring_wavelets_per_cycle`` wavelets a cycle and serves features in order.  The
  chain's head leaves a row once it has arrived and that row's own partial sum is ready (the row adds
  it as the wavelets stream through) and once the hop has sent the previous feature; the tail follows
  ``t_c`` wavelets later; the head takes ``hop_latency_cycles`` a hop.  The home rows run backwards
  round the ring so that each feature's chain starts on the hop its predecessor left unused and then
  follows it hop by hop (homes running forwards would start each chain on its predecessor's second hop
  and lose a hop's latency per feature);
* every column runs the same schedule on its own tokens, the weights reaching column ``c`` ``c + 1`` hops
  after the first: the last column finishes ``C`` hops after a column that started at once.

The backward pass's delta propagation is the same pass on the transposed mask; its weight gradients are
one dot product per non-zero on the row of its input feature.  Only the validation tests use this
model: it validates the closed form, the simulator never runs it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from wss.model.kernels.lanes import lane_layout
from wss.model.kernels.mapping import deal_rows
from wss.model.scenario.hardware import WaferConfig

__all__ = ["MeshPass", "MeshKernel", "lane_rows_nnz", "mesh_pass", "mesh_kernel"]


@dataclass(frozen=True)
class MeshPass:
    """One pass on one lane: when it ends, and how long its busiest row and its busiest ring hop worked."""

    cycles: float
    busiest_row_cycles: float
    busiest_hop_cycles: float


@dataclass(frozen=True)
class MeshKernel:
    """Forward and backward cycles of a kernel played out core by core on ``lanes`` lanes."""

    forward: float
    backward: float
    lanes: int
    forward_pass: MeshPass


def lane_rows_nnz(mask: np.ndarray, rows: int) -> np.ndarray:
    """``nnz[m, r]``: non-zeros of output feature ``m`` (a row of ``mask``) on lane row ``r``, the input
    features (columns of ``mask``) dealt to the rows by non-zero count, round-robin."""
    mask = np.asarray(mask, dtype=bool)
    where = deal_rows(mask.sum(axis=0), rows)
    out = np.zeros((mask.shape[0], rows), dtype=np.int64)
    for r in range(rows):
        out[:, r] = mask[:, where == r].sum(axis=1)
    return out


def mesh_pass(nnz: np.ndarray, tokens_per_core: int, wafer: WaferConfig) -> MeshPass:
    """Play one pass (forward, or delta propagation on the transposed mask) out on one lane's rows."""
    M, R = nnz.shape
    axpy = math.ceil(tokens_per_core / wafer.simd_width)
    hop = wafer.hop_latency_cycles
    send = tokens_per_core / wafer.partial_sum_ring_wavelets_per_cycle  # a hop's cycles for one feature
    # ready[m, r]: when row r has handed feature m's partial sums to its partial-sum thread.
    ready = np.cumsum(nnz * axpy + wafer.partial_sum_overhead_cycles, axis=0, dtype=float)
    hop_free = np.zeros(R)
    hop_busy = np.zeros(R)
    finish = 0.0
    for m in range(M):
        home = -m % R
        node = (home + 1) % R
        head = ready[m, node]
        for _ in range(R - 1):  # hop `node` -> node + 1, up to the home row
            leave = max(head, hop_free[node])
            hop_free[node] = leave + send
            hop_busy[node] += send
            node = (node + 1) % R
            head = max(leave + hop, ready[m, node])
        finish = max(finish, head + (send if R > 1 else 0.0))
    busiest_row = float(ready[-1].max()) if M else 0.0
    return MeshPass(finish + wafer.core_cols * hop, busiest_row, float(hop_busy.max()))


def mesh_kernel(mask: np.ndarray, tokens: int, wafer: WaferConfig, lanes: int) -> MeshKernel:
    """Forward and backward cycles of the kernel with weight mask ``mask`` (``out x in``) over ``tokens``
    tokens in ``lanes`` lanes (every lane alike: the same weights, an even share of the tokens), at the ideal
    schedule (no ``kernel_efficiency``)."""
    lay = lane_layout(lanes, tokens, wafer.core_rows, wafer.core_cols, wafer.simd_width)
    forward_nnz = lane_rows_nnz(mask, lay.rows)
    forward = mesh_pass(forward_nnz, lay.tokens_per_core, wafer)
    backward_data = mesh_pass(lane_rows_nnz(np.asarray(mask).T, lay.rows), lay.tokens_per_core, wafer)
    # Weight gradients: one length-t_c dot product per non-zero on its input feature's row, summed along the row.
    weight_grad = float(forward_nnz.sum(axis=0).max()) * lay.axpy_cycles + wafer.core_cols * wafer.hop_latency_cycles
    return MeshKernel(forward.cycles, backward_data.cycles + weight_grad, lanes, forward)
