"""Folded steps (wss/model/folding/step_fold.py) agree with simulating every step.

A run of many steps simulates steps 0-3 and the last and repeats step 3 for the ones between; the
Result must be the unfolded run's to 1e-9 relative: every step's times and breakdown, the means,
utilisation and bytes, and the records (each of step 3's standing for ``1 + copies`` steps, so
totals per kernel and phase match).  Measured: 6e-15 (fc_mnist, 50 steps) and 1e-13 (the small GPT,
both folds at once).  Numerics runs simulate every step.
"""

from __future__ import annotations

import math
from functools import cache

import pytest
from core_helpers import SCENARIOS

import wss
from wss.model import simulate as simulate_module
from wss.model.components.part import Held
from wss.model.folding.fold import FoldMismatch, Snapshot
from wss.model.folding.step_fold import COPIED_STEP, analyse_steps
from wss.model.result.results import RECORD_SECONDS, Result
from wss.views.report import group_rows, kernel_table

REL = 1e-9
#: GPT-3 125M on 4 wafers, 8 micro-batches of 2 per wafer per step: micro-batches and steps both fold.  12 steps (7
#: copies) check what 20 did at half the unfolded run's cost: the folded run simulates the same 5 either way.
SMALL_GPT = {
    "name": "gpt-small", "hardware": {"preset": "cs2-cluster", "wafers": 4}, "workload": {"model": "gpt3-125m"},
    "training": {"global_batch": 64, "seq_len": 512, "micro_batch": 2, "steps": 12, "optimizer": "adamw"}, "seed": 0,
}
CASES = {
    "fc_mnist x 50": lambda fold: wss.load_scenario(
        SCENARIOS / "fc_mnist.yaml", overrides={"training.steps": 50, "simulation.fold_micro_batches": fold}),
    "gpt3-125m x 12": lambda fold: {**SMALL_GPT, "simulation": {"fold_micro_batches": fold}},
}


@cache
def _pair(case: str) -> tuple[Result, Result]:
    return wss.simulate(CASES[case](True)), wss.simulate(CASES[case](False))


def _close(a: float, b: float, scale: float = 0.0) -> bool:
    return abs(a - b) <= REL * max(abs(a), abs(b), scale)


@pytest.mark.parametrize("case", CASES)
def test_the_folded_run_simulates_five_steps_and_stands_for_all(case):
    folded, full = _pair(case)
    steps = full.scenario.training.steps
    assert folded.cluster["steps_simulated"] == 5 and "steps_simulated" not in full.cluster
    assert len(folded.steps) == len(full.steps) == steps
    assert [s.step for s in folded.steps] == list(range(steps))
    assert folded.sim_events < full.sim_events / 3
    assert {r.step for r in folded.records} == {0, 1, 2, COPIED_STEP, steps - 1}
    assert all(r.repeats % (steps - 4) == 0 for r in folded.records if r.step == COPIED_STEP)


@pytest.mark.parametrize("case", CASES)
def test_steps_and_totals_agree_with_the_unfolded_run(case):
    folded, full = _pair(case)
    scale = full.step_time_s
    for a, b in zip(folded.steps, full.steps):
        for f in ("start_s", "end_s", "time_s", "loss_at_user_s"):
            assert _close(getattr(a, f), getattr(b, f)), (a.step, f)
        for c, v in b.breakdown_s.items():
            assert _close(a.breakdown_s[c], v, scale), (a.step, c)
    for f in ("step_time_s", "total_time_s", "samples_per_s", "tokens_per_s", "weight_crossings_per_micro_batch"):
        assert _close(getattr(folded, f), getattr(full, f)), f
    for table in ("breakdown_s", "pacing_s", "phase_s"):
        want = getattr(full, table)
        assert getattr(folded, table).keys() == want.keys()
        for k, v in want.items():
            assert _close(getattr(folded, table)[k], v, scale), (table, k)
    assert folded.bound_by == full.bound_by
    for k, v in full.utilisation.items():
        assert _close(folded.utilisation[k], v, 1.0), k
    for k, v in full.link_bytes.items():
        assert _close(folded.link_bytes[k].total_bytes, v.total_bytes), k
    assert _close(folded.energy.per_step_J, full.energy.per_step_J)


@pytest.mark.parametrize("case", CASES)
def test_records_total_like_the_unfolded_run(case):
    """Per kernel and phase, the folded records weighted by ``repeats`` add up as every step's do."""
    folded, full = _pair(case)
    steps = len(full.steps)
    assert len(folded.records) < len(full.records) / 3
    assert sum(r.repeats for r in folded.records) == len(full.records)
    for by in ("kernel", "phase"):
        want = {(g["where"], g[by]): g for g in group_rows(kernel_table(full), by, steps)}
        got = {(g["where"], g[by]): g for g in group_rows(kernel_table(folded), by, steps)}
        assert got.keys() == want.keys()
        for key, g in want.items():
            assert got[key]["passes"] == g["passes"], key
            for f in ("duration_s", "bytes_in", "bytes_out", "cycles", *RECORD_SECONDS.values()):
                assert _close(got[key][f], g[f], full.step_time_s if f.endswith("_s") else 0.0), (key, f)
    every = math.fsum(r.repeats * getattr(r, f) for r in folded.records for f in RECORD_SECONDS.values())
    assert _close(every, folded.total_time_s)


def test_the_last_step_is_simulated_and_moved_after_the_copies():
    folded, full = _pair("fc_mnist x 50")
    last = [r for r in folded.records if r.step == 49]
    want = [r for r in full.records if r.step == 49]
    assert len(last) == len(want) > 0
    for a, b in zip(last, want):
        assert (a.name, a.phase, a.micro_batch, a.repeats) == (b.name, b.phase, b.micro_batch, 1)
        assert _close(a.start_s, b.start_s) and _close(a.end_s, b.end_s)


def test_few_steps_and_numerics_runs_simulate_every_step():
    few = wss.simulate(wss.load_scenario(SCENARIOS / "fc_mnist.yaml", overrides={"training.steps": 6}))
    assert "steps_simulated" not in few.cluster and len({r.step for r in few.records}) == 6
    numerics = wss.simulate(wss.load_scenario(SCENARIOS / "fc_mnist_numerics.yaml", overrides={"training.steps": 8}))
    assert "steps_simulated" not in numerics.cluster
    assert {r.step for r in numerics.records} == set(range(8))
    assert len(numerics.numerics.losses) == 8 and all(s.loss is not None for s in numerics.steps)


def _state(queued: int = 0, running: float = -1.0, **more: Held) -> dict[str, Held]:
    """A cluster's state with two queues, the optimizer's backlog and the staged bytes (and ``more``)."""
    return {"swarmx.down.l1.inbox": Held(0), "wafer.intake": Held(0), "memoryx.optimizer.queued": Held(queued),
            "memoryx.optimizer.running": Held(running, "period"), "memoryx.staged": Held(0.0, "relative"), **more}


def _snapshots(periods: list[float], states: list[dict[str, Held]] | None = None
               ) -> dict[tuple[int, int], Snapshot]:
    times = [0.0]
    for p in periods:
        times.append(times[-1] + p)
    state = _state()
    return {(k, 0): Snapshot(t, 0, {"wafer.compute": t / 2}, (states or [state] * len(times))[k])
            for k, t in enumerate(times)}


def test_analyse_checks_the_premise():
    ends = [1.0, 2.0, 3.0, 4.0, 5.0]
    fold = analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0]), [], ends, None, copies=10)
    assert fold.period == 1.0 and fold.deltas == {"wafer.compute": 0.5}
    assert fold.shift_of(COPIED_STEP) == 0.0 and fold.shift_of(COPIED_STEP + 1) == 10.0
    with pytest.raises(FoldMismatch, match="took"):
        analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.1]), [], ends, None, copies=10)
    with pytest.raises(FoldMismatch, match="after they start"):
        analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0]), [], [1.0, 2.0, 3.0, 4.2, 5.0], None, copies=10)
    states = [_state()] * 3 + [_state(queued=1, running=0.5)] * 2
    with pytest.raises(FoldMismatch, match="queues differ.*memoryx.optimizer.queued 0 vs 1"):
        analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0], states), [], ends, None, copies=10)
    # The job in service may have run a little longer, within 1e-9 of the period; not more.
    nearly = [_state(running=0.25)] * 3 + [_state(running=0.25 + 1e-10)] * 2
    assert analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0], nearly), [], ends, None, copies=10) is not None
    with pytest.raises(FoldMismatch, match="memoryx.optimizer.running"):
        later = [_state(running=0.25)] * 3 + [_state(running=0.25 + 1e-8)] * 2
        analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0], later), [], ends, None, copies=10)
    # A limited activation store: the chunks in its intake and its transfers' bytes left count too.
    held = {"activations.intake": Held(1), "memoryx.ports.in.transfers": Held((5.0,), "transfers")}
    store = [_state(**held)] * 3
    assert analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0], store * 2), [], ends, None, copies=10) is not None
    for name, value in (("memoryx.ports.in.transfers", (6.0,)), ("activations.intake", 2),
                        ("memoryx.ports.in.transfers", (5.0, 1.0))):
        other = {**held, name: Held(value, held[name].tolerance)}
        states = store + [_state(**other)] * 2
        with pytest.raises(FoldMismatch, match=f"queues differ.*{name}"):
            analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0], states), [], ends, None, copies=10)
    # An entry one state has and the other not (a part that is not in both) differs too.
    with pytest.raises(FoldMismatch, match=r"ticker.queue \(none\) vs 1"):
        analyse_steps(_snapshots([1.0, 1.0, 1.0, 1.0], store + [_state(**held, **{"ticker.queue": Held(1)})] * 2),
                      [], ends, None, copies=10)


def test_a_failed_step_fold_falls_back_to_every_step_with_micro_batches_still_folded(monkeypatch):
    def refuse(*args, **kwargs):
        raise FoldMismatch("steps differ")

    monkeypatch.setattr("wss.model.sim.cluster.analyse_steps", refuse)
    result = simulate_module.simulate(CASES["gpt3-125m x 12"](True))
    _, full = _pair("gpt3-125m x 12")
    assert "steps_simulated" not in result.cluster
    assert result.cluster["micro_batches_simulated"] < result.memory.micro_batches
    assert {r.step for r in result.records} == set(range(12))
    assert _close(result.step_time_s, full.step_time_s)


def test_report_totals_say_what_was_folded():
    from wss.views.report import format_totals

    folded, _ = _pair("gpt3-125m x 12")
    text = format_totals(folded)
    assert "step 3's records count x8, for steps 3-10; micro-batch 3's records count x4, for micro-batches 3-6" in text


def test_transfers_left_compare_to_the_rounding_of_their_clock():
    """Bytes left of a transfer are its end less a clock advanced by time x rate: read a period apart, equal
    states differ by the clock's rounding times the rate (BERT-large in micro-batches of 8: 169,420.6230 vs
    169,420.6232 bytes of a DRAM transfer, a relative 1.3e-9).  Within what the bandwidth moves in 1e-9 of the period
    they are the same; beyond it, or with no rate given, only to a relative 1e-9."""
    from wss.model.folding.fold import same_state

    a, b = (169420.62298198044,), (169420.6232059002,)
    period = 0.0111
    assert same_state({"dram": Held(a, "transfers", 1.0e12)}, {"dram": Held(b, "transfers", 1.0e12)}, period)
    assert not same_state({"dram": Held(a, "transfers")}, {"dram": Held(b, "transfers")}, period)
    far = (a[0] + 2 * 1e-9 * period * 1.0e12,)
    assert not same_state({"dram": Held(a, "transfers", 1.0e12)}, {"dram": Held(far, "transfers", 1.0e12)}, period)
