"""The runtime's fixed costs and the input workers' rate, each against its closed form.

On ideal hardware (huge bandwidths, no latency) a step is its compute plus whatever the wafer pays
in series, so each fixed cost must add exactly its count times its value, in its own category.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from core_helpers import dense_model, ideal_hardware, scenario_dict

import wss
from wss.model.plan import rank_candidates
from wss.studies.estimate import estimate
from wss.studies.verdict import verdict

ROOT = Path(__file__).resolve().parents[2]
SWITCH, MICRO, STEP = 3e-4, 2e-3, 0.05


def _raw(runtime: dict | None = None, micro_batch: int | str = "auto", **over) -> dict:
    hardware = ideal_hardware(runtime=runtime or {"preset": "ideal"})
    return scenario_dict(model=dense_model(1024, 1024, 1024), global_batch=64, steps=2, hardware=hardware,
                         training={"micro_batch": micro_batch}, **over)


def _step(raw: dict) -> wss.Result:
    return wss.simulate(wss.load_scenario(raw))


def test_each_fixed_cost_adds_its_count_times_its_value_in_its_category():
    base = _step(_raw(micro_batch=16))
    costs = _step(_raw({"kernel_switch_s": SWITCH, "micro_batch_overhead_s": MICRO, "step_overhead_s": STEP},
                       micro_batch=16))
    micro_batches, kernels = 64 // 16, 2
    passes = micro_batches * 2 * kernels  # forward and backward of each kernel, no checkpointing
    assert costs.breakdown_s["switch"] == pytest.approx(passes * SWITCH, rel=1e-9)
    assert costs.breakdown_s["runtime"] == pytest.approx(STEP + micro_batches * MICRO, rel=1e-9)
    expected = base.step_time_s + passes * SWITCH + STEP + micro_batches * MICRO
    assert costs.step_time_s == pytest.approx(expected, rel=1e-9)
    assert base.breakdown_s["switch"] == base.breakdown_s["runtime"] == 0.0
    # Records carry them too, so the per-kernel view adds up to the step.
    per_record = sum(r.stall_switch_s * r.repeats for r in costs.records if r.step == 1)
    assert per_record == pytest.approx(passes * SWITCH, rel=1e-9)


def test_the_planner_prices_the_same_fixed_costs():
    """The analytic level adds exactly what the simulator charges, so a costly switch favours fewer micro-batches."""
    free = rank_candidates(wss.load_scenario(_raw()))
    costly = rank_candidates(wss.load_scenario(_raw({"kernel_switch_s": SWITCH, "step_overhead_s": STEP})))
    by_split = {c.micro_batches: c.step_time_s for c in free}
    for c in costly:
        passes = len(c.micro_batches) * 2 * 2
        assert c.step_time_s - by_split[c.micro_batches] == pytest.approx(STEP + passes * SWITCH, rel=1e-9)
    huge = rank_candidates(wss.load_scenario(_raw({"kernel_switch_s": 1.0})))
    assert len(huge[0].micro_batches) == min(len(c.micro_batches) for c in huge)


def test_the_estimate_adds_the_fixed_costs_as_terms():
    raw = _raw({"kernel_switch_s": SWITCH, "micro_batch_overhead_s": MICRO, "step_overhead_s": STEP}, micro_batch=16)
    est, sim = estimate(wss.load_scenario(raw)), _step(raw)
    assert est.terms_s["switch"] == pytest.approx(sim.breakdown_s["switch"], rel=1e-9)
    assert est.terms_s["runtime"] == pytest.approx(sim.breakdown_s["runtime"], rel=1e-9)
    assert est.step_time_s == pytest.approx(sim.step_time_s, rel=1e-3)


def test_a_kernel_pass_shorter_than_its_minimum_waits_out_the_rest_as_switch_time():
    """kernel_pass_min_s: with a minimum above every pass, a weight kernel's pass begins exactly that long after
    the one before it, so raising it by d adds d per pass of a step (the run's first pass waits for none); below
    every pass it changes nothing at all."""
    micro_batches, kernels = 64 // 16, 2
    passes = micro_batches * 2 * kernels
    one, two = (_step(_raw({"kernel_pass_min_s": floor}, micro_batch=16)) for floor in (1.0, 2.0))
    assert two.steps[1].time_s - one.steps[1].time_s == pytest.approx(passes * 1.0, rel=1e-9)
    assert two.steps[0].time_s - one.steps[0].time_s == pytest.approx((passes - 1) * 1.0, rel=1e-9)
    assert two.breakdown_s["switch"] - one.breakdown_s["switch"] == pytest.approx((passes - 0.5) * 1.0, rel=1e-9)
    base = _step(_raw(micro_batch=16))
    assert one.breakdown_s["compute"] == pytest.approx(base.breakdown_s["compute"], rel=1e-12)
    # Every pass of this model is far longer than a picosecond: the run is the one without a minimum.
    tiny = _step(_raw({"kernel_pass_min_s": 1e-12}, micro_batch=16))
    assert tiny.step_time_s == base.step_time_s and tiny.breakdown_s == base.breakdown_s


def test_a_kernel_pass_minimum_is_serialised_only_when_set():
    """Scenarios without it keep their serialised form (and hash); one with it keeps it through a round trip."""
    plain = wss.load_scenario(_raw())
    assert "kernel_pass_min_s" not in plain.model_dump(mode="json")["hardware"]["runtime"]
    floored = wss.load_scenario(_raw({"kernel_pass_min_s": 4e-4}))
    dumped = floored.model_dump(mode="json")
    assert dumped["hardware"]["runtime"]["kernel_pass_min_s"] == 4e-4
    assert wss.load_scenario(dumped).hardware.runtime.kernel_pass_min_s == 4e-4


def test_the_planner_prices_a_kernel_pass_minimum_as_the_simulator_waits_it():
    """Between the two regimes (the backward passes of the smallest micro-batches shorter than the minimum, the
    larger ones longer) the analytic level's waits equal the simulator's, and a long minimum favours fewer
    micro-batches, as it would a real compiler's choice."""
    base = _step(_raw(micro_batch=16))
    per_pass = base.breakdown_s["compute"] / (4 * 2 * 2)  # about one pass of a micro-batch of 16
    raw = _raw({"kernel_pass_min_s": per_pass}, micro_batch=16)
    est, sim = estimate(wss.load_scenario(raw)), _step(raw)
    assert 0.0 < sim.breakdown_s["switch"] < 4 * 2 * 2 * per_pass
    # (equal but for the ideal parts' picosecond stream and latency, which the two levels round differently)
    assert est.terms_s["switch"] == pytest.approx(sim.breakdown_s["switch"], rel=1e-6)
    assert est.step_time_s == pytest.approx(sim.step_time_s, rel=1e-3)
    free = {c.micro_batches: c.step_time_s for c in rank_candidates(wss.load_scenario(_raw()))}
    floored = rank_candidates(wss.load_scenario(_raw({"kernel_pass_min_s": 10 * per_pass})))
    assert floored[0].micro_batches == (64,)
    cost = {c.micro_batches: c.step_time_s for c in floored}
    # Four micro-batches wait out four times the passes: 3 x 4 passes more than one micro-batch, each ~10 x per_pass.
    assert cost[(16,) * 4] - cost[(64,)] > 10 * (free[(16,) * 4] - free[(64,)])
    assert cost[(16,) * 4] - cost[(64,)] == pytest.approx(3 * 4 * 10 * per_pass, rel=0.1)


def test_a_kernel_pass_minimum_on_bert_large_is_priced_as_simulated_across_micro_batches_and_steps():
    """BERT-large, 4 micro-batches of 16 over 3 steps, at 0.4 ms a pass: most of its short passes wait, and what the
    wafer waits carries across attention, micro-batches and steps alike in both levels (measured: 6e-14)."""
    s = wss.load_scenario(ROOT / "scenarios" / "bert_large.yaml", overrides={
        "training.global_batch": 64, "training.micro_batch": 16, "training.steps": 3,
        "hardware.runtime.kernel_pass_min_s": 4e-4})
    sim, est = wss.simulate(s), estimate(s)
    assert sim.breakdown_s["switch"] > 0.5 * sim.step_time_s
    assert est.terms_s["switch"] == pytest.approx(sim.breakdown_s["switch"], rel=1e-9)
    assert est.step_time_s == pytest.approx(sim.step_time_s, rel=1e-9)


def test_input_workers_samples_per_s_bounds_the_input():
    """Input-bound: micro-batch i is ready at (i + 1) x samples / rate (the workers run one micro-batch ahead)."""
    rate = 1000.0  # samples/s; 16 samples take 16 ms, far beyond the compute of a micro-batch
    raw = _raw(micro_batch=16)
    raw["hardware"]["inputs"]["samples_per_s"] = rate
    r = _step(raw)
    assert r.bound_by == "input"
    transfer = 16 / rate
    # The workers run one micro-batch ahead, so once steady (step 1) each micro-batch takes one transfer.
    assert r.steps[1].time_s == pytest.approx(4 * transfer, rel=1e-9)
    faster = _raw(micro_batch=16)
    faster["hardware"]["inputs"]["samples_per_s"] = 2 * rate
    assert _step(faster).steps[1].time_s == pytest.approx(2 * transfer, rel=1e-9)


def test_verdict_names_the_runtime_when_it_paces_the_step():
    r = _step(_raw({"step_overhead_s": 1.0}, micro_batch=16))
    assert r.bound_by == "runtime"
    v = verdict(r)
    assert v.bound_by == "runtime"
    best = v.candidates[0]
    assert best.overrides["hardware.runtime.step_overhead_s"] == pytest.approx(0.5)
    assert best.step_time_s == pytest.approx(r.step_time_s - 0.5, rel=1e-6)


def test_runtime_presets_and_validation():
    assert {"ideal", "cerebras-ws"} <= set(wss.list_presets()["runtime"])
    shipped = wss.load_scenario(scenario_dict()).hardware.runtime
    assert shipped.name == "ideal"  # core_helpers' scenarios run without fixed costs
    cluster = wss.load_scenario({**scenario_dict(), "hardware": {"preset": "cs2-cluster"}}).hardware.runtime
    assert cluster.name == "cerebras-ws" and cluster.step_overhead_s > 0
    with pytest.raises(wss.ScenarioError, match="kernel_switch_s"):
        wss.load_scenario(_raw({"kernel_switch_s": -1.0}))
    with pytest.raises(wss.ScenarioError, match="runtime"):
        wss.load_scenario(_raw({"preset": "no-such-runtime"}))
