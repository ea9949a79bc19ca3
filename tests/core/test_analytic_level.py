"""The analytic level (wss.model.plan.analytic) and the machine's figures it shares with the simulator.

* the recursion run segment by segment, with runs of identical blocks taken from their fixed point, gives
  the step the pass-by-pass recursion gives;
* the planner's price of a candidate and ``wss estimate``'s step of the plan running it are one number;
* the figures of wss/model/machine/ are what the simulator's settings are built from.
"""

from __future__ import annotations

import dataclasses

import pytest
from core_helpers import SCENARIOS, scenario_dict

import wss
from wss.model.machine.figures import TOKEN_ID_BYTES, block_input_bytes_per_token, input_bytes_per_sample
from wss.model.machine.swarmx_path import edge_Bps, swarmx_path
from wss.model.plan import make_plan, plan_inputs
from wss.model.plan.analytic import StepModel
from wss.model.plan.analytic.sweep import Sweeper
from wss.model.plan.search import forced_scenario
from wss.model.scenario import PRECISION_BYTES
from wss.model.sim.cluster import input_settings, swarmx_settings


def _without_runs(sweeper: Sweeper) -> Sweeper:
    """The same passes with every pass its own segment's only member: no reuse, the plain recursion."""
    n = sweeper.sched.kernel.size
    plain = dataclasses.replace(sweeper.sched, segments=tuple((i, i + 1, i) for i in range(n)),
                                runs=tuple((i, ((i, i + 1),)) for i in range(n)))
    return Sweeper(plain, sweeper.columns, sweeper.compute, sweeper.paced, sweeper.returns)


@pytest.mark.parametrize("name", ["gpt3_175b", "cerebras_gpt_13b", "bert_large", "gpt3_6.7b_sparse",
                                  "mixtral_8x7b_4xcs3"])
@pytest.mark.parametrize("lead, lag", [(0.0, 0.0), (1e-3, 2e-4)])
def test_identical_blocks_repeat_from_their_fixed_point(name, lead, lag):
    plan = make_plan(wss.load_scenario(SCENARIOS / f"{name}.yaml"))
    model = StepModel.of_plan(plan)
    recompute = plan.checkpointing != "none"
    fast = model.sweeper(recompute, plan.tokens_per_micro_batch[0], plan.checkpointing == "offload")
    a, b = fast.sweep(lead, lag), _without_runs(fast).sweep(lead, lag)
    assert len(fast.sched.runs) < len(fast.sched.segments) or name == "gpt3_6.7b_sparse"  # blocks do repeat
    assert a.duration == pytest.approx(b.duration, rel=1e-12)
    assert a.held == pytest.approx(b.held, rel=1e-12, abs=1e-15)
    assert a.lead_out == pytest.approx(b.lead_out, rel=1e-12, abs=1e-15)
    assert a.lag_out == pytest.approx(b.lag_out, rel=1e-12, abs=1e-15)
    assert a.paced == pytest.approx(b.paced, rel=1e-12, abs=1e-15)
    assert a.arrivals == pytest.approx(b.arrivals, rel=1e-12)


def test_the_planner_prices_a_forced_candidate_as_the_estimate_times_its_plan():
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml")
    inp = plan_inputs(s, None)
    for cand in inp.candidates[::5]:
        priced = inp.costing.cost(cand)
        assert wss.estimate(forced_scenario(s, priced)).step_time_s == pytest.approx(priced.step_time_s, rel=1e-12)
        assert priced.compute_s + priced.stream_s + priced.other_s == pytest.approx(priced.step_time_s, rel=1e-12)


@pytest.mark.parametrize("wafers, io", [(1, 1e10), (16, 1e12), (64, 5e10)])
def test_the_tree_and_the_wafers_edge_are_the_simulators(wafers, io):
    raw = scenario_dict(model="gpt3-125m", wafers=wafers, global_batch=max(64, wafers),
                        hardware={"wafer": {"io_bandwidth_Bps": io}})
    plan = make_plan(wss.load_scenario(raw))
    hw = plan.scenario.hardware
    path = swarmx_path(hw)
    settings = swarmx_settings(plan)
    assert path.level_Bps[-1] == edge_Bps(hw) == settings.leaf_bandwidth_Bps == min(io, hw.swarmx.link_bandwidth_Bps)
    assert all(bw == hw.swarmx.link_bandwidth_Bps for bw in path.level_Bps[:-1])
    assert (path.depth, list(path.nodes_per_level)) == (settings.levels, list(settings.nodes_per_level)) \
        == (plan.tree_levels, plan.nodes_per_level)


def test_input_and_block_input_bytes():
    tokens = wss.load_scenario(scenario_dict(model="gpt3-125m", training={"seq_len": 512}))
    assert input_bytes_per_sample(tokens, 768) == 512 * TOKEN_ID_BYTES
    assert input_settings(make_plan(tokens)).bytes_per_sample == 512 * TOKEN_ID_BYTES
    features = wss.load_scenario(scenario_dict(model={"name": "mlp", "input": "features", "layers": [
        {"kind": "dense", "in_features": 300, "out_features": 10, "activation": "none"}]}))
    act = PRECISION_BYTES[features.training.activation_precision]
    assert input_bytes_per_sample(features, 300) == 300 * act
    assert input_settings(make_plan(features)).bytes_per_sample == 300 * act
    assert block_input_bytes_per_token(features, {0: 300, 3: 10}) == {0: 300.0 * act, 3: 10.0 * act}
