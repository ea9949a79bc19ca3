"""How a layer narrower than the wafer folds onto it: lanes.

The Cerebras compiler folds narrow layers into *lanes*: its logs print ``<microbatch=28, lanes=7>`` and
``<batch=112, lanes=7-12>`` for GPT-2 small on a CS-2 (ALCF run logs of GPT-2 small at release R2.x, the
micro-batch search of measured runs M1 and M7 in wss's measurement table).  wss models a lane as an
independent group of engine rows that runs the whole kernel on its own share of the micro-batch's tokens:

* ``L`` lanes of ``R' = floor(R / L)`` rows each (left-over rows idle), every lane spanning all ``C``
  columns;
* each lane holds ``ceil(T / L)`` of the ``T`` tokens, so a core holds ``t_c = ceil(ceil(T / L) / C)``
  tokens of its ``K / R'`` features: the same activation bytes per core as with one lane;
* every weight is multicast to the row holding its input feature in each lane (multicast is a fabric
  primitive: M. James, "Scaling Up and Out", Cerebras blog, 2021), so a lane's rows see the same weights
  as one wide layout's rows would, ``L`` times as many features per row on ``1 / L`` of the tokens;
* each lane reduces its own partial sums on its own ring of ``R'`` rows.

Lanes change nothing in the cores' arithmetic (``K / R' x t_c`` is ``K T / (R C)`` whatever ``L``) but
divide the partial sums every link of a ring carries per output feature by ``L``: the ring binds a layer
whose rows hold fewer than about ``simd`` input features (a narrow layer, or a sparse one), and lanes
undo that.  ASSUMPTIONS (the compiler's rule is not published): a lane takes any share of the tokens (a
matmul treats every token alike; the logged lane counts divide the micro-batch of samples, which differs
only by rounding), and the compiler picks, per kernel, the lane count that minimises the kernel's cycles
(forward, backward data and weight gradients) estimated from the layer's shape and mean density, the
busiest row then priced exactly on the chosen layout (:func:`wss.model.kernels.cycles.kernel_cycles`).
The cross-lane sum of weight gradients never binds: a column's vertical links carry about ``nnz / C`` of
them against a row's ``nnz L / R`` dot products of ``ceil(t_c / simd)`` cycles each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["LaneLayout", "lane_layout", "lane_candidates"]


@dataclass(frozen=True)
class LaneLayout:
    """One way to lay a kernel over the wafer: ``lanes`` groups of ``rows`` engine rows each."""

    lanes: int
    rows: int  # engine rows per lane
    tokens_per_core: int  # t_c: tokens of a lane's share held by each core
    axpy_cycles: int  # ceil(t_c / simd): cycles of one AXPY on a core


def lane_layout(lanes: int, tokens: int, core_rows: int, core_cols: int, simd: int) -> LaneLayout:
    """The layout of ``tokens`` tokens in ``lanes`` lanes on a ``core_rows x core_cols`` grid."""
    if not 1 <= lanes <= core_rows:
        raise ValueError(f"lanes must be in [1, {core_rows}], got {lanes}")
    t_c = max(1, math.ceil(math.ceil(tokens / lanes) / core_cols))
    return LaneLayout(lanes, core_rows // lanes, t_c, math.ceil(t_c / simd))


def lane_candidates(tokens: int, core_rows: int, core_cols: int, max_lanes: int | None) -> np.ndarray:
    """Lane counts worth pricing: 1 up to the rows, the tokens' columns (a lane of fewer than ``C`` tokens
    leaves columns idle) and ``max_lanes``."""
    top = min(core_rows, max(1, math.ceil(tokens / core_cols)))
    if max_lanes is not None:
        top = max(1, min(top, max_lanes))
    return np.arange(1, top + 1, dtype=np.int64)
