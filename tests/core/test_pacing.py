"""What paced a pass and a step (``pass_pacing``, ``Result.pacing_s``, ``bound_by``)."""

from __future__ import annotations

import math

import pytest
from core_helpers import dense_model, scenario_dict

import wss
from wss.model.result.results import PACING_TOLERANCE, pass_pacing


def test_a_pass_that_waits_for_weights_is_paced_by_the_stream_whole():
    assert pass_pacing(0.54, {"stream": 0.46}) == {"stream": pytest.approx(1.0)}


def test_a_pass_with_a_negligible_weight_wait_is_paced_by_compute():
    small = 0.5 * PACING_TOLERANCE
    assert pass_pacing(1.0, {"stream": small}) == {"compute": 1.0, "stream": small}


def test_waits_for_events_count_as_they_are():
    # The update it waited for is an event, not a rate: the rest of the pass is still compute.
    assert pass_pacing(1.0, {"bubble": 0.3, "input": 0.1}) == {"bubble": 0.3, "input": 0.1, "compute": 1.0}
    # ... and a weight wait beside it makes only the compute and that wait the stream's.
    pace = pass_pacing(1.0, {"bubble": 0.3, "stream": 0.5})
    assert pace == {"bubble": 0.3, "stream": pytest.approx(1.5)}


def test_the_larger_rate_cause_takes_the_pass():
    assert set(pass_pacing(1.0, {"stream": 0.2, "flash": 0.4})) == {"flash"}


@pytest.mark.parametrize(
    "compute, stalls",
    [(0.0, {}), (1.0, {}), (0.0, {"stream": 1.0}), (2.0, {"stream": 0.01, "bubble": 3.0, "optimizer": 1.0})],
)
def test_the_parts_sum_to_the_pass(compute, stalls):
    assert math.fsum(pass_pacing(compute, stalls).values()) == pytest.approx(compute + sum(stalls.values()))


def test_a_slow_clock_run_is_compute_bound_and_its_bubble_counts_only_its_wait():
    s = scenario_dict(
        model=dense_model(2048, 2048, 2048, 2048, 2048), wafers=4, global_batch=64, steps=2, optimizer="adamw",
        hardware={"wafer": {"clock_Hz": 1e6}},
    )
    r = wss.simulate(s)
    assert r.bound_by == "compute"
    assert r.breakdown_s["bubble"] > 0
    assert r.pacing_s["bubble"] == pytest.approx(r.breakdown_s["bubble"], rel=1e-9)
    # Every pass here is paced by its own compute, so pacing and breakdown agree (measured: exactly).
    assert r.pacing_s["compute"] == pytest.approx(r.breakdown_s["compute"], rel=1e-9)
