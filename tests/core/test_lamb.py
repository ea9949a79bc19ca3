"""LAMB (You et al. 2019): Adam's state, a per-kernel trust ratio, its MemoryX costs and real numerics."""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from core_helpers import SCENARIOS, dense_model, scenario_dict

import wss
from wss.errors import ScenarioError
from wss.model.components.dram import SharedDram
from wss.model.components.optimizer import OptimizerCoprocessor, OptimizerSettings, UpdateJob
from wss.model.machine.optimizer_costs import OPTIMIZER_COSTS, SCALAR_BYTES, StateTiers
from wss.model.numerics.optimizers import Lamb, make_optimizer


def test_lamb_costs():
    lamb, adam = OPTIMIZER_COSTS["lamb"], OPTIMIZER_COSTS["adam"]
    assert lamb.state_bytes == adam.state_bytes == 16  # w, g, m, v in fp32
    # Pass 1 reads w, m, v and writes m, v, u; pass 2 reads w, u and writes w.
    assert (lamb.read_scalars, lamb.write_scalars) == (3 + 2, 3 + 1)
    # By component (weights, gradient slot, moments): w twice, u once, m and v; writes w, u, m and v.
    assert (lamb.reads, lamb.writes) == ((2, 1, 2), (1, 1, 2))
    assert lamb.moved_bytes == 36
    # m (3) + v (4) + r = m / (sqrt v + eps) (3) + u = r + wd w (2) + ||w||^2 (2) + ||u||^2 (2) + w -= s u (2)
    assert lamb.flops == 3 + 4 + 3 + 2 + 2 + 2 + 2 == 18


def test_lamb_update_job_moves_and_computes_what_its_cost_says():
    env = simpy.Environment()
    settings = OptimizerSettings(flash_read_Bps=1.0, flash_write_Bps=1.0, flops_per_s=1e12,
                                 cost=OPTIMIZER_COSTS["lamb"], incoming_bytes_per_param=0.0)
    opt = OptimizerCoprocessor(env, settings, simpy.Resource(env, capacity=1), SharedDram(env, 1000.0))
    env.process(opt.run())
    opt.submit(UpdateJob(0, 0, 0, "update", 100, StateTiers(), 0.0), first=True, accumulated=False)
    env.run(until=opt.done_event(0, 0))
    job = opt.jobs[0]
    assert (job.read_bytes, job.write_bytes, job.flops) == (100 * 5 * SCALAR_BYTES, 100 * 4 * SCALAR_BYTES, 1800.0)
    assert env.now == pytest.approx(100 * 9 * SCALAR_BYTES / 1000.0)


def test_lamb_state_in_memoryx_is_adams():
    plans = {o: wss.plan(scenario_dict(model=dense_model(256, 512), optimizer=o)) for o in ("adam", "lamb")}
    assert plans["lamb"].memoryx_state_bytes == plans["adam"].memoryx_state_bytes == 256 * 512 * 16


def test_lamb_costs_no_less_than_adam_in_a_simulated_step():
    raw = {o: scenario_dict(model="gpt3-125m", global_batch=4, optimizer=o) for o in ("adam", "lamb")}
    adam, lamb = (wss.simulate(raw[o]) for o in ("adam", "lamb"))
    assert lamb.step_time_s >= adam.step_time_s


def test_unknown_optimizer_names_the_field():
    with pytest.raises(ScenarioError, match=r"training\.optimizer"):
        wss.load_scenario(scenario_dict(optimizer="lars"))


def test_lamb_one_step_in_closed_form():
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=50).astype(np.float32)
    g = rng.normal(size=50).astype(np.float32)
    lr, wd, eps = 0.01, 0.1, 1e-6
    opt = Lamb(lr, eps=eps, weight_decay=wd)
    w, state = w0.copy(), opt.init_state(50)
    opt.update(w, g, state)
    # Step 1: the bias-corrected moments are g and g^2, so r = g / (|g| + eps).
    w64, g64 = w0.astype(np.float64), g.astype(np.float64)
    u = g64 / (np.abs(g64) + eps) + wd * w64
    expected = w64 - lr * np.linalg.norm(w64) / np.linalg.norm(u) * u
    np.testing.assert_allclose(w, expected, rtol=1e-5, atol=1e-7)
    # The step's length is lr ||w||, whatever the gradient's scale: the trust ratio.
    assert np.linalg.norm(w.astype(np.float64) - w64) == pytest.approx(lr * np.linalg.norm(w64), rel=1e-5)


def test_lamb_trust_ratio_is_one_for_a_zero_layer():
    opt, w = make_optimizer("lamb", 0.1), np.zeros(4, dtype=np.float32)
    opt.update(w, np.array([1, -1, 2, -2], dtype=np.float32), opt.init_state(4))
    np.testing.assert_allclose(w, -0.1 * np.sign([1, -1, 2, -2]), rtol=1e-5)


def test_lamb_trains_the_shipped_numerics_task():
    overrides = ["training.optimizer=lamb", "training.steps=60", "numerics.learning_rate=0.01"]
    result = wss.simulate(wss.load_scenario(SCENARIOS / "fc_mnist_numerics.yaml", overrides))
    losses = result.numerics.losses
    assert len(losses) == 60
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10])
    assert result.numerics.accuracies[-1] > 0.3  # 10 classes: chance is ~0.1
