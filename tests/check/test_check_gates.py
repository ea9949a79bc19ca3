"""Which metrics gate a check: by default the step time, throughput, the breakdown (at 5%) and memory.

Time that moves from one part of the step to another at the same step time is listed but does not fail
CI; ``--metrics`` (``gates=``) chooses what does.
"""

from __future__ import annotations

import pytest
from check_helpers import FC_MNIST, check_cli, copy_scenario, edit_metrics

import wss
from wss.studies.check import (
    DEFAULT_GATES,
    OK,
    REGRESSED,
    Baseline,
    baseline_from_result,
    compare,
    format_table,
)


@pytest.fixture(scope="module")
def result():
    return wss.simulate(wss.load_scenario(FC_MNIST))


@pytest.fixture(scope="module")
def baseline(result) -> Baseline:
    return baseline_from_result(result, FC_MNIST)


def _shifted(baseline: Baseline, **deltas: float) -> Baseline:
    """The baseline with some metrics moved by an absolute amount (``breakdown_s__compute=1e-6``)."""
    metrics = dict(baseline.metrics)
    for key, delta in deltas.items():
        metrics[key.replace("__", ".")] = float(metrics[key.replace("__", ".")]) + delta
    return baseline.model_copy(update={"metrics": metrics})


def test_time_moving_between_parts_at_the_same_step_time_passes_by_default(baseline, result):
    """3% of the step moves from compute to the bubble in the baseline: beyond 1%, within the breakdown's 5%."""
    step = float(baseline.metrics["step_time_s"])
    compute = float(baseline.metrics["breakdown_s.compute"])
    move = 0.03 * step
    assert move < 0.05 * compute  # within the breakdown's default tolerance of compute
    moved = _shifted(baseline, breakdown_s__compute=move, breakdown_s__bubble=-move)
    assert compare(moved, result).ok
    strict = compare(moved, result, gates=["*"], metric_tolerances={"breakdown_s.*": 0.01})
    assert not strict.ok and {r.metric for r in strict.regressed} == {"breakdown_s.bubble"}


def test_a_slower_step_fails_by_default(baseline, result):
    faster = _shifted(baseline, step_time_s=-0.02 * float(baseline.metrics["step_time_s"]))
    comparison = compare(faster, result)
    assert not comparison.ok and "step_time_s" in {r.metric for r in comparison.regressed}


def test_metrics_outside_the_gates_are_listed_but_do_not_fail(baseline, result):
    phases = {k: v for k, v in baseline.metrics.items() if k.startswith("phase_s.") and float(v) > 0}
    key = sorted(phases)[0]
    halved = baseline.model_copy(update={"metrics": {**baseline.metrics, key: float(phases[key]) / 2}})
    comparison = compare(halved, result)
    (row,) = [r for r in comparison.rows if r.metric == key]
    assert row.verdict == REGRESSED and not row.gated and comparison.ok
    assert f"{REGRESSED} (not gated)" in format_table(comparison)
    gated = compare(halved, result, gates=[*DEFAULT_GATES, "phase_s.*"])
    assert not gated.ok


def test_default_gates_match_what_the_docs_say():
    assert DEFAULT_GATES == ("step_time_s", "samples_per_s", "tokens_per_s", "breakdown_s.*", "memory.*")


def test_unchanged_result_is_ok_under_any_gates(baseline, result):
    for gates in (None, ["*"], ["step_time_s"]):
        comparison = compare(baseline, result, gates=gates)
        assert comparison.ok and all(r.verdict == OK for r in comparison.rows)


def test_cli_metrics_choose_the_gates(tmp_path, capsys):
    scenario = copy_scenario(tmp_path)
    assert check_cli(["baseline", scenario, "-o", tmp_path / "bl"]) == 0
    edit_metrics(tmp_path / "bl" / "fc_mnist.json", phase_s__wafer__forward=0.5)
    capsys.readouterr()
    assert check_cli(["check", scenario, "--baselines", tmp_path / "bl"]) == 0
    assert "(not gated)" in capsys.readouterr().out
    assert check_cli(["check", scenario, "--baselines", tmp_path / "bl", "--metrics", "phase_s.*"]) == 1
    assert check_cli(["check", scenario, "--baselines", tmp_path / "bl", "--metrics", "all"]) == 1
    assert check_cli(["check", scenario, "--baselines", tmp_path / "bl", "--metrics", "step_time_s"]) == 0


def test_cli_metrics_that_match_nothing_are_bad_input(tmp_path, capsys):
    scenario = copy_scenario(tmp_path)
    assert check_cli(["baseline", scenario, "-o", tmp_path / "bl"]) == 0
    capsys.readouterr()
    assert check_cli(["check", scenario, "--baselines", tmp_path / "bl", "--metrics", "step_tme_s"]) == 2
    assert "step_tme_s matches no metric" in capsys.readouterr().err
