"""``wss size`` and ``wss.size``: the recommended size meets the deadline in simulation, the next smaller misses it."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import wss
from wss.cli.app import main
from wss.studies.size import SizeError, cluster_sizes

REPO = Path(__file__).resolve().parents[2]
SCENARIO = str(REPO / "scenarios" / "gpt3_175b.yaml")
#: A small GPT so every size simulates in well under a second; no job costs (job: none), so its days are the
#: steps' alone (tests/size/test_size_job.py counts the job's).
SMALL = {"workload.model": "gpt3-125m", "training.global_batch": 64, "hardware.wafers": 1, "job": "none"}
SMALL_SET = [f"--set={k}={v}" for k, v in SMALL.items()]
TOKENS = 1e9


def _simulated_days(wafers: int) -> float:
    r = wss.simulate(wss.load_scenario(SCENARIO, {**SMALL, "hardware.wafers": wafers}))
    return TOKENS / r.tokens_per_s / 86400


@pytest.fixture(scope="module")
def table():
    return wss.size(SCENARIO, TOKENS, max_wafers=16, overrides=SMALL)


def test_sizes_are_powers_of_two_and_the_limit():
    assert cluster_sizes(16) == [1, 2, 4, 8, 16]
    assert cluster_sizes(192) == [1, 2, 4, 8, 16, 32, 64, 128, 192]
    assert cluster_sizes(1) == [1]


def test_table_columns_and_energy(table):
    assert list(table["wafers"]) == [1, 2, 4, 8, 16]
    assert (table["status"] == "ok").all()
    assert table["efficiency"].iloc[0] == pytest.approx(1.0)
    assert (table["energy_kWh"] > 0).all()
    assert table.attrs["global_batch"] == 64
    assert table.attrs["target"] is None and not table["recommended"].any()
    assert list(table["wafer_hours"]) == pytest.approx(list(table["wafers"] * table["days"] * 24))


def test_recommended_meets_the_deadline_and_the_next_smaller_misses(table):
    days4, days8 = table.set_index("wafers").loc[[4, 8], "days"]
    deadline = math.sqrt(days4 * days8)  # between the 4- and 8-wafer times
    df = wss.size(SCENARIO, TOKENS, days=deadline, max_wafers=16, overrides=SMALL, price_per_wafer_hour=5.0)
    best = df.attrs["recommended"]
    assert 4 < best <= 8 and df.attrs["reachable"] is True
    assert df["recommended"].sum() == 1
    assert "cost" in df.columns
    assert set(df["wafers"]) > {1, 2, 4, 8, 16}  # the bisection's probes are rows too
    assert list(df["wafers"]) == sorted(df["wafers"])
    # checked against fresh simulations, not the table: the smallest cluster that meets it, one fewer misses
    assert _simulated_days(best) <= deadline
    assert _simulated_days(best - 1) > deadline


def test_throughput_target(table):
    tps2, tps4 = table.set_index("wafers").loc[[2, 4], "tokens_per_s"]
    df = wss.size(SCENARIO, TOKENS, tokens_per_s=(tps2 + tps4) / 2, max_wafers=16, overrides=SMALL)
    assert df.attrs["recommended"] in (3, 4)
    rows = df.set_index("wafers")
    assert rows.loc[df.attrs["recommended"], "tokens_per_s"] >= (tps2 + tps4) / 2
    assert rows.loc[df.attrs["recommended"] - 1, "tokens_per_s"] < (tps2 + tps4) / 2


def test_cli_recommends_and_writes_plot_and_json(tmp_path, capsys, table):
    deadline = math.sqrt(table["days"].iloc[2] * table["days"].iloc[3])
    plot = tmp_path / "size.png"
    code = main(["size", SCENARIO, "--tokens", "1e9", "--days", str(deadline), "--max-wafers", "16",
                 "--plot", str(plot), *SMALL_SET])
    out = capsys.readouterr().out
    assert code == 0
    expected = wss.size(SCENARIO, 1e9, days=deadline, max_wafers=16, overrides=SMALL).attrs["recommended"]
    assert 4 < expected <= 8
    assert "<- recommended" in out and f"recommended: {expected} wafers" in out
    assert plot.stat().st_size > 0
    assert main(["size", SCENARIO, "--tokens", "1e9", "--max-wafers", "4", "--json", *SMALL_SET]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["wafers"] for r in data["rows"]] == [1, 2, 4]


def test_cli_unreachable_exits_1_with_the_best(capsys):
    code = main(["size", SCENARIO, "--tokens", "1e20", "--days", "1", "--max-wafers", "4", *SMALL_SET])
    out = capsys.readouterr().out
    assert code == 1
    assert "unreachable: no size up to 4 wafers meets 1 days; the best is 4 wafers" in out


@pytest.mark.parametrize("argv, message", [
    (["--tokens", "-5"], "tokens must be a positive number"),
    (["--tokens", "1e9", "--days", "0"], "days must be a positive number"),
    (["--tokens", "1e9", "--max-wafers", "0"], "max_wafers must be a positive integer"),
    (["--tokens", "1e9", "--max-wafers", "256"], "above the largest published cluster of wse2 (192"),
    (["--tokens", "1e9", "--price-per-wafer-hour", "-1"], "price_per_wafer_hour must be a non-negative"),
    (["--tokens", "1e9", "--plot", "x.txt", "--max-wafers", "1"], "must end in .png, .svg or .pdf"),
])
def test_cli_bad_arguments_exit_2_with_one_line(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["size", SCENARIO, *argv, *SMALL_SET]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_two_targets_are_refused():
    with pytest.raises(SizeError, match="one target"):
        wss.size(SCENARIO, TOKENS, days=1, tokens_per_s=1e6, overrides=SMALL)


def test_non_token_model_is_refused():
    with pytest.raises(SizeError, match="token model"):
        wss.size(str(REPO / "scenarios" / "fc_mnist.yaml"), TOKENS)


def test_energy_is_power_times_time_and_in_the_summary():
    from wss.views.summary import format_result

    r = wss.simulate(wss.load_scenario(SCENARIO, SMALL))
    e = r.energy
    assert e is not None
    hw = r.scenario.hardware
    nodes = sum(int(n) for n in r.cluster["nodes_per_level"])  # type: ignore[union-attr]
    # no preset gives an idle figure: every part draws its busy figure all the time
    expected_W = hw.wafers * 23000 + hw.memoryx.shards * 1000 + nodes * 1000
    assert e.average_power_W == pytest.approx(expected_W)
    assert e.per_step_J == pytest.approx(expected_W * r.step_time_s)
    assert sum(e.by_part_J.values()) == pytest.approx(e.per_step_J)
    assert e.per_token_J == pytest.approx(e.per_step_J / (r.tokens_per_s * r.step_time_s))
    assert "  energy       " in format_result(r)


def test_idle_power_weights_by_busy_fraction():
    r = wss.simulate(wss.load_scenario(SCENARIO, {**SMALL, "hardware.wafer.power_idle_W": 0.0}))
    e = r.energy
    assert e is not None
    assert e.by_part_J["wafer"] == pytest.approx(23000 * r.utilisation["wafer.compute"] * r.step_time_s)


def test_no_power_figure_no_energy():
    r = wss.simulate(wss.load_scenario(SCENARIO, {**SMALL, "hardware.swarmx.power_busy_W": None}))
    assert r.energy is None


def test_progress_counts_every_probe_and_never_runs_backwards(table):
    """The fraction starts at 0, rises with each probe (estimates, and simulations from within), ends at 1."""
    days4, days8 = table.set_index("wafers").loc[[4, 8], "days"]
    seen: list[float] = []
    df = wss.size(SCENARIO, TOKENS, days=math.sqrt(days4 * days8), max_wafers=16, overrides=SMALL,
                  progress=seen.append)
    assert seen[0] == 0.0 and seen[-1] == 1.0
    assert seen == sorted(seen)
    assert len(seen) >= len(df.attrs["search"]["probes"]) + 2  # a call per probe at least, the start and the end


def test_reproduce_reports_its_progress_case_by_case():
    from wss.studies.validation import default_directory, reproduce

    cases = sorted(default_directory().glob("*.yaml"))[:2]
    seen: list[float] = []
    outcomes = reproduce(cases, progress=seen.append)
    assert len(outcomes) == 2 and seen == [0.0, 0.5, 1.0]


def test_tokens_is_required_and_the_usage_says_so(capsys):
    """``--tokens`` shows as required in the usage (not in brackets), and leaving it out is a usage error."""
    with pytest.raises(SystemExit) as exc:
        main(["size", SCENARIO])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "the following arguments are required: --tokens" in err
    assert " --tokens N" in err and "[--tokens N]" not in err
