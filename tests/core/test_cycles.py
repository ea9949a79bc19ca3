"""Cycle model of one streamed kernel on one wafer: exact numbers on tiny cases."""

from __future__ import annotations

import math

import numpy as np
import pytest
from core_helpers import dense_model, scenario_dict
from hypothesis import given, settings
from hypothesis import strategies as st

import wss
from wss.model.kernels.cycles import NnzProfile, dense_profile, kernel_cycles, sampled_profile
from wss.model.kernels.mapping import deal_rows, row_loads
from wss.model.scenario import WaferConfig

HYPOTHESIS = settings(database=None, deadline=None, max_examples=60)


def small_wafer(**over) -> WaferConfig:
    fields = dict(
        core_rows=4,
        core_cols=8,
        sram_per_core_bytes=1024,
        clock_Hz=1e9,
        simd_width=4,
        hop_latency_cycles=2,
        io_bandwidth_Bps=1e9,
        partial_sum_overhead_cycles=4,
        # A ring that never binds: these tests check the cores' terms; the ring has its own tests below.
        partial_sum_ring_wavelets_per_cycle=1e9,
        # One lane: these tests check the closed form of one layout; lanes have their own (test_lanes.py).
        max_lanes=1,
    )
    fields.update(over)
    return WaferConfig(**fields)


# ---------------------------------------------------------------------------- the partial-sum ring


def test_the_ring_bounds_a_narrow_kernel_at_out_features_times_tokens_per_core():
    """One input feature per row (K <= R): the cores spend ceil(t_c/simd) + 4 per output feature, each hop of
    the ring t_c (R - 1) / R (it starts after the feature's home row and ends on it); with t_c = 32 tokens
    per core on 4 rows the ring (24) beats the cores (8 + 4) and sets the pass."""
    w = small_wafer(partial_sum_ring_wavelets_per_cycle=1)
    M, K, tokens = 10, 4, 32 * 8  # K = R: one input feature per row; 32 tokens per core
    kc = kernel_cycles("matmul", dense_profile(M, K), tokens, w)
    fill = (w.core_rows + w.core_cols) * w.hop_latency_cycles
    assert kc.bound_by == "partial_sum_ring"
    assert kc.forward == M * 24 + fill
    # A faster ring lowers its bound (1.5 wavelets a cycle: 16, still above the cores' 12 per feature).
    assert kernel_cycles("matmul", dense_profile(M, K), tokens,
                         small_wafer(partial_sum_ring_wavelets_per_cycle=1.5)).forward == M * 16 + fill
    # Backward data reduces over the input features on the same ring.
    assert kc.backward >= K * 24 + fill
    # A lane of one row has no ring: 4 lanes of 1 row, 8 tokens per core, 2 cycles an AXPY + 4 per feature.
    lanes4 = kernel_cycles("matmul", dense_profile(M, K), tokens, small_wafer(partial_sum_ring_wavelets_per_cycle=1,
                                                                             max_lanes=4))
    assert (lanes4.lanes, lanes4.tokens_per_core, lanes4.bound_by) == (4, 8, "axpy")
    assert lanes4.forward == K * M * 2 + M * 4 + (1 + 8) * 2


def test_the_ring_never_binds_a_wide_dense_kernel():
    """GPT-3 175B's 12288-wide layers put 17 input features on each WSE-2 row: the cores' 17 x ceil(t_c/4)
    cycles per feature exceed the ring's t_c at every token count.  A narrow one (GPT-2's 768 -> 3072) is
    ring-bound on one lane past one token per core, and not once it folds into lanes."""
    from wss.model.scenario import load_scenario

    wse2 = load_scenario({"name": "x", "hardware": {"preset": "cs2-cluster"}, "workload": {"model": "gpt3-125m"},
                          "training": {"global_batch": 1}}).hardware.wafer
    for tokens in (996, 8 * 2048, 64 * 2048):
        assert kernel_cycles("matmul", dense_profile(12288, 12288), tokens, wse2).bound_by == "axpy"
        one_lane = wse2.model_copy(update={"max_lanes": 1})
        assert kernel_cycles("matmul", dense_profile(3072, 768), tokens, one_lane).bound_by == (
            "partial_sum_ring" if tokens > 996 else "axpy")
        assert kernel_cycles("matmul", dense_profile(3072, 768), tokens, wse2).bound_by == "axpy"


# ---------------------------------------------------------------------------- dense forward / backward


@pytest.mark.parametrize(
    "M, K, T, expected_forward",
    [
        # busiest row = ceil(K/R) * M; t_c = ceil(T/C); axpy = ceil(t_c/simd); + M*4 + (R+C)*2
        (6, 10, 50, 3 * 6 * 2 + 6 * 4 + 12 * 2),  # t_c 7 -> 2 cycles per AXPY
        (6, 10, 8, 3 * 6 * 1 + 6 * 4 + 12 * 2),  # t_c 1
        (6, 10, 1, 3 * 6 * 1 + 6 * 4 + 12 * 2),  # fewer tokens than columns: still one token per core
        (5, 8, 33, 2 * 5 * 2 + 5 * 4 + 12 * 2),  # t_c 5 -> 2
        (1, 1, 256, 1 * 1 * 8 + 1 * 4 + 12 * 2),  # t_c 32 -> 8
    ],
)
def test_dense_forward_cycles_closed_form(M, K, T, expected_forward):
    kc = kernel_cycles("matmul", dense_profile(M, K), T, small_wafer())
    assert kc.forward == expected_forward
    assert kc.tokens_per_core == max(1, math.ceil(T / 8))
    assert kc.axpy_cycles == math.ceil(kc.tokens_per_core / 4)
    assert kc.busiest_row_nnz == math.ceil(K / 4) * M


def test_dense_backward_is_delta_plus_weight_gradient():
    w = small_wafer()
    M, K, T = 6, 10, 50  # t_c 7, axpy 2
    kc = kernel_cycles("matmul", dense_profile(M, K), T, w)
    delta = math.ceil(M / 4) * K * 2 + K * 4 + (4 + 8) * 2  # output features dealt to rows, one overhead per input
    weight_grad = math.ceil(K / 4) * M * 2 + 8 * 2  # one dot product per non-zero, reduced across columns
    assert kc.backward == delta + weight_grad
    assert 1.5 * kc.forward < kc.backward < 2.5 * kc.forward  # "about twice forward"


def test_each_term_of_the_forward_formula_moves_the_cycles():
    base = kernel_cycles("matmul", dense_profile(6, 10), 50, small_wafer()).forward
    no_overhead = small_wafer(partial_sum_overhead_cycles=0)
    assert kernel_cycles("matmul", dense_profile(6, 10), 50, no_overhead).forward == base - 24
    assert kernel_cycles("matmul", dense_profile(6, 10), 50, small_wafer(hop_latency_cycles=0)).forward == base - 24
    assert kernel_cycles("matmul", dense_profile(6, 10), 50, small_wafer(simd_width=8)).forward == base - 18
    assert kernel_cycles("matmul", dense_profile(6, 10), 50, small_wafer(core_rows=10)).forward == (
        1 * 6 * 2 + 6 * 4 + (10 + 8) * 2
    )


def test_embedding_is_a_gather():
    w = small_wafer()
    kc = kernel_cycles("embedding", dense_profile(1000, 16), 50, w)
    gather = math.ceil(50 * 16 / (32 * 4))
    assert kc.forward == gather + 24
    assert kc.backward == 2 * gather + 24


# ---------------------------------------------------------------------------- tail worker, dealing


def test_one_hot_column_makes_the_busiest_row_exceed_the_mean():
    w = small_wafer()
    M, K = 10, 8
    cols = np.array([10, 1, 1, 1, 1, 1, 1, 1])
    rows = np.array([8, 1, 1, 1, 1, 1, 1, 1, 1, 1])
    assert cols.sum() == rows.sum() == 17
    hot = NnzProfile(M, K, 17, cols, rows)
    # sorted [10,1,1,1,1,1,1,1] dealt over 4 rows -> loads [11, 2, 2, 2]
    assert list(row_loads(cols, 4)) == [11, 2, 2, 2]
    assert hot.busiest_input_row(4) == 11
    assert hot.busiest_input_row(4) > cols.sum() / 4
    kc = kernel_cycles("matmul", hot, 50, w)
    assert kc.busiest_row_nnz == 11
    assert kc.forward == 11 * 2 + M * 4 + 12 * 2
    # the same number of non-zeros spread evenly would be faster
    even_cols = np.array([3, 2, 2, 2, 2, 2, 2, 2])
    even = NnzProfile(M, K, 17, even_cols, rows)
    assert kernel_cycles("matmul", even, 50, w).forward < kc.forward


def test_partial_sum_overhead_is_paid_whatever_the_sparsity():
    w = small_wafer()
    M, K = 12, 8
    nearly_empty = NnzProfile(M, K, 1, np.array([1, 0, 0, 0, 0, 0, 0, 0]), np.eye(1, M, 0, dtype=int)[0])
    kc = kernel_cycles("matmul", nearly_empty, 50, w)
    assert kc.forward == 1 * 2 + M * 4 + 12 * 2  # Amdahl: M * overhead remains


def test_deal_rows_sorts_then_deals_round_robin():
    counts = np.array([3, 9, 1, 7, 5])
    # descending: 9 (i1), 7 (i3), 5 (i4), 3 (i0), 1 (i2) -> rows 0, 1, 0, 1, 0
    assert list(deal_rows(counts, 2)) == [1, 0, 0, 1, 0]
    assert list(row_loads(counts, 2)) == [15, 10]
    assert list(deal_rows(counts, 3)) == [0, 0, 1, 1, 2]  # 9->0, 7->1, 5->2, 3->0, 1->1
    assert list(row_loads(counts, 3)) == [12, 8, 5]


def test_deal_rows_ties_keep_feature_order():
    assert list(deal_rows(np.array([2, 2, 2]), 2)) == [0, 1, 0]
    assert list(deal_rows(np.array([1, 2, 2, 1]), 2)) == [0, 0, 1, 1]  # 2 (i1), 2 (i2), 1 (i0), 1 (i3)


def test_more_engine_rows_than_features():
    assert list(row_loads(np.array([4, 1]), 5)) == [4, 1, 0, 0, 0]
    assert list(deal_rows(np.array([4, 1]), 5)) == [0, 1]


@pytest.mark.parametrize("fn", [deal_rows, row_loads])
def test_zero_engine_rows_is_rejected(fn):
    with pytest.raises(ValueError):
        fn(np.array([1, 2]), 0)


@HYPOTHESIS
@given(st.lists(st.integers(0, 1000), min_size=1, max_size=60), st.integers(1, 20))
def test_row_loads_equal_the_dealt_assignment(counts, n_rows):
    counts = np.array(counts, dtype=np.int64)
    assignment = deal_rows(counts, n_rows)
    loads = row_loads(counts, n_rows)
    assert loads.shape == (n_rows,)
    assert np.array_equal(loads, np.bincount(assignment, weights=counts, minlength=n_rows).astype(np.int64))
    assert loads.sum() == counts.sum()  # conservation of non-zeros
    assert loads.max() >= math.ceil(counts.sum() / n_rows)  # never better than perfect balance
    assert np.all(np.diff(loads) <= 0)  # round-robin after a descending sort: row 0 is the busiest
    # every row but the busiest differs from it by at most the largest single feature
    assert loads.max() - loads.min() <= counts.max()


# ---------------------------------------------------------------------------- sampled profiles


def test_sampled_profile_is_deterministic_for_a_seed():
    a = sampled_profile(300, 200, 0.1, np.random.default_rng(7))
    b = sampled_profile(300, 200, 0.1, np.random.default_rng(7))
    c = sampled_profile(300, 200, 0.1, np.random.default_rng(8))
    assert a.nnz == b.nnz and np.array_equal(a.col_counts, b.col_counts) and np.array_equal(a.row_counts, b.row_counts)
    assert not np.array_equal(a.col_counts, c.col_counts)


@pytest.mark.parametrize("density", [0.01, 0.1, 0.5, 0.9])
def test_sampled_profile_row_and_column_counts_agree(density):
    M, K = 400, 300
    p = sampled_profile(M, K, density, np.random.default_rng(1))
    assert p.col_counts.shape == (K,) and p.row_counts.shape == (M,)
    assert int(p.col_counts.sum()) == int(p.row_counts.sum()) == p.nnz
    assert p.col_counts.max() <= M and p.row_counts.min() >= 0
    # binomial mean within a few standard deviations
    mean, sd = M * K * density, math.sqrt(M * K * density * (1 - density))
    assert abs(p.nnz - mean) < 6 * sd


def test_dense_density_gives_the_dense_profile():
    p = sampled_profile(30, 20, 1.0, np.random.default_rng(0))
    assert p.nnz == 600 and p.col_counts is None


def test_sparse_kernel_busiest_row_exceeds_the_mean_row():
    w = small_wafer(core_rows=64)
    p = sampled_profile(512, 1024, 0.1, np.random.default_rng(3))
    busiest = p.busiest_input_row(64)
    assert busiest > p.nnz / 64  # tail-worker effect on a real draw
    assert busiest < 2 * p.nnz / 64
    assert kernel_cycles("matmul", p, 64, w).busiest_row_nnz == busiest


def test_plan_profiles_are_deterministic_and_follow_the_seed():
    raw = scenario_dict(model=dense_model(512, 512), workload={"sparsity": 0.8})
    a, b = wss.plan(raw), wss.plan(raw)
    c = wss.plan(scenario_dict(model=dense_model(512, 512), workload={"sparsity": 0.8}, seed=5))
    pa, pb, pc = a.kernels[0].profile, b.kernels[0].profile, c.kernels[0].profile
    assert np.array_equal(pa.col_counts, pb.col_counts) and np.array_equal(pa.row_counts, pb.row_counts)
    assert not np.array_equal(pa.col_counts, pc.col_counts)
    assert pa.col_counts.sum() == pa.row_counts.sum() == a.kernels[0].nnz


def test_plan_cycles_use_the_wafer_and_the_micro_batch_tokens():
    raw = scenario_dict(model=dense_model(2048, 1000), global_batch=3000)
    plan = wss.plan(raw)
    s = wss.load_scenario(raw)
    (tokens,) = plan.kernels[0].cycles
    assert tokens == plan.micro_batches[0] * plan.tokens_per_sample
    w = s.hardware.wafer
    kc = plan.kernels[0].cycles[tokens]
    t_c = math.ceil(tokens / w.core_cols)
    expected = math.ceil(2048 / w.core_rows) * 1000 * math.ceil(t_c / w.simd_width) + 1000 * 4 + (
        w.core_rows + w.core_cols
    ) * w.hop_latency_cycles
    assert kc.forward == expected / w.kernel_efficiency  # the ideal schedule over the achieved fraction
