"""Capacity checks of the static plan: MemoryX, flash placement, wafer SRAM and micro-batching."""

from __future__ import annotations

import math

import pytest
from core_helpers import SCENARIOS, dense_model, scenario_dict

import wss
from wss import InfeasibleError, ScenarioError
from wss.model.plan import rank_candidates

GPT3_175B_ON_ONE_SMALL_MEMORYX = scenario_dict(
    model="gpt3-175b",
    global_batch=4,
    optimizer="adamw",
    training={"seq_len": 2048},
    hardware={"memoryx": {"preset": "memoryx-4tb", "shards": 1}},
)


def single_problem(err: ScenarioError):
    assert len(err.problems) == 1, err.problems
    return err.problems[0]


# ---------------------------------------------------------------------------- MemoryX


def test_model_larger_than_memoryx_is_infeasible():
    with pytest.raises(InfeasibleError) as info:
        wss.plan(GPT3_175B_ON_ONE_SMALL_MEMORYX)
    problem = single_problem(info.value)
    assert problem.path == "hardware.memoryx"
    assert str(info.value).count("hardware.memoryx") == 1
    assert "TB" in problem.message  # says how much is needed and how much there is
    assert isinstance(info.value, ScenarioError)  # the CLI's one-message handling covers it
    with pytest.raises(InfeasibleError):
        wss.simulate(GPT3_175B_ON_ONE_SMALL_MEMORYX)


def test_memoryx_capacity_boundary_is_exact():
    # SGD keeps 2 fp32 scalars per weight: 1024 x 1024 x 8 B = 8 MiB of state
    state = 1024 * 1024 * 8
    fits = scenario_dict(
        model=dense_model(1024, 1024), hardware={"memoryx": {"shards": 2, "dram_capacity_bytes": state / 2}}
    )
    plan = wss.plan(fits)
    assert plan.memoryx_state_bytes == state
    assert plan.memoryx_dram_bytes == state and plan.memoryx_flash_bytes == 0
    too_small = scenario_dict(
        model=dense_model(1024, 1024), hardware={"memoryx": {"shards": 2, "dram_capacity_bytes": state / 2 - 1}}
    )
    with pytest.raises(InfeasibleError, match="hardware.memoryx"):
        wss.plan(too_small)


def test_optimizer_state_sets_the_memoryx_footprint():
    per_weight = {"sgd": 8, "momentum": 12, "adam": 16, "adamw": 16, "lamb": 16}  # fp32: Adam = w, g, m, v = 16 B
    for optimizer, b in per_weight.items():
        plan = wss.plan(scenario_dict(model=dense_model(256, 512), optimizer=optimizer))
        assert plan.memoryx_state_bytes == 256 * 512 * b, optimizer


def test_flash_takes_the_coldest_state_first_and_weights_stay_in_dram():
    # 4 kernels of 2048 x 2048 with SGD: 16 MiB of fp32 weights and 16 MiB of gradient accumulator each
    model = dense_model(2048, 2048, 2048, 2048, 2048)
    memoryx = {"shards": 1, "dram_capacity_bytes": 1e8, "flash_capacity_bytes": 1e9}
    plan = wss.plan(scenario_dict(model=model, hardware={"memoryx": memoryx}))
    part = 2048 * 2048 * 4
    # All four weights fit 100 MB of DRAM (67 MB), then one gradient accumulator; no weights in flash, so no
    # DRAM is kept for prefetch staging.
    assert plan.staging_bytes == 0
    assert [k.tier for k in plan.kernels] == ["dram"] * 4
    assert [k.state_tiers.gradient for k in plan.kernels] == ["dram", "flash", "flash", "flash"]
    assert plan.memoryx_components["weights"] == {"dram": 4 * part, "flash": 0.0}
    assert plan.memoryx_components["gradient"] == {"dram": part, "flash": 3 * part}
    assert plan.memoryx_components["moments"] == {"dram": 0.0, "flash": 0.0}  # SGD keeps none
    assert plan.memoryx_dram_bytes == 5 * part and plan.memoryx_flash_bytes == 3 * part


def test_weights_that_spill_to_flash_keep_dram_for_staging_and_the_first_kernels_in_dram():
    model = dense_model(2048, 2048, 2048, 2048, 2048)
    memoryx = {"shards": 1, "dram_capacity_bytes": 5e7, "flash_capacity_bytes": 1e9}
    plan = wss.plan(scenario_dict(model=model, hardware={"memoryx": memoryx}))
    part = 2048 * 2048 * 4
    # 67 MB of weights exceed 50 MB: DRAM keeps 25% to stage prefetches, and 37.5 MB hold two kernels' weights.
    assert plan.staging_bytes == pytest.approx(0.25 * 5e7, rel=1e-12)
    assert [k.tier for k in plan.kernels] == ["dram", "dram", "flash", "flash"]
    assert [k.state_tiers.gradient for k in plan.kernels] == ["flash"] * 4
    assert plan.memoryx_dram_bytes == 2 * part and plan.memoryx_flash_bytes == 6 * part


def test_flash_too_small_after_staging_is_infeasible():
    model = dense_model(2048, 2048, 2048, 2048, 2048)
    # 134 MB of state would fit 100 MB DRAM + 40 MB flash, but a component is never split across tiers: the
    # weights (67 MB) and one gradient accumulator (17 MB) fill DRAM, and three accumulators (50 MB) need flash
    memoryx = {"shards": 1, "dram_capacity_bytes": 1e8, "flash_capacity_bytes": 4e7}
    raw = scenario_dict(model=model, hardware={"memoryx": memoryx})
    with pytest.raises(InfeasibleError) as info:
        wss.plan(raw)
    problem = single_problem(info.value)
    assert problem.path == "hardware.memoryx"
    assert "flash" in problem.message


# ---------------------------------------------------------------------------- wafer SRAM


def test_activations_that_do_not_fit_even_one_sample_are_infeasible():
    # Block checkpointing keeps all 260 block inputs of a 120T model on the wafer: one 2048-token sample
    # does not fit.  Offloading them (the planner's other choice under 'auto') does.
    over = ["training.seq_len=2048", "hardware.wafers=1", "training.global_batch=1"]
    raw = wss.load_scenario(SCENARIOS / "brain_120t.yaml", [*over, "training.activation_checkpointing=blocks"])
    with pytest.raises(InfeasibleError) as info:
        wss.plan(raw)
    problem = single_problem(info.value)
    assert problem.path == "training.micro_batch"
    assert "one sample" in problem.message
    assert "GB" in problem.message
    assert wss.plan(wss.load_scenario(SCENARIOS / "brain_120t.yaml", over)).checkpointing == "offload"


def test_tiny_wafer_cannot_hold_one_sample_of_a_small_model():
    tiny = {"core_rows": 4, "core_cols": 4, "sram_per_core_bytes": 128}
    raw = scenario_dict(model="fc-mnist", hardware={"wafer": tiny})
    with pytest.raises(InfeasibleError) as info:
        wss.plan(raw)
    assert single_problem(info.value).path == "training.micro_batch"


def test_explicit_micro_batch_too_large_is_infeasible():
    # Changed with the planner: 'auto' checkpointing now takes whichever mode fits the micro-batch asked for,
    # so the mode is pinned to 'none' to reach that mode's limit; under 'auto' the same micro-batch runs
    # with block checkpointing instead (checked last).
    none = {"seq_len": 2048, "activation_checkpointing": "none"}
    pinned = wss.load_scenario(scenario_dict(model="gpt3-1.3b", global_batch=64, optimizer="adamw", training=none))
    largest = max(c.largest for c in rank_candidates(pinned))
    ok = wss.plan(scenario_dict(model="gpt3-1.3b", global_batch=64, training={**none, "micro_batch": largest}))
    assert max(ok.micro_batches) == largest
    with pytest.raises(InfeasibleError) as info:
        too_many = {**none, "micro_batch": largest + 1}
        wss.plan(scenario_dict(model="gpt3-1.3b", global_batch=64, training=too_many))
    problem = single_problem(info.value)
    assert problem.path == "training.micro_batch"
    assert f"at most {largest} fit" in problem.message
    auto = wss.plan(scenario_dict(model="gpt3-1.3b", global_batch=64, training={"seq_len": 2048,
                                                                              "micro_batch": largest + 1}))
    assert auto.checkpointing == "blocks"
    assert max(auto.micro_batches) == largest + 1


@pytest.mark.parametrize(
    "model, batch, seq_len", [("gpt3-125m", 64, 2048), ("gpt3-1.3b", 64, 2048), ("bert-large", 256, 512)]
)
def test_auto_micro_batch_weighs_up_to_the_largest_that_fits(model, batch, seq_len):
    # Changed with the planner: 'auto' used to take the largest micro-batch that fits, full ones first and the
    # remainder last.  It now weighs every size up to that largest (tested here) and runs the fastest, cut
    # evenly (tests/core/test_planner.py checks that it is the fastest).
    scenario = wss.load_scenario(scenario_dict(model=model, global_batch=batch, training={"seq_len": seq_len}))
    plan = wss.plan(scenario)
    assert sum(plan.micro_batches) == batch
    assert max(plan.micro_batches) - min(plan.micro_batches) <= 1
    assert plan.sram_bytes_needed <= plan.sram_bytes_available
    for mode in ("none", "blocks"):
        pinned = wss.load_scenario(scenario, {"training.activation_checkpointing": mode})
        ranked = rank_candidates(pinned)
        fewest = min(ranked, key=lambda c: len(c.micro_batches))
        n = len(fewest.micro_batches)
        assert {c.checkpointing for c in ranked} == {mode}
        assert all(c.sram_bytes_needed <= plan.sram_bytes_available for c in ranked)
        if n > 1:  # the cap is active: one micro-batch fewer would not fit
            per_sample = fewest.sram_bytes_needed / fewest.largest
            assert per_sample * math.ceil(batch / (n - 1)) > plan.sram_bytes_available


def test_auto_micro_batch_takes_the_whole_shard_when_it_fits():
    plan = wss.plan(scenario_dict(model="fc-mnist", wafers=4, global_batch=256))
    assert plan.micro_batches == [64]
    explicit = wss.plan(scenario_dict(model="fc-mnist", wafers=4, global_batch=256, training={"micro_batch": 64}))
    assert explicit.micro_batches == [64]
    with pytest.raises(ScenarioError, match="per-wafer batch of 64"):  # never more than the shard
        wss.plan(scenario_dict(model="fc-mnist", wafers=4, global_batch=256, training={"micro_batch": 1000}))


def test_auto_checkpointing_switches_to_blocks_when_one_sample_does_not_fit():
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml")
    plan = wss.plan(s)
    assert plan.checkpointing in ("blocks", "offload")  # both recompute each block; offload keeps fewer inputs
    with pytest.raises(InfeasibleError, match="training.micro_batch"):
        wss.plan(wss.load_scenario(s, {"training.activation_checkpointing": "none"}))


def test_memoryx_state_shrinks_as_sparsity_grows():
    """A sparser model never needs more MemoryX: the mask costs a bitmask or indices, the smaller."""
    plans = {}
    for sparsity in (0.0, 0.25, 0.5, 0.55, 0.9, 0.96, 0.97, 0.99):
        plans[sparsity] = wss.plan(scenario_dict(model="gpt3-1.3b", optimizer="adamw", workload={"sparsity": sparsity}))
    sizes = [p.memoryx_state_bytes for p in plans.values()]
    assert sizes == sorted(sizes, reverse=True), sizes
    dense, half, sparse = plans[0.0], plans[0.5], plans[0.99]
    assert dense.memoryx_state_bytes == dense.params * 16  # 16 B of Adam state per parameter
    # The masks are drawn, so the non-zeros are about, not exactly, the density times the parameters;
    # given the plan's count of them the state is exact.
    # 50%: the non-zeros' state plus a 1-bit mask per weight.
    assert half.memoryx_state_bytes == pytest.approx(half.nnz * 16 + half.params / 8, rel=1e-12)
    # 99%: indices (4 B per non-zero) beat the bitmask.
    assert sparse.memoryx_state_bytes == pytest.approx(sparse.nnz * (16 + 4), rel=1e-12)
    assert sparse.nnz * 4 < sparse.params / 8
