"""Llama-2 7B on one CS-3 (the measured run M6's scenario) with every matmul sparse: the step speeds up
close to the ideal 1 / (1 - s), as Agarwalla et al., "Enabling High-Sparsity Foundational Llama Models with
Efficient Pretraining and Deployment" (2024) report for sparse pre-training on CS-3; "close" is at least
three quarters of it.  Before lanes the partial-sum ring bound every 4,096-input layer: 1.26x at 50%,
1.33x at 70%."""

from __future__ import annotations

import functools

import wss
from wss.model.plan import make_plan

M6 = {"name": "llama", "hardware": {"preset": "cs3-cluster", "wafers": 1}, "workload": {"model": "llama-2-7b"},
      "training": {"global_batch": 1024, "seq_len": 4096, "optimizer": "adamw", "steps": 2}}


@functools.cache
def step_s(sparsity: float) -> float:
    return wss.simulate(wss.load_scenario(M6, {"workload.sparsity": sparsity})).step_time_s


def test_half_sparse_steps_at_least_three_quarters_of_the_ideal_faster() -> None:
    assert step_s(0.0) / step_s(0.5) >= 0.75 * 2.0  # measured 1.84x after the refit on the model with lanes


def test_70_percent_sparse_steps_at_least_three_quarters_of_the_ideal_faster() -> None:
    assert step_s(0.0) / step_s(0.7) >= 0.75 / 0.3  # 2.79x after the refit on the model with lanes (2.42x before)


def test_70_percent_sparse_weight_kernels_compute_at_least_three_quarters_of_the_ideal_faster() -> None:
    """The weight kernels' cycles per token, forward and backward, at each run's own micro-batch: the
    kernels themselves follow Amdahl's law over the 4-cycle overhead (measured 2.88x)."""
    def per_token(sparsity: float) -> float:
        plan = make_plan(wss.load_scenario(M6, {"workload.sparsity": sparsity}))
        tokens = plan.micro_batches[0] * plan.tokens_per_sample
        return sum(k.cycles[tokens].forward + k.cycles[tokens].backward for k in plan.kernels) / tokens
    assert per_token(0.0) / per_token(0.7) >= 0.75 / 0.3
