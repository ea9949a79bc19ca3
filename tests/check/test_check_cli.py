"""``wss baseline`` and ``wss check``: exit codes, tables and messages.

Most tests drive the commands in-process through ``wss.cli.main``
(:func:`check_helpers.check_cli`); a few run the real entry point in a fresh interpreter.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from check_helpers import WIRED_MAIN, check_cli, copy_scenario, edit_metrics, run_python


def metric_count(baseline: Path) -> int:
    """How many metrics a baseline file holds (the tables count rows out of these)."""
    return len(json.loads(baseline.read_text(encoding="utf-8"))["metrics"])


@pytest.fixture
def recorded(tmp_path: Path, scenario: Path, capsys) -> Path:
    """The scenario's baseline recorded into tmp_path/baselines; returns the baseline file."""
    assert check_cli(["baseline", scenario, "-o", tmp_path / "baselines"]) == 0
    capsys.readouterr()
    return tmp_path / "baselines" / "fc_mnist.json"


def test_baseline_writes_one_file_per_scenario(tmp_path: Path, capsys):
    a = copy_scenario(tmp_path)
    b = copy_scenario(tmp_path, name="fc_other.yaml")
    assert check_cli(["baseline", a, b, "-o", tmp_path / "out"]) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fc_mnist.json", "fc_other.json"]
    assert f"wrote {tmp_path / 'out' / 'fc_mnist.json'}" in capsys.readouterr().out


def test_rerecorded_baseline_is_byte_identical(tmp_path: Path, recorded: Path, scenario: Path):
    first = recorded.read_bytes()
    assert check_cli(["baseline", scenario, "-o", recorded.parent]) == 0
    assert recorded.read_bytes() == first


def test_unchanged_scenario_passes(recorded: Path, scenario: Path, capsys):
    assert check_cli(["check", scenario, "--baselines", recorded.parent]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"ok        {scenario}: ") and "within tolerance" in out
    assert "REGRESSED" not in out


def test_slowed_result_fails_with_the_table(recorded: Path, scenario: Path, capsys):
    # The baseline claims a run 20% faster (and 25% more throughput) than the simulator now gives.
    edit_metrics(recorded, step_time_s=0.8, samples_per_s=1.25, phase_s__wafer__backward=0.8)
    assert check_cli(["check", scenario, "--baselines", recorded.parent]) == 1
    out = capsys.readouterr().out.splitlines()
    # Two gating metrics regressed; the per-phase time is listed too, but it does not gate by default.
    assert out[0] == f"REGRESSED {scenario}: 2 of {metric_count(recorded)} metrics beyond tolerance"
    assert out[1].split() == ["metric", "baseline", "now", "change", "tolerance", "verdict"]
    rows = {line.split()[0]: line for line in out[3:]}
    assert set(rows) == {"step_time_s", "samples_per_s", "phase_s.wafer.backward"}
    assert "+25.00%" in rows["step_time_s"] and rows["step_time_s"].endswith("REGRESSED")
    assert "-20.00%" in rows["samples_per_s"] and rows["samples_per_s"].endswith("REGRESSED")
    assert rows["phase_s.wafer.backward"].endswith("REGRESSED (not gated)")
    assert all("±1%" in line for line in rows.values())


def test_rtol_and_metric_tolerances(recorded: Path, scenario: Path, capsys):
    # The baseline's step 5% faster, and its compute 10% lower (8% of the step: beyond the breakdown's default
    # 5% of the step).
    edit_metrics(recorded, step_time_s=0.95, breakdown_s__compute=0.9)
    d = recorded.parent
    assert check_cli(["check", scenario, "--baselines", d]) == 1
    assert check_cli(["check", scenario, "--baselines", d, "--rtol", "0.1"]) == 1  # the breakdown keeps its 5%
    assert check_cli(["check", scenario, "--baselines", d, "--metric", "step_time_s=0.1",
                      "--metric", "breakdown_s.*=0.1"]) == 0
    assert check_cli(["check", scenario, "--baselines", d, "--metric", "step_time_s=0.1"]) == 1
    assert check_cli(["check", scenario, "--baselines", d, "--metric", "step_time_s=0.1", "--metrics",
                      "step_time_s"]) == 0
    capsys.readouterr()


def test_misspelt_metric_is_bad_input(recorded: Path, scenario: Path, capsys, monkeypatch):
    """Refused with a suggestion from the baseline's metrics, before anything is simulated."""
    import wss.model.simulate

    def no_simulation(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before refusing the metric name")

    monkeypatch.setattr(wss.model.simulate, "simulate_detailed", no_simulation)
    assert check_cli(["check", scenario, "--baselines", recorded.parent, "--metric", "step_tme_s=0.1"]) == 2
    assert ("error: --metric or --metrics step_tme_s matches no metric of the baselines; did you mean "
            "'step_time_s'?") in capsys.readouterr().err


@pytest.mark.parametrize("arg", ["step_time_s", "step_time_s=-1", "=0.1", "step_time_s=abc"])
def test_malformed_metric_option_exits_2(arg: str, tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as info:
        check_cli(["check", tmp_path / "x.yaml", "--metric", arg])
    assert info.value.code == 2
    assert "--metric" in capsys.readouterr().err


def test_improvement_is_listed_and_passes(recorded: Path, scenario: Path, capsys):
    edit_metrics(recorded, step_time_s=1.5, tokens_per_s=0.5)
    assert check_cli(["check", scenario, "--baselines", recorded.parent]) == 0
    out = capsys.readouterr().out
    n = metric_count(recorded)
    assert out.startswith(f"improved  {scenario}: 2 of {n} metrics better than tolerance (not a failure)")
    assert f"wss check {scenario} --baselines {recorded.parent}/ --update" in out
    rows = [line for line in out.splitlines() if line.endswith("improved: refresh the baseline")]
    assert sorted(line.split()[0] for line in rows) == ["step_time_s", "tokens_per_s"]


def test_missing_baseline_exits_2(tmp_path: Path, scenario: Path, capsys):
    assert check_cli(["check", scenario, "--baselines", tmp_path / "none"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: no baseline for {scenario}: {tmp_path / 'none' / 'fc_mnist.json'} does not exist")
    assert "--update" in err and "wss baseline" in err


def test_stale_baseline_exits_2(recorded: Path, scenario: Path, capsys):
    scenario.write_text(scenario.read_text(encoding="utf-8").replace("wafers: 4", "wafers: 8"), encoding="utf-8")
    assert check_cli(["check", scenario, "--baselines", recorded.parent]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: {recorded} is stale")
    assert "hardware.wafers: 4 -> 8" in err and f"wss check {scenario} --baselines {recorded.parent}/ --update" in err


def test_update_rewrites_a_stale_or_edited_baseline(recorded: Path, scenario: Path, capsys):
    fresh = recorded.read_bytes()
    edit_metrics(recorded, step_time_s=0.5)
    assert check_cli(["check", scenario, "--baselines", recorded.parent, "--update"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"updated   {recorded} (1 of {metric_count(recorded)} metrics moved beyond tolerance)")
    assert recorded.read_bytes() == fresh
    assert check_cli(["check", scenario, "--baselines", recorded.parent, "--update"]) == 0
    assert capsys.readouterr().out == f"unchanged {recorded}\n"

    scenario.write_text(scenario.read_text(encoding="utf-8").replace("wafers: 4", "wafers: 8"), encoding="utf-8")
    assert check_cli(["check", scenario, "--baselines", recorded.parent, "--update"]) == 0
    assert "(the scenario had changed)" in capsys.readouterr().out
    assert json.loads(recorded.read_text(encoding="utf-8"))["scenario"]["hardware"]["wafers"] == 8
    assert check_cli(["check", scenario, "--baselines", recorded.parent]) == 0


def test_update_creates_a_missing_baseline(tmp_path: Path, scenario: Path, capsys):
    assert check_cli(["check", scenario, "--baselines", tmp_path / "new", "--update"]) == 0
    assert "(new)" in capsys.readouterr().out
    assert (tmp_path / "new" / "fc_mnist.json").is_file()


def test_bad_scenario_is_one_line_exit_2_and_others_still_run(recorded: Path, scenario: Path, tmp_path: Path, capsys):
    bad = copy_scenario(tmp_path, name="bad.yaml")
    text = bad.read_text(encoding="utf-8")
    line = text.splitlines().index("  wafers: 4") + 1
    bad.write_text(text.replace("wafers: 4", "wafers: -4"), encoding="utf-8")
    assert check_cli(["check", bad, scenario, "--baselines", recorded.parent]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {bad}: hardware.wafers (line {line})") and captured.err.count("\n") == 1
    assert f"ok        {scenario}" in captured.out
    assert captured.out.rstrip().endswith("wss check: 1 ok, 0 regressed, 1 errors")
    assert check_cli(["baseline", bad, "-o", tmp_path / "b2"]) == 2
    assert not (tmp_path / "b2").exists()


def test_two_scenarios_with_one_stem_are_refused(tmp_path: Path, capsys):
    (tmp_path / "a").mkdir()
    a = copy_scenario(tmp_path / "a")
    b = copy_scenario(tmp_path)
    assert check_cli(["baseline", a, b, "-o", tmp_path / "out"]) == 2
    assert "fc_mnist.json" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_all_shows_every_metric(recorded: Path, scenario: Path, capsys):
    assert check_cli(["check", scenario, "--baselines", recorded.parent, "--all"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 + 2 + metric_count(recorded) and all(line.endswith(" ok") for line in out[3:])


def test_wired_wss_baseline_and_check(tmp_path: Path, scenario: Path):
    r = run_python(WIRED_MAIN, "baseline", scenario.name, "-o", "baselines/", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = run_python(WIRED_MAIN, "check", scenario.name, "--baselines", "baselines/", cwd=tmp_path)
    assert (r.returncode, r.stderr) == (0, "") and r.stdout.startswith("ok ")
    edit_metrics(tmp_path / "baselines" / "fc_mnist.json", step_time_s=0.5)
    r = run_python(WIRED_MAIN, "check", scenario.name, "--baselines", "baselines/", cwd=tmp_path)
    assert r.returncode == 1 and "step_time_s" in r.stdout and "REGRESSED" in r.stdout


def test_wired_wss_check_bad_input_exits_2(tmp_path: Path, scenario: Path):
    r = run_python(WIRED_MAIN, "check", scenario.name, "--baselines", "nowhere/", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: no baseline for fc_mnist.yaml")
    (tmp_path / "bad.yaml").write_text("name: [\n", encoding="utf-8")
    r = run_python(WIRED_MAIN, "check", "bad.yaml", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.startswith("error: bad.yaml") and r.stderr.count("\n") == 1
    r = run_python(WIRED_MAIN, "check", "--help", cwd=tmp_path)
    assert r.returncode == 0 and "--baselines" in r.stdout


def test_check_reports_progress_while_it_simulates(recorded: Path, scenario: Path):
    """check_scenario tells a progress callable the fraction simulated, ending at 1 (the CLI's bar)."""
    from wss.studies.check import check_scenario

    seen: list[float] = []
    comparison = check_scenario(scenario, recorded.parent, progress=seen.append)
    assert comparison.ok and seen and seen[-1] == 1.0 and seen == sorted(seen)
