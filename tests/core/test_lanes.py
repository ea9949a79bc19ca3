"""Lanes: a layer narrower than the wafer folds into groups of rows, each on its share of the tokens."""

from __future__ import annotations

import numpy as np
import pytest

import wss
from wss.model.kernels.cycles import dense_profile, kernel_cycles, sampled_profile
from wss.model.kernels.lanes import lane_candidates, lane_layout
from wss.model.scenario import WaferConfig


def wafer_of(preset: str) -> WaferConfig:
    s = wss.load_scenario({"name": "x", "hardware": {"preset": preset}, "workload": {"model": "gpt3-125m"},
                           "training": {"global_batch": 1}})
    return s.hardware.wafer


def test_a_lane_layout_keeps_the_tokens_per_core_times_features_per_row() -> None:
    one, seven = lane_layout(1, 57344, 757, 996, 4), lane_layout(7, 57344, 757, 996, 4)
    assert (one.rows, one.tokens_per_core, one.axpy_cycles) == (757, 58, 15)
    assert (seven.rows, seven.tokens_per_core, seven.axpy_cycles) == (108, 9, 3)
    assert 768 / one.rows * one.tokens_per_core == pytest.approx(768 / seven.rows * seven.tokens_per_core, rel=0.1)
    with pytest.raises(ValueError):
        lane_layout(0, 100, 10, 10, 4)


def test_lane_candidates_stop_at_the_rows_the_tokens_and_max_lanes() -> None:
    assert list(lane_candidates(100, 10, 50, None)) == [1, 2]  # a lane of fewer than C tokens idles columns
    assert lane_candidates(10**7, 10, 50, None)[-1] == 10  # at most one row per lane
    assert list(lane_candidates(10**7, 10, 50, 3)) == [1, 2, 3]


def test_lanes_lift_the_ring_bound_of_a_narrow_layer() -> None:
    """GPT-2 small's 768 -> 3072 on a CS-2 at a micro-batch of 28 x 2048 tokens: on one lane the ring binds;
    folded into lanes (the compiler's logs show 7 at this micro-batch) the cores set the pass, much faster."""
    wse2 = wafer_of("cs2-cluster")
    one = kernel_cycles("matmul", dense_profile(3072, 768), 28 * 2048, wse2.model_copy(update={"max_lanes": 1}))
    folded = kernel_cycles("matmul", dense_profile(3072, 768), 28 * 2048, wse2)
    assert one.bound_by == "partial_sum_ring" and folded.bound_by == "axpy"
    assert folded.lanes > 1
    assert folded.forward < 0.8 * one.forward


def test_a_wide_dense_layer_gains_little_from_lanes() -> None:
    """GPT-3 175B's 12288 x 12288 is core-bound on one lane: lanes can only trim rounding."""
    wse2 = wafer_of("cs2-cluster")
    one = kernel_cycles("matmul", dense_profile(12288, 12288), 8 * 2048, wse2.model_copy(update={"max_lanes": 1}))
    folded = kernel_cycles("matmul", dense_profile(12288, 12288), 8 * 2048, wse2)
    assert one.bound_by == "axpy"
    assert 0.9 * one.forward <= folded.forward <= one.forward


@pytest.mark.parametrize("sparsity", [0.5, 0.7, 0.9])
def test_sparse_kernels_follow_amdahls_law_over_the_partial_sum_overhead(sparsity: float) -> None:
    """Llama-2 7B's 4096 x 4096 on a CS-3 at 32 x 4096 tokens: the sparse kernel's forward speed-up is at
    least 90% of Amdahl's law with the blog's 4-cycle overhead per output feature on every row,
    (W + 4) / ((1 - s) W + 4), W the dense AXPY cycles per feature of a row (K T / (R C simd))."""
    wse3 = wafer_of("cs3-cluster")
    tokens = 32 * 4096
    dense = kernel_cycles("matmul", dense_profile(4096, 4096), tokens, wse3)
    sparse = kernel_cycles("matmul", sampled_profile(4096, 4096, 1 - sparsity, np.random.default_rng(0)), tokens,
                           wse3)
    W = 4096 * tokens / (wse3.core_rows * wse3.core_cols * wse3.simd_width)
    amdahl = (W + 4) / ((1 - sparsity) * W + 4)
    speedup = dense.forward / sparse.forward
    assert 0.9 * amdahl <= speedup <= amdahl * 1.05
    assert sparse.bound_by == "axpy"
