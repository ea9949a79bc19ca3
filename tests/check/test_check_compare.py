"""The pure API of wss.studies.check: metrics, compare, tolerances, freshness, baseline files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_helpers import FC_MNIST
from golden import assert_matches_golden

import wss
from wss.errors import WssError
from wss.studies.check import (
    CHANGED,
    FORMAT,
    IMPROVED,
    MISSING,
    NEW,
    OK,
    REGRESSED,
    Baseline,
    CheckError,
    MissingBaseline,
    StaleBaseline,
    baseline_from_result,
    baseline_path,
    check_scenario,
    compare,
    ensure_fresh,
    format_table,
    load_baseline,
    metric_spec,
    metrics_of,
    record_baseline,
    save_baseline,
    scenario_hash,
)

SLOW_CLOCK = {"hardware.wafer.clock_Hz": 4.25e8}  # half the WSE-2 clock (850 MHz)


def _simulate(overrides=None):
    return wss.simulate(wss.load_scenario(FC_MNIST, overrides))


def _verdicts(comparison) -> dict[str, str]:
    return {r.metric: r.verdict for r in comparison.rows}


def _with_metrics(baseline: Baseline, **values) -> Baseline:
    metrics = dict(baseline.metrics)
    metrics.update({k.replace("__", "."): v for k, v in values.items()})
    return baseline.model_copy(update={"metrics": metrics})


def test_metrics_cover_what_matters(fc_baseline):
    m = fc_baseline.metrics
    for key in ("step_time_s", "samples_per_s", "tokens_per_s", "breakdown_s.bubble", "phase_s.wafer.forward",
                "phase_s.wafer.backward", "phase_s.wafer.recompute", "phase_s.memoryx.update",
                "link_bytes.memoryx->swarmx.total_bytes", "link_bytes.swarmx.l1->wafer.per_link_bytes",
                "memory.memoryx_state_bytes", "memory.wafer_sram_activation_bytes", "memory.micro_batch"):
        assert key in m, key
    assert m["phase_s.wafer.recompute"] == 0.0  # FC-MNIST does not checkpoint; the phase is still recorded
    assert list(m) == sorted(m)


def test_phase_times_are_record_durations_per_step():
    result = _simulate()
    forward = sum(r.end_s - r.start_s for r in result.records if r.phase == "forward" and r.where == "wafer")
    assert metrics_of(result)["phase_s.wafer.forward"] == pytest.approx(
        forward / result.scenario.training.steps, rel=1e-12
    )


@pytest.mark.parametrize(
    ("name", "unit", "better"),
    [("step_time_s", "s", "lower"), ("samples_per_s", "samples/s", "higher"), ("tokens_per_s", "tokens/s", "higher"),
     ("breakdown_s.bubble", "s", "lower"), ("link_bytes.wafer->swarmx.l1.total_bytes", "B", "lower"),
     ("memory.memoryx_dram_bytes", "B", "lower"), ("memory.micro_batch", "", "exact"), ("bound_by", "", "exact")],
)
def test_direction_per_metric(name, unit, better):
    spec = metric_spec(name)
    assert (spec.unit, spec.better) == (unit, better)


def test_unchanged_scenario_holds(fc_baseline):
    comparison = compare(fc_baseline, _simulate())
    assert comparison.ok and not comparison.notable
    assert {r.verdict for r in comparison.rows} == {OK}
    assert format_table(comparison) == ""


def test_slowed_scenario_regresses_with_the_right_rows(fc_baseline):
    comparison = compare(fc_baseline, _simulate(SLOW_CLOCK), rtol=0.01)
    verdicts = _verdicts(comparison)
    assert not comparison.ok
    for key in ("step_time_s", "samples_per_s", "tokens_per_s", "breakdown_s.compute", "phase_s.wafer.forward",
                "phase_s.wafer.backward"):
        assert verdicts[key] == REGRESSED, key
    # A slower clock moves no byte: link bytes and memory hold.
    assert all(v == OK for k, v in verdicts.items() if k.startswith(("link_bytes.", "memory.")))
    compute = next(r for r in comparison.rows if r.metric == "breakdown_s.compute")
    assert compute.change == pytest.approx(1.0, rel=1e-12)  # compute time doubles at half the clock
    throughput = next(r for r in comparison.rows if r.metric == "samples_per_s")
    assert throughput.change < 0

    text = format_table(comparison)
    table = text.splitlines()
    assert table[0].split() == ["metric", "baseline", "now", "change", "tolerance", "verdict"]
    step = next(line for line in table if line.startswith("step_time_s "))
    assert "±1%" in step and step.endswith(REGRESSED)
    assert next(line for line in table if line.startswith("breakdown_s.compute ")).split()[5] == "+100.00%"
    assert not any(line.startswith("link_bytes.") for line in table)  # only the rows that moved
    # The whole table, numbers included, as the command prints it.
    assert_matches_golden("check/fc_mnist_half_clock_table.txt", text, where=__file__)


def test_improvement_is_reported_but_passes():
    slow = baseline_from_result(_simulate(SLOW_CLOCK), FC_MNIST)
    comparison = compare(slow, _simulate())
    assert comparison.ok
    verdicts = _verdicts(comparison)
    assert verdicts["step_time_s"] == IMPROVED and verdicts["samples_per_s"] == IMPROVED
    assert comparison.improved and not comparison.regressed
    assert "improved: refresh the baseline" in format_table(comparison)


def test_within_tolerance_holds_and_beyond_fails(fc_baseline):
    now = fc_baseline.metrics["step_time_s"]
    slightly_faster = _with_metrics(fc_baseline, step_time_s=now / 1.005)
    assert _verdicts(compare(slightly_faster, _simulate(), rtol=0.01))["step_time_s"] == OK
    assert _verdicts(compare(slightly_faster, _simulate(), rtol=0.001))["step_time_s"] == REGRESSED


def test_per_metric_tolerances_exact_name_wins_over_glob(fc_baseline):
    b = _with_metrics(fc_baseline, step_time_s=fc_baseline.metrics["step_time_s"] / 1.05,
                      breakdown_s__compute=fc_baseline.metrics["breakdown_s.compute"] / 1.05)
    c = compare(b, _simulate(), rtol=0.01, metric_tolerances={"step_time_s": 0.1, "breakdown_s.*": 0.001})
    verdicts = _verdicts(c)
    assert verdicts["step_time_s"] == OK
    assert verdicts["breakdown_s.compute"] == REGRESSED
    rows = {r.metric: r for r in c.rows}
    assert rows["step_time_s"].rtol == 0.1 and rows["breakdown_s.bubble"].rtol == 0.001
    assert rows["samples_per_s"].rtol == 0.01
    assert c.unmatched_tolerances == ()


def test_unmatched_tolerance_is_reported(fc_baseline):
    c = compare(fc_baseline, _simulate(), metric_tolerances={"step_tme_s": 0.1})
    assert c.unmatched_tolerances == ("step_tme_s",)


@pytest.mark.parametrize("bad", [-0.1, float("nan"), float("inf")])
def test_bad_tolerance_is_a_wss_error(fc_baseline, bad):
    with pytest.raises(WssError, match="relative tolerance"):
        compare(fc_baseline, _simulate(), rtol=bad)


def test_absolute_floor_for_tiny_values(fc_baseline):
    assert fc_baseline.metrics["breakdown_s.stream"] == 0.0
    b = _with_metrics(fc_baseline, breakdown_s__stream=1e-12)
    assert _verdicts(compare(b, _simulate(), rtol=0.0))["breakdown_s.stream"] == OK
    b = _with_metrics(fc_baseline, breakdown_s__stream=0.0, memory__memoryx_flash_bytes=0.5)
    assert _verdicts(compare(b, _simulate(), rtol=0.0))["memory.memoryx_flash_bytes"] == OK
    # Above the floor, a value appearing from zero is a regression, with an undefined relative change.
    b = _with_metrics(fc_baseline, breakdown_s__bubble=0.0)
    row = next(r for r in compare(b, _simulate()).rows if r.metric == "breakdown_s.bubble")
    assert row.verdict == REGRESSED and row.change is None


def test_exact_metrics_changed_are_listed_not_failed(fc_baseline):
    b = _with_metrics(fc_baseline, memory__micro_batch=32.0, bound_by="stream")
    c = compare(b, _simulate())
    assert c.ok
    verdicts = _verdicts(c)
    assert verdicts["memory.micro_batch"] == CHANGED and verdicts["bound_by"] == CHANGED


def test_missing_metric_fails_new_metric_is_listed(fc_baseline):
    metrics = dict(fc_baseline.metrics)
    metrics["link_bytes.swarmx.l9->wafer.total_bytes"] = 1.0
    metrics["memory.memoryx_extra_bytes"] = 1.0
    del metrics["step_time_s"]
    c = compare(fc_baseline.model_copy(update={"metrics": metrics}), _simulate())
    verdicts = _verdicts(c)
    assert verdicts["link_bytes.swarmx.l9->wafer.total_bytes"] == MISSING
    assert verdicts["memory.memoryx_extra_bytes"] == MISSING
    assert verdicts["step_time_s"] == NEW
    # A missing metric fails the check where it gates (memory.*), and is only listed where it does not.
    assert not c.ok and [r.metric for r in c.regressed] == ["memory.memoryx_extra_bytes"]
    everything = compare(fc_baseline.model_copy(update={"metrics": metrics}), _simulate(), gates=["*"])
    assert [r.metric for r in everything.regressed] == ["link_bytes.swarmx.l9->wafer.total_bytes",
                                                        "memory.memoryx_extra_bytes"]


def test_version_difference_is_noted(fc_baseline):
    old = fc_baseline.model_copy(update={"wss_version": "0.0.1"})
    b = _with_metrics(old, step_time_s=1.0)
    assert "baseline recorded with wss 0.0.1" in format_table(compare(b, _simulate()))


def test_scenario_hash_is_sha256_of_sorted_canonical_json():
    import hashlib

    s = wss.load_scenario(FC_MNIST)
    text = json.dumps(s.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    assert scenario_hash(s) == hashlib.sha256(text.encode()).hexdigest()
    assert scenario_hash(wss.load_scenario(FC_MNIST, SLOW_CLOCK)) != scenario_hash(s)


def test_baseline_file_round_trip_is_deterministic(tmp_path: Path, fc_baseline):
    path = save_baseline(fc_baseline, baseline_path(tmp_path, FC_MNIST))
    assert path == tmp_path / "fc_mnist.json"
    text = path.read_text(encoding="utf-8")
    data = json.loads(text)
    assert data["format"] == FORMAT and data["scenario_file"] == "fc_mnist.yaml"
    assert data["wss_version"] == wss.__version__
    # Sorted keys and nothing that changes from one recording to the next (no timestamp, no folder).
    assert list(data) == ["format", "metrics", "scenario", "scenario_file", "scenario_name", "scenario_sha256",
                          "wss_version"]
    assert load_baseline(path) == fc_baseline
    assert save_baseline(load_baseline(path), path).read_text(encoding="utf-8") == text
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_load_missing_and_invalid_baselines(tmp_path: Path):
    with pytest.raises(MissingBaseline, match=r"fc_mnist\.json does not exist.*wss check .*--update.*wss baseline"):
        load_baseline(tmp_path / "fc_mnist.json", "scenarios/fc_mnist.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "wss-baseline/1"}', encoding="utf-8")
    with pytest.raises(CheckError, match="bad.json: not a wss-baseline/1 file"):
        load_baseline(bad)
    assert issubclass(MissingBaseline, WssError) and issubclass(StaleBaseline, WssError)


def test_stale_baseline_names_the_changed_field(fc_baseline):
    slow = wss.load_scenario(FC_MNIST, SLOW_CLOCK)
    ensure_fresh(fc_baseline, wss.load_scenario(FC_MNIST), "baselines/fc_mnist.json")
    with pytest.raises(StaleBaseline) as info:
        ensure_fresh(fc_baseline, slow, "baselines/fc_mnist.json", "scenarios/fc_mnist.yaml")
    msg = str(info.value)
    assert msg.startswith("baselines/fc_mnist.json is stale")
    assert "hardware.wafer.clock_Hz: 850000000.0 -> 425000000.0" in msg
    assert "wss check scenarios/fc_mnist.yaml --baselines baselines/ --update" in msg
    assert "\n" not in msg


def test_check_scenario_end_to_end(tmp_path: Path, scenario: Path):
    with pytest.raises(MissingBaseline):
        check_scenario(scenario, tmp_path / "b")
    save_baseline(record_baseline(scenario), baseline_path(tmp_path / "b", scenario))
    assert check_scenario(scenario, tmp_path / "b").ok
    scenario.write_text(scenario.read_text(encoding="utf-8").replace("steps: 3", "steps: 2"), encoding="utf-8")
    with pytest.raises(StaleBaseline, match="training.steps: 3 -> 2"):
        check_scenario(scenario, tmp_path / "b")


def test_a_glob_shadowed_by_an_earlier_one_still_counts_as_matching(fc_baseline):
    c = compare(fc_baseline, _simulate(), metric_tolerances={"breakdown_s.*": 0.05, "breakdown_s.b*": 0.1})
    assert c.unmatched_tolerances == ()
    assert next(r for r in c.rows if r.metric == "breakdown_s.bubble").rtol == 0.05
