"""The planner under faults: ``auto`` prices the machine the simulator runs.

* A slow MemoryX shard (``faults.shards``) slows MemoryX as a whole (the shards times the slowest
  shard's rate, :mod:`wss.model.machine.memoryx_rates`).  The planner prices every MemoryX term at those
  rates, so under a slow shard it chooses the candidate the simulator finds fastest, which here is
  not the one it chooses for nominal shards.
* A SwarmX node down (``faults.nodes``) cuts wafers off and the global batch is split over the
  others; the planner splits each wafer's larger shard into micro-batches, exactly as for the whole
  cluster on the global batch ``B N / (N - k)``.
"""

from __future__ import annotations

import pytest
from core_helpers import deep_merge, ideal_hardware, scenario_dict

import wss
from wss.model.plan import plan_inputs, rank_candidates
from wss.model.plan.search import forced_scenario

#: GPT-3 1.3B on one wafer, 64 sequences: with nominal shards ten micro-batches without checkpointing are
#: fastest; with MemoryX's stream ten times slower, streaming the weights twenty times a step is not.
#: One lane per kernel: folded into lanes, the 2,048-wide layers compute fast enough that one micro-batch
#: with offloaded activations wins even with nominal shards, and there is no choice left to change.
#: Unclipped: with clipping, a 20x slower DRAM's serialized updates add one long tail to every candidate,
#: which is not what this compares.
_ONE_WAFER = scenario_dict(model="gpt3-1.3b", wafers=1, global_batch=64, optimizer="adamw",
                           training={"seq_len": 2048, "gradient_clipping": "none"},
                           hardware={"wafer": {"max_lanes": 1}})


def _shard(raw: dict, **factors: float) -> dict:
    return deep_merge(raw, {"faults": {"shards": [{"shard": 0, **factors}]}})


def _simulated_steps(scenario: wss.Scenario, candidates: list) -> list[float]:
    return [wss.simulate(forced_scenario(scenario, c)).step_time_s for c in candidates]


@pytest.mark.parametrize("factors", [{"network_factor": 0.1}, {"dram_factor": 0.05}])
def test_under_a_slow_shard_auto_runs_the_candidate_the_simulator_finds_fastest(factors: dict):
    nominal = wss.load_scenario(_ONE_WAFER)
    slow = wss.load_scenario(_shard(_ONE_WAFER, **factors))
    before = rank_candidates(nominal)[0]  # what the planner chose for this scenario when it priced nominal shards
    ranked = rank_candidates(slow)
    chosen = ranked[0]
    assert (before.checkpointing, len(before.micro_batches)) == ("none", 10)
    assert (chosen.checkpointing, chosen.micro_batches) != (before.checkpointing, before.micro_batches)
    # the simulator agrees: of the nominal choice and the five best under the fault, auto's is the fastest
    others = [before, *ranked[1:5]]
    auto = wss.simulate(slow)
    assert (auto.plan_choice.chosen.checkpointing, auto.plan_choice.chosen.micro_batches) == (
        chosen.checkpointing, chosen.micro_batches)
    simulated = _simulated_steps(slow, others)
    assert auto.step_time_s <= min(simulated) * 1.01
    # the nominal choice streams far too often under the fault: auto saves over 30% (over half at WSE-2's kernel
    # efficiency before the per-chip refit made compute longer, 46% at 0.46, 33% at 0.35 after the refit on the
    # model with lanes: the longer the compute, the less the fault's streaming weighs)
    assert auto.step_time_s < 0.7 * simulated[0]


def test_without_a_fault_or_with_a_faster_shard_the_choice_and_its_price_are_unchanged():
    nominal = rank_candidates(wss.load_scenario(_ONE_WAFER))
    fast = rank_candidates(wss.load_scenario(_shard(_ONE_WAFER, network_factor=2.0, dram_factor=3.0,
                                                    flash_factor=2.0, optimizer_factor=4.0)))
    assert fast == nominal  # a shard faster than the others does not make MemoryX faster


def test_a_shard_at_f_of_every_rate_prices_every_memoryx_term_at_one_over_f():
    """Everything but MemoryX all but free: the stream, the gradients up, the optimizer's jobs and the
    flash channel are all MemoryX's, so each costs exactly ``1 / f`` times as much."""
    hw = ideal_hardware(memoryx={"dram_bandwidth_Bps": 2e9, "network_bandwidth_Bps": 1e9, "optimizer_flops": 1e10,
                                 "dram_capacity_bytes": 1e6, "flash_capacity_bytes": 1e8,  # some state in flash
                                 "flash_read_bandwidth_Bps": 5e8, "flash_write_bandwidth_Bps": 3e8})
    raw = scenario_dict(model={"name": "mlp", "input": "features", "layers": [
        {"kind": "dense", "in_features": 1024, "out_features": 1024, "activation": "none"}] * 4},
        wafers=2, global_batch=8, optimizer="adamw", hardware=hw)
    f = 0.25
    base = plan_inputs(wss.load_scenario(raw), None).costing.model
    slow = plan_inputs(wss.load_scenario(_shard(raw, dram_factor=f, flash_factor=f, network_factor=f,
                                                optimizer_factor=f)), None).costing.model
    flash = [m.schedule(False).flash_s for m in (base, slow)]
    assert float(flash[0].sum()) > 0 and float(base.jobs.services("update", 1, 2)[1].sum()) > 0  # flash is priced
    assert flash[1] == pytest.approx(flash[0] / f, rel=1e-12)
    for a, b in zip(slow.ways, base.ways):
        assert a.stream_s == pytest.approx(b.stream_s / f, rel=1e-9)
        assert a.up_s == pytest.approx(b.up_s / f, rel=1e-9)
    for kind, m in (("accumulate", 0), ("accumulate", 1), ("update", 1)):
        for a, b in zip(slow.jobs.services(kind, m, 2), base.jobs.services(kind, m, 2)):
            assert a == pytest.approx(b / f, rel=1e-12)
    assert slow.jobs.accumulation_reads(1) == pytest.approx(base.jobs.accumulation_reads(1) / f, rel=1e-12)


def test_under_a_node_down_auto_plans_the_larger_shards_on_the_wafers_still_reachable():
    """12 of 16 wafers train on 96 sequences: 8 each, the shards of the whole cluster on 128."""
    raw = scenario_dict(model="gpt3-1.3b", wafers=16, global_batch=96, optimizer="adamw", training={"seq_len": 2048})
    down = wss.load_scenario(deep_merge(raw, {"faults": {"nodes": [{"node": "swarmx.l2.n1"}]}}))
    whole = rank_candidates(wss.load_scenario(deep_merge(raw, {"training": {"global_batch": 128}})))
    ranked = rank_candidates(down)
    assert ranked == whole
    assert sum(ranked[0].micro_batches) == 8
    assert rank_candidates(wss.load_scenario(raw))[0].micro_batches == (6,)  # no fault: 6 each, one micro-batch
    auto = wss.simulate(down)
    assert list(auto.plan_choice.chosen.micro_batches) == list(ranked[0].micro_batches)
    assert auto.step_time_s <= min(_simulated_steps(down, ranked[1:4])) * 1.01


@pytest.mark.parametrize(("faults", "named"), [
    ({"stragglers": [{"wafer": 1, "slowdown": 1.5}]}, ["wafer 1 1.5x slower"]),
    ({"links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]}, ["edge swarmx.l1.1 at 0.5x bandwidth"]),
    ({"jitter": {"sigma": 0.05}}, ["compute jitter lognormal sigma 0.05"]),
    ({"shards": [{"shard": 0, "dram_factor": 0.5}]}, []),  # priced: MemoryX's rates at the slowest shard's
])
def test_the_estimate_and_the_plan_name_the_faults_they_leave_out(faults, named, capsys):
    """The analytic level prices a slow shard and a node down; it names every other fault it leaves out."""
    import json

    from core_helpers import SCENARIOS

    from wss.cli import main

    scenario = SCENARIOS / "fc_mnist.yaml"  # 4 wafers under one SwarmX node: edges swarmx.l1.0-3
    est = wss.estimate(wss.load_scenario(scenario, {f"faults.{k}": v for k, v in faults.items()}))
    assert est.faults_left_out == named
    assert main(["plan", str(scenario), "--json", "--top", "0",
                 *(f"--set=faults.{k}={json.dumps(v)}" for k, v in faults.items())]) == 0
    assert json.loads(capsys.readouterr().out)["faults_left_out"] == named
    assert main(["estimate", str(scenario), *(f"--set=faults.{k}={json.dumps(v)}" for k, v in faults.items())]) == 0
    text = capsys.readouterr().out
    assert ("not in this estimate (wss simulate prices them): " + ", ".join(named) in text) if named else \
        "not in this estimate" not in text
