"""Global-norm gradient clipping (training.gradient_clipping): no update before the step's last gradient.

The norm of all the step's gradients scales each of them, so MemoryX sums their squares as they arrive (a norm
job per kernel) and queues the updates, in the model's order, only after the last one; the next step's weights
wait for their updates as before.  The analytic level prices the same wait.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import wss
from wss.model.machine.optimizer_costs import (
    CLIP_SCALE_FLOPS,
    NORM_FLOPS,
    OPTIMIZER_COSTS,
    SCALAR_BYTES,
    StateTiers,
    job_traffic,
)
from wss.model.numerics.train import clip_global_norm
from wss.model.simulate import simulate_detailed

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str, clipping: str, **more: object):
    return wss.load_scenario(ROOT / "scenarios" / f"{name}.yaml",
                             overrides={"training.gradient_clipping": clipping, **more})


def test_the_default_is_global_norm_and_none_is_accepted():
    assert _load("bert_large", "none").training.gradient_clipping == "none"
    assert wss.load_scenario(ROOT / "scenarios" / "bert_large.yaml").training.gradient_clipping == "global_norm"
    with pytest.raises(wss.ScenarioError):
        _load("bert_large", "per_kernel")


def test_norm_and_clipped_update_traffic():
    adamw, n, tiers = OPTIMIZER_COSTS["adamw"], 1000, StateTiers()
    # One micro-batch: the norm job reads the landed gradient and sums its squares; the update scales it.
    norm = job_traffic(adamw, "norm", n, tiers, first=False, accumulated=False, incoming_bytes=2 * n)
    assert (norm.dram_read_bytes, norm.dram_write_bytes, norm.flops) == (2 * n, 0, NORM_FLOPS * n)
    plain = job_traffic(adamw, "update", n, tiers, first=False, accumulated=False, incoming_bytes=2 * n)
    clipped = job_traffic(adamw, "update", n, tiers, first=False, accumulated=False, incoming_bytes=2 * n,
                          clipped=True)
    assert clipped.dram_bytes == plain.dram_bytes and clipped.flops == plain.flops + CLIP_SCALE_FLOPS * n
    # Micro-batches: the norm job finishes the accumulation, so the update reads the accumulator only.
    norm = job_traffic(adamw, "norm", n, tiers, first=False, accumulated=True, incoming_bytes=2 * n)
    assert norm.dram_read_bytes == 2 * n + SCALAR_BYTES * n and norm.dram_write_bytes == SCALAR_BYTES * n
    plain = job_traffic(adamw, "update", n, tiers, first=False, accumulated=True, incoming_bytes=2 * n)
    clipped = job_traffic(adamw, "update", n, tiers, first=False, accumulated=True, incoming_bytes=2 * n,
                          clipped=True)
    assert clipped.dram_read_bytes == plain.dram_read_bytes - 2 * n


@pytest.mark.parametrize("micro_batch", [None, 2])
def test_no_update_starts_before_the_steps_last_gradient(micro_batch):
    more = {"training.micro_batch": micro_batch} if micro_batch else {}
    for clipping in ("global_norm", "none"):
        _, cluster = simulate_detailed(_load("bert_large", clipping, **more), record=False)
        jobs = cluster.optimizer.jobs
        for step in {j.step for j in jobs}:
            last_gradient = max(j.arrived for j in jobs if j.step == step)
            updates = [j for j in jobs if j.step == step and j.kind == "update"]
            if clipping == "global_norm":
                assert min(j.start for j in updates) >= last_gradient
                assert [j.kernel for j in sorted(updates, key=lambda j: j.start)] == sorted(j.kernel for j in updates)
                assert {j.kernel for j in jobs if j.step == step and j.kind == "norm"} == {j.kernel for j in updates}
            else:  # each kernel's update overlaps the rest of the backward pass
                assert min(j.start for j in updates) < last_gradient
                assert not any(j.kind == "norm" for j in jobs)


@pytest.mark.parametrize("name", ["cerebras_gpt_13b", "cs3_gpt3_13b", "bert_large"])
def test_clipping_costs_time_and_the_analytic_level_prices_it(name):
    times = {}
    for clipping in ("none", "global_norm"):
        s = _load(name, clipping)
        sim, est = wss.simulate(s).step_time_s, wss.estimate(s).step_time_s
        assert est == pytest.approx(sim, rel=0.03), clipping
        times[clipping] = (sim, est)
    assert times["global_norm"][0] > times["none"][0]
    assert times["global_norm"][1] > times["none"][1]


def test_numerics_clip_to_the_global_norm():
    grads = [np.array([3.0, 0.0], dtype=np.float32), np.array([[4.0]], dtype=np.float32)]  # global norm 5
    clipped = clip_global_norm(grads, 1.0)
    assert float(np.sqrt(sum(float((g * g).sum()) for g in clipped))) == pytest.approx(1.0, rel=1e-5)
    assert clip_global_norm(grads, 10.0) is grads  # below the threshold: untouched
