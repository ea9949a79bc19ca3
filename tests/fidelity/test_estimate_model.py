"""The estimator as an API: pure, fast (never simulates), consistent, and right on closed forms."""

from __future__ import annotations

import pytest
import simpy
from fidelity_helpers import DEEP_BUFFERS, SCENARIOS, relative

import wss
from wss.model.result.results import BREAKDOWN_CATEGORIES
from wss.studies.estimate import TERMS, Estimate, estimate, estimate_plan


@pytest.fixture
def no_simulation(monkeypatch):
    """Make any attempt to run SimPy fail loudly."""

    def refuse(*_a, **_k):
        raise AssertionError("the estimator must not simulate")

    monkeypatch.setattr(simpy, "Environment", refuse)


@pytest.mark.parametrize("name", ["bert_large", "brain_120t", "gpt3_175b", "fc_mnist"])
def test_never_simulates_and_adds_up(name, no_simulation):
    est = estimate(SCENARIOS / f"{name}.yaml")
    assert isinstance(est, Estimate)
    assert set(est.breakdown_s) == set(BREAKDOWN_CATEGORIES)
    assert set(est.terms_s) == set(TERMS)
    assert sum(est.breakdown_s.values()) == pytest.approx(est.step_time_s, rel=1e-12)
    assert sum(est.terms_s.values()) == pytest.approx(est.step_time_s, rel=1e-12)
    assert all(v >= 0 for v in est.breakdown_s.values())
    assert est.pacing_s[est.bound_by] == max(est.pacing_s.values())
    assert sum(est.pacing_s.values()) == pytest.approx(est.step_time_s, rel=1e-9)
    s = wss.load_scenario(SCENARIOS / f"{name}.yaml")
    assert est.samples_per_s == pytest.approx(s.training.global_batch / est.step_time_s, rel=1e-12)


def test_accepts_what_simulate_accepts_and_is_pure():
    path = SCENARIOS / "fc_mnist.yaml"
    s = wss.load_scenario(path)
    a, b, c = estimate(path), estimate(str(path)), estimate(s)
    d = estimate(s.model_dump(mode="json"))
    assert a == b == c == d
    assert estimate_plan(wss.plan(s)) == a
    assert a.model_dump_json() == estimate(path).model_dump_json()


def test_bad_input_is_a_wss_error(tmp_path):
    with pytest.raises(wss.WssError):
        estimate(tmp_path / "missing.yaml")
    with pytest.raises(wss.InfeasibleError):  # 1T parameters with AdamW (16 TB) do not fit the 4 TB MemoryX
        estimate(wss.load_scenario(SCENARIOS / "gpt_1t.yaml", {"hardware.memoryx.preset": "memoryx-4tb"}))


def _one_kernel(**training) -> dict:
    """One 8192 x 8192 dense kernel on one wafer: a closed form of the tests/core/test_analytic.py kind."""
    return {
        "name": "one-kernel",
        "hardware": {"preset": "cs2-cluster", "wafers": 1, "runtime": {"preset": "ideal"}},  # no fixed costs
        "workload": {"model": {"name": "k", "input": "features",
                               "layers": [{"kind": "dense", "in_features": 8192, "out_features": 8192,
                                           "activation": "none"}]}},
        "training": {"global_batch": 8, "optimizer": "sgd", **training},
    }


def test_stream_bound_single_kernel_closed_form():
    """Forward and backward of one stream-bound kernel: 2 x bytes / 150 GB/s plus fill, drain and update."""
    sc = _one_kernel()
    est, sim = estimate(sc), wss.simulate(sc)
    stream = 8192 * 8192 * 2 / 150e9
    assert est.bound_by == "stream"
    # Two passes of stream, plus at most the wafer's own work (its last chunks cannot overlap their stream).
    assert 2 * stream <= est.terms_s["passes"] <= 2 * stream + est.breakdown_s["compute"]
    assert relative(est.step_time_s, sim.step_time_s) == pytest.approx(0, abs=1e-9)


def test_non_weight_work_hides_under_the_stream():
    """The lead: on a stream-bound model the stream runs on through attention and norms, so the step
    is shorter than the sum over passes of max(stream, compute) plus the non-weight time."""
    # Pinned to the plan the scenario ran before the planner searched (no checkpointing, 22 x 2 + 1): that
    # one is stream-bound; the planner's choice (blocks, 3 x 15) is mostly compute-bound and hides less.
    # No fixed runtime costs: the stream runs ahead during them up to its buffers, which the estimate follows
    # to within a hop's latency (the first credit's flight back from full buffers: 1 us of 8.17 s here).
    # The kernel efficiency of the calibration this was measured at (0.59): the regime where no stream runs
    # ahead of a kernel for want of buffer, whatever the shipped calibration is now.
    pinned = {"training.activation_checkpointing": "none", "training.micro_batch": 2,
              "hardware.runtime.preset": "ideal", "hardware.wafer.kernel_efficiency": 0.59}
    plan = wss.plan(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", pinned))
    assert plan.micro_batches == [2] * 22 + [1]
    est = estimate_plan(plan)
    clock = plan.scenario.hardware.wafer.clock_Hz
    naive = 0.0
    for mb in plan.micro_batches:
        t = mb * plan.tokens_per_sample
        for kp in plan.kernels:
            s = kp.stream_bytes / 150e9
            naive += max(s, kp.cycles[t].forward / clock) + max(s, kp.cycles[t].backward / clock)
        naive += sum(f + b for (_, tt), (f, b) in plan.wafer_op_seconds.items() if tt == t)
    assert est.terms_s["passes"] < naive
    # docs/fidelity.md: no bounded-buffer effect here, so the estimate is the simulation (measured 2.3e-13).
    assert est.step_time_s == pytest.approx(wss.simulate(plan.scenario).step_time_s, rel=1e-9)


def test_more_wafers_never_slower_per_sample_on_the_stream():
    """Weak scaling: a fixed per-wafer batch keeps the estimate's step nearly constant."""
    base = {"hardware.wafers": 1, "training.global_batch": 8}
    one = estimate(wss.load_scenario(SCENARIOS / "cs3_gpt3_13b.yaml", base))
    many = estimate(wss.load_scenario(SCENARIOS / "cs3_gpt3_13b.yaml",
                                      {"hardware.wafers": 64, "training.global_batch": 512}))
    # Not exact: 64 wafers add two tree levels of fill and drain (measured +0.12%).
    assert many.step_time_s == pytest.approx(one.step_time_s, rel=0.01)
    assert many.step_time_s >= one.step_time_s  # deeper tree: longer fill and drain


@pytest.mark.parametrize("buffers", [{}, DEEP_BUFFERS], ids=["shipped buffers", "64 GiB buffers"])
def test_returning_block_inputs_take_the_wire_from_a_stream_bound_recompute(buffers):
    """Mixtral 8x7B offloads its block inputs, and its experts' recompute is stream-bound on the wafer's edge
    just as the next block's input comes back over it (docs/fidelity.md, "Per pass").  Priced as the edge's
    spare time over the micro-batch, the returns looked free: the estimate was 3.4% fast with the shipped
    buffers.  With 64 GiB buffers the stream runs so far ahead that the wafer waits for its block inputs at
    each recompute (the offload category), which the sweep must see too (and the step's fixed costs, paid while
    the stream runs ahead, docs/fidelity.md "Runtime overlap")."""
    # At a WSE-3 kernel efficiency of 0.59 (the calibration this was found at) the experts' recompute is
    # stream-bound, the regime under test; at the shipped per-chip fit the wafer's compute hides the returns.  The
    # store is the one it was found with, as fast as the edge: the returns then wait on the edge alone.
    s = wss.load_scenario(SCENARIOS / "mixtral_8x7b_4xcs3.yaml",
                          {**buffers, "hardware.wafer.kernel_efficiency": 0.59,
                           "hardware.activation_store.preset": "host-unlimited"})
    est, sim = estimate(s), wss.simulate(s)
    assert abs(relative(est.step_time_s, sim.step_time_s)) <= 0.005
    assert est.breakdown_s["offload"] == pytest.approx(sim.breakdown_s["offload"], rel=0.15, abs=1e-3)
    assert sum(est.terms_s.values()) == pytest.approx(est.step_time_s, rel=1e-12)
    assert sum(est.breakdown_s.values()) == pytest.approx(est.step_time_s, rel=1e-12)
    assert sum(est.pacing_s.values()) == pytest.approx(est.step_time_s, rel=1e-9)
