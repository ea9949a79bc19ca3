"""Compute jitter (faults.jitter): every wafer waits for the lock-step reduction, so a step follows its slowest wafer.

On a compute-bound step, step ``k`` lasts the plain step plus ``(max_w X_wk - 1)`` times the compute, where
``X_wk`` is wafer ``w``'s factor in step ``k``; over many steps the mean approaches the expected maximum of
``N`` lognormal draws of mean 1, computed here by integrating ``1 - F(x)^N``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from core_helpers import deep_merge, dense_model, ideal_hardware, scenario_dict
from scipy import integrate, stats

import wss
from wss.errors import ScenarioError
from wss.model.machine.jitter import compute_factors, jitter_rng

WAFERS, STEPS, SIGMA = 8, 300, 0.05


def _raw(steps: int = STEPS, seed: int = 0, **jitter) -> dict:
    raw = scenario_dict(dense_model(1024, 1024), wafers=WAFERS, global_batch=8 * WAFERS, steps=steps,
                        hardware=ideal_hardware(), seed=seed)
    return deep_merge(raw, {"faults": {"jitter": jitter}}) if jitter else raw


def _expected_max(n: int, sigma: float) -> float:
    """E[max of n lognormal draws of mean 1]: the integral of 1 - F(x)^n over x > 0."""
    dist = stats.lognorm(s=sigma, scale=math.exp(-sigma * sigma / 2))
    value, _ = integrate.quad(lambda x: 1.0 - dist.cdf(x) ** n, 0.0, 3.0, limit=200)
    return value


@pytest.fixture(scope="module")
def runs() -> tuple[wss.Result, wss.Result]:
    return wss.simulate(_raw()), wss.simulate(_raw(distribution="lognormal", sigma=SIGMA))


def test_each_step_follows_its_slowest_wafer(runs):
    base, r = runs
    assert base.bound_by == "compute" and not r.wafer_folding.folded
    assert r.wafer_folding.reason == f"auto: faults (compute jitter lognormal sigma {SIGMA:g})"
    compute = base.breakdown_s["compute"]
    factors = compute_factors(r.scenario.faults.jitter, jitter_rng(r.scenario.seed), WAFERS, STEPS)
    for k, (a, b) in enumerate(zip(base.steps, r.steps)):
        assert b.time_s == pytest.approx(a.time_s + (factors[:, k].max() - 1) * compute, rel=1e-6), k


def test_mean_step_time_matches_the_expected_maximum_of_the_draws(runs):
    base, r = runs
    compute = base.breakdown_s["compute"]
    excess = np.array([(b.time_s - a.time_s) / compute + 1 for a, b in zip(base.steps, r.steps)])
    expected = _expected_max(WAFERS, SIGMA)
    err = excess.std(ddof=1) / math.sqrt(len(excess))
    assert abs(excess.mean() - expected) < 4 * err, (excess.mean(), expected, err)
    assert expected > 1.04  # the slowest of 8 is ~5% slow although each wafer is 1 on average


def test_jitter_is_seeded_and_deterministic():
    a = wss.simulate(_raw(steps=5, distribution="lognormal", sigma=0.1)).to_json()
    np.random.seed(123)  # noqa: NPY002 - a global seed has no effect
    assert wss.simulate(_raw(steps=5, distribution="lognormal", sigma=0.1)).to_json() == a
    other = wss.simulate(_raw(steps=5, seed=1, distribution="lognormal", sigma=0.1))
    assert other.step_time_s != wss.Result.model_validate_json(a).step_time_s


@pytest.mark.parametrize(("jitter", "words"), [({"sigma": -0.1}, "must be more than 0"),
                                               ({"sigma": 2}, "must be at most 1"),
                                               ({"sigma": 0.1, "distribution": "normal"}, "lognormal")])
def test_bad_jitter_is_a_clear_error(jitter: dict, words: str):
    with pytest.raises(ScenarioError) as err:
        wss.load_scenario(_raw(steps=2, **jitter))
    assert "faults.jitter" in str(err.value) and words in str(err.value)


def test_the_slowest_wafer_of_each_step_paced_it(runs):
    _, r = runs
    factors = compute_factors(r.scenario.faults.jitter, jitter_rng(r.scenario.seed), WAFERS, STEPS)
    assert r.step_pacers is not None
    assert [p.part for p in r.step_pacers] == [f"wafer.{int(factors[:, k].argmax())}" for k in range(STEPS)]
