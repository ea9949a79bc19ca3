"""``wss size``'s search: the same answer as simulating every count, the analytic level only steering it and
bounding misses by compute; the probes in the table; a progress bar on a terminal only."""

from __future__ import annotations

import io
import math
import re
import sys
from functools import cache
from pathlib import Path

import pytest

import wss
from wss.cli.app import main
from wss.studies.estimate import estimate
from wss.studies.size import format_size

REPO = Path(__file__).resolve().parents[2]
SCENARIO = str(REPO / "scenarios" / "gpt3_175b.yaml")
TOKENS = 1e9
#: Small GPTs that simulate in well under a second, with a batch most counts do not divide (uneven shards,
#: the wafers simulated apart): GPT-3 125M, mostly paced by the stream, and 1.3B, mostly by compute.  No job
#: costs (job: none): the search is checked against the steps alone (tests/size/test_size_job.py adds them).
CASES = {
    "batch 60": {"workload.model": "gpt3-125m", "training.global_batch": 60, "hardware.wafers": 1, "job": "none"},
    "1.3b batch 60": {"workload.model": "gpt3-1.3b", "training.global_batch": 60, "hardware.wafers": 1,
                      "job": "none"},
}
TOP = 16


@cache
def _exhaustive(case: str) -> dict[int, wss.Result]:
    """Every count from 1 to TOP simulated."""
    return {n: wss.simulate(wss.load_scenario(SCENARIO, {**CASES[case], "hardware.wafers": n}))
            for n in range(1, TOP + 1)}


def _days(r: wss.Result) -> float:
    return TOKENS / r.tokens_per_s / 86400


def _deadlines(case: str) -> list[float]:
    """Deadlines between consecutive simulated times (each has one answer), one below them all (none meets)
    and one above (one wafer meets)."""
    days: list[float] = []
    for d in sorted(_days(r) for r in _exhaustive(case).values()):
        if not days or d > days[-1] * (1 + 1e-9):  # counts whose steps differ only by rounding are one time
            days.append(d)
    between = [math.sqrt(a * b) for a, b in zip(days, days[1:])]
    picks = between[:: max(1, len(between) // 5)]
    return [days[0] * 0.9, *picks, days[-1] * 1.1]


@pytest.mark.parametrize("case", list(CASES))
def test_the_answer_is_exhaustive_simulations(case):
    """For deadlines across the range, the recommended size is the smallest count whose simulation meets it,
    found among all TOP simulated; an unreachable deadline is unreachable."""
    sims = _exhaustive(case)
    for deadline in _deadlines(case):
        expected = next((n for n in range(1, TOP + 1) if _days(sims[n]) <= deadline), None)
        df = wss.size(SCENARIO, TOKENS, days=deadline, max_wafers=TOP, overrides=CASES[case])
        assert df.attrs["recommended"] == expected, (case, deadline)
        assert df.attrs["reachable"] is (expected is not None)
        if expected is not None:  # the recommended row is simulated, with the simulation's figures (a count the
            # batch does not divide with the busiest wafer for all: the wafers-apart step to rounding)
            row = df.set_index("wafers").loc[expected]
            assert row["how"] == "simulated"
            assert row["tokens_per_s"] == pytest.approx(sims[expected].tokens_per_s, rel=1e-12)


def test_a_throughput_target_is_exhaustive_simulations_too():
    sims = _exhaustive("batch 60")
    rates = sorted(r.tokens_per_s for r in sims.values())
    target = (rates[len(rates) // 2] + rates[len(rates) // 2 + 1]) / 2
    expected = next(n for n in range(1, TOP + 1) if sims[n].tokens_per_s >= target)
    df = wss.size(SCENARIO, TOKENS, tokens_per_s=target, max_wafers=TOP, overrides=CASES["batch 60"])
    assert df.attrs["recommended"] == expected


@pytest.mark.parametrize("case", list(CASES))
def test_compute_bounds_every_simulated_step(case):
    """The bound the search prunes by: a simulated step takes at least the plan's compute, which the
    simulator adds exactly as the analytic level does (uneven counts too)."""
    for n, r in _exhaustive(case).items():
        e = estimate(wss.load_scenario(SCENARIO, {**CASES[case], "hardware.wafers": n}))
        assert r.breakdown_s["compute"] == pytest.approx(e.breakdown_s["compute"], rel=1e-9)
        assert r.step_time_s >= e.breakdown_s["compute"]


def test_probes_say_how_each_count_was_decided_and_bounded_ones_miss_in_simulation():
    """Where a count's compute alone is slower than the next count's whole step, a deadline between them is
    decided by bounding the first (not simulated; it misses in simulation too) and simulating the second.
    The text names the deciding counts, how each was decided and the time it took, and marks estimates."""
    case = "1.3b batch 60"
    sims = _exhaustive(case)
    compute = {n: estimate(wss.load_scenario(SCENARIO, {**CASES[case], "hardware.wafers": n})).breakdown_s["compute"]
               for n in sims}
    pairs = [n for n in range(2, TOP + 1) if compute[n - 1] > sims[n].step_time_s * 1.01]
    assert pairs, "no count whose compute alone is slower than the next count's step"
    for n in pairs[:3]:
        step = math.sqrt(compute[n - 1] * sims[n].step_time_s)  # between the two
        deadline = TOKENS / (sims[n].tokens_per_s * sims[n].step_time_s / step) / 86400
        expected = next(m for m in range(1, TOP + 1) if _days(sims[m]) <= deadline)
        df = wss.size(SCENARIO, TOKENS, days=deadline, max_wafers=TOP, overrides=CASES[case])
        assert df.attrs["recommended"] == expected
        probes = df.attrs["search"]["probes"]
        bounded = [p for p in probes if p["how"] == "bounded"]
        assert bounded, (n, probes)
        for p in bounded:
            assert not p["meets"] and _days(sims[p["wafers"]]) > deadline
            assert sims[p["wafers"]].step_time_s >= p["step_time_s"]
        simulated = {p["wafers"] for p in probes if p["how"] == "simulated"}
        assert set(df.loc[df["how"] == "simulated", "wafers"]) == simulated
        text = format_size(df)
        assert "estimates" in text and "the counts that decide:" in text and "simulation  <- recommended" in text
        assert re.search(r"\n +\d+  bounded: its compute alone +at least [\d.]+ s  misses", text)
        assert " estimate" in text


def test_without_a_target_every_size_is_simulated():
    df = wss.size(SCENARIO, TOKENS, max_wafers=4, overrides=CASES["batch 60"])
    assert list(df["how"]) == ["simulated"] * 3 and df.attrs["search"] is None
    assert " by " not in format_size(df).splitlines()[1] and "decide" not in format_size(df)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stream, drawn", [(_Terminal, True), (io.StringIO, False)])
def test_the_progress_bar_is_drawn_on_a_terminal_only(stream, drawn, monkeypatch, capsys):
    """While it probes, ``wss size`` draws a bar on a terminal (after half a second), closed before the table
    prints, and a long run's warning goes on a line of its own; into a pipe or a file it draws nothing."""
    err = stream()
    monkeypatch.setattr(sys, "stderr", err)
    monkeypatch.setattr("wss.model.folding.run_plan.LONG_RUN_S", 0.0)  # every simulation warns
    deadline = _deadlines("batch 60")[2]
    argv = ["size", SCENARIO, "--tokens", str(TOKENS), "--days", repr(deadline), "--max-wafers", str(TOP)]
    assert main([*argv, *[f"--set={k}={v}" for k, v in CASES["batch 60"].items()]]) == 0
    out = capsys.readouterr().out
    assert "recommended:" in out and "%|" not in out
    assert ("size" in err.getvalue() and "100%|" in err.getvalue()) is drawn
    warnings = [line for line in err.getvalue().replace("\r", "\n").splitlines() if "this run will take" in line]
    assert warnings and all(line.startswith("wss: WARNING: ") for line in warnings)
    if not drawn:
        assert "%|" not in err.getvalue()


@pytest.mark.parametrize("case", list(CASES))
def test_a_size_the_batch_does_not_divide_is_simulated_with_the_busiest_wafer_for_all(case):
    """A size's row reads only the step, which the busiest wafer standing for all gives exactly where only the
    uneven shards set the wafers apart: ``sized`` folds them, and the step is the wafers-apart run's."""
    from wss.studies.size import sized

    base = wss.load_scenario(SCENARIO, CASES[case])
    probe = sized(base, 7)  # 60 samples over 7 wafers: 4 of 9, 3 of 8
    assert probe.simulation.fold_wafers is True
    apart = _exhaustive(case)[7]
    assert not apart.wafer_folding.folded
    folded = wss.simulate(probe)
    assert folded.wafer_folding.folded
    assert folded.sim_events < apart.sim_events
    assert folded.step_time_s == pytest.approx(apart.step_time_s, rel=1e-9)
    assert folded.tokens_per_s == pytest.approx(apart.tokens_per_s, rel=1e-9)
    assert folded.bound_by == apart.bound_by
    assert sized(base, 6).simulation.fold_wafers == "auto"  # even: auto folds it anyway


@pytest.mark.parametrize(("overrides", "why"), [
    ({"faults.stragglers": [{"wafer": 0, "slowdown": 1.2}]}, "a straggler sets its wafer apart"),
    ({"simulation.fold_wafers": False}, "asked for"),
    ({"training.activation_checkpointing": "offload", "hardware.activation_store.location": "memoryx"},
     "MemoryX keeps every wafer's block inputs at its own times"),
])
def test_a_size_set_apart_for_more_than_its_shards_runs_as_auto_would(overrides, why):
    from wss.studies.size import sized

    base = wss.load_scenario(SCENARIO, {**CASES["batch 60"], **overrides})
    assert sized(base, 7).simulation.fold_wafers == base.simulation.fold_wafers, why
