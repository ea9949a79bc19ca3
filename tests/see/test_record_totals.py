"""Totals over a Result's records equal its step breakdown on every shipped scenario, folded or not.

A folded run (wss/model/folding/fold.py) simulates micro-batches 0-3 and the last of each step and
repeats micro-batch 3's interval for the ones between; its records list only the simulated
passes, and each says in ``repeats`` how many micro-batches it stands for.  Weighted by it, the
records' wafer seconds (``compute_s``, ``stall_<cause>_s``) must add up to the steps' breakdown,
and so must every view that totals records: ``wss report``'s totals and groups (per kernel, layer
and phase), ``Result.to_pandas()`` and the per-kernel plot.

Measured agreement (math.fsum on both sides): at most 2e-16 relative on every shipped scenario;
the tolerance below is 1e-12.  All shipped scenarios run once each (about 30 s, brain_120t half
of it), as a module-scoped parameter: pytest runs each scenario's tests together, and the test workers
share the scenarios.  The folded ones are brain_120t and gpt_1t; since the planner picks few, large
micro-batches for the GPT scenarios, a variant of gpt3_6.7b_sparse forced to 8 micro-batches of 8
(``FOLDED_GPT``) covers a folded sparse GPT run.
"""

from __future__ import annotations

import json
import math
import os
import re
from functools import cache
from pathlib import Path

import pytest

import wss
from wss.model.result.results import BREAKDOWN_CATEGORIES, RECORD_SECONDS, Result, records_breakdown_s
from wss.views.plots import kernel_breakdown
from wss.views.report import format_totals, group_rows, kernel_table

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
#: gpt3_6.7b_sparse with its 64 sequences per wafer run as 8 micro-batches of 8: folded (4 + 1 simulated).
FOLDED_GPT = "gpt3_6.7b_sparse@mb8"
#: The 1T model with its block inputs kept on the wafer (no offload): 8 micro-batches of one sequence, folded,
#: with flash-resident state.  (Its shipped run offloads them and runs one micro-batch.)
FOLDED_FLASH = "gpt_1t@blocks"
VARIANTS = {FOLDED_GPT: ("gpt3_6.7b_sparse", {"training.micro_batch": 8}),
            FOLDED_FLASH: ("gpt_1t", {"training.activation_checkpointing": "blocks"})}
if not os.environ.get("WSS_SLOW"):
    # A numerics run simulates every step: 20 of the walk-through's 200 give the same sums at a tenth of the cost.
    VARIANTS["fc_mnist_numerics"] = ("fc_mnist_numerics", {"training.steps": 20})
SCENARIOS = [*SHIPPED, FOLDED_GPT, FOLDED_FLASH]
REL = 1e-12
#: Records' seconds are differences of clock times as large as the run, so their rounding scales with the run,
#: not with a small category (gpt_1t's stream: 0.08 s of a 70 s step, off by 2.5e-13 s): far below any
#: accounting error, which would be a pass or a chunk (microseconds at least).
ABS_S = 1e-10


def _load(name: str, **extra: object) -> wss.Scenario:
    base, overrides = VARIANTS.get(name, (name, {}))
    return wss.load_scenario(ROOT / "scenarios" / f"{base}.yaml", overrides={**overrides, **extra})


@cache
def _result(name: str) -> Result:
    return wss.simulate(_load(name))


def _close(a: float, b: float, rel: float = REL) -> bool:
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), ABS_S) or a == b


def _run_breakdown(result: Result) -> dict[str, float]:
    """The whole run's seconds by category: the steps' breakdowns summed."""
    return {c: math.fsum(s.breakdown_s[c] for s in result.steps) for c in BREAKDOWN_CATEGORIES}


#: Runs that must fold micro-batches (the variants made for it) and runs that must fold their blocks (the
#: benchmarks' cases): each is checked by its own case below, so the runs spread over the test workers.
MUST_FOLD = {FOLDED_GPT, FOLDED_FLASH}
MUST_FOLD_BLOCKS = {"gpt3_175b", "brain_120t"}


def test_the_shipped_scenarios_and_the_folded_variants_are_listed():
    assert len(SHIPPED) >= 9
    assert set(SCENARIOS) >= MUST_FOLD | MUST_FOLD_BLOCKS


@pytest.fixture(scope="module", params=SCENARIOS)
def name(request: pytest.FixtureRequest) -> str:
    """A scenario's name; module scope makes pytest order the tests by scenario, so one worker runs them."""
    return request.param


def test_shipped_scenarios_include_folded_runs(name):
    """Micro-batch 3's records count once per folded micro-batch; with layers folded too, each copied block's
    records count also once per block left out (one factor per run of identical blocks)."""
    result = _result(name)
    folded = result.cluster["micro_batches_simulated"] < result.memory.micro_batches
    assert folded or name not in MUST_FOLD
    if folded:
        copies = result.memory.micro_batches - result.cluster["micro_batches_simulated"]
        layer = {r.repeats for r in result.records if r.micro_batch != 3}
        assert (layer == {1}) == ("blocks" not in result.cluster), name
        assert {r.repeats for r in result.records if r.micro_batch == 3} == {(1 + copies) * n for n in layer}, name
    layered = "blocks" in result.cluster
    assert layered or name not in MUST_FOLD_BLOCKS
    if layered:
        # every block is simulated or stood for: the forward records of one kernel of a block count for all
        qkv = [r for r in result.records if r.name.endswith(".qkv") and r.phase == "forward" and r.micro_batch == 0
               and r.step == 0]
        assert sum(r.repeats for r in qkv) == result.cluster["blocks"], name


def test_record_totals_equal_the_step_breakdown(name):
    result = _result(name)
    rows = result.to_records()
    expected = _run_breakdown(result)
    for category, field in RECORD_SECONDS.items():
        total = math.fsum(row["repeats"] * row[field] for row in rows)
        assert _close(total, expected[category]), (category, total, expected[category])
    everything = math.fsum(row["repeats"] * row[f] for row in rows for f in RECORD_SECONDS.values())
    assert _close(everything, result.total_time_s)
    per_step = records_breakdown_s(result.records, len(result.steps))
    for c in BREAKDOWN_CATEGORIES:
        assert _close(per_step[c], result.breakdown_s[c]), c
    if result.memory.micro_batches == result.cluster["micro_batches_simulated"] and "blocks" not in result.cluster:
        assert all(row["repeats"] == 1 for row in rows)


def test_report_groups_and_kernel_plot_add_up_to_the_step(name):
    result = _result(name)
    steps = len(result.steps)
    rows = kernel_table(result)
    for by in ("kernel", "layer", "phase"):
        groups = group_rows(rows, by, steps=steps)
        assert sum(g["passes"] for g in groups) == sum(r["repeats"] for r in rows), by
        for category, field in RECORD_SECONDS.items():
            assert _close(math.fsum(g[field] for g in groups), result.breakdown_s[category]), (by, category)
    bars = kernel_breakdown(result, top=10**6)
    step = math.fsum(d["compute_s"] + d["stall_s"] for d in bars)
    assert _close(step, result.step_time_s)
    assert _close(math.fsum(d["compute_s"] for d in bars), result.breakdown_s["compute"])
    text = format_totals(result)
    assert text.startswith("per step, from the records: ") and "(step time " in text
    assert ("folded: " in text) == (result.memory.micro_batches > result.cluster["micro_batches_simulated"]
                                    or "blocks" in result.cluster)


def test_the_records_dataframe_adds_up_to_the_step(name):
    """``Result.to_pandas()`` weighted by ``repeats`` gives the breakdown, as the records do."""
    result = _result(name)
    df = result.to_pandas()
    assert len(df) == len(result.records) and df.attrs["steps"] == len(result.steps)
    for category, field in RECORD_SECONDS.items():
        total = math.fsum((df[field] * df["repeats"]).tolist()) / df.attrs["steps"]
        assert _close(total, result.breakdown_s[category]), category


def _by_kernel_kind(groups: list[dict]) -> dict[tuple[str, str], dict]:
    """Per-kernel groups summed over blocks (``block.12.qkv`` -> ``block.qkv``): a layer-folded run's records
    name only the blocks it simulated, each standing for identical ones (its ``repeats``)."""
    out: dict[tuple[str, str], dict] = {}
    for g in groups:
        key = (g["where"], re.sub(r"\.\d+\.", ".", g["kernel"]))
        if key not in out:
            out[key] = dict(g)
        else:
            for field, v in g.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    out[key][field] += v
    return out


def test_folded_records_total_like_the_unfolded_run():
    """Repeats are the right bookkeeping: per kernel and phase, folded totals match simulating every micro-batch."""
    folded = _result(FOLDED_GPT)
    full = wss.simulate(_load(FOLDED_GPT, **{"simulation.fold_micro_batches": False}))
    simulated = folded.cluster["micro_batches_simulated"]
    assert full.cluster["micro_batches_simulated"] == full.memory.micro_batches > simulated
    assert len(folded.records) < len(full.records)
    steps = len(full.steps)
    want = _by_kernel_kind(group_rows(kernel_table(full), "kernel", steps))
    got = _by_kernel_kind(group_rows(kernel_table(folded), "kernel", steps))
    assert got.keys() == want.keys()
    scale = full.step_time_s
    for key, g in want.items():
        assert got[key]["passes"] == g["passes"], key
        for field in ("duration_s", "bytes_in", "bytes_out", "cycles", *RECORD_SECONDS.values()):
            # the fold's own check allows 1e-9 (of the step for times); measured here: 2e-15
            assert abs(got[key][field] - g[field]) <= 1e-9 * max(abs(g[field]), scale if field.endswith("_s") else 0), \
                (key, field)


def test_json_keeps_counts_small_and_round_trips(tmp_path):
    result = _result(FOLDED_GPT)
    text = result.to_json()
    assert text == result.to_json()
    records = json.loads(text)["records"]
    assert len(records) == len(result.records)
    assert sum("repeats" in r for r in records) == sum(r.repeats > 1 for r in result.records) > 0
    assert all(r.get("stall_flash_s", 1.0) != 0.0 for r in records)  # seconds at 0 are left out
    back = Result.load(result.save(tmp_path / "result.json"))
    assert back == result
    assert back.to_records() == result.to_records()
