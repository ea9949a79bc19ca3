"""Tracing a folded run: recording keeps folding, the spans sit where the full run has them, the copies are marked.

A recording run folds micro-batches and steps as the plain run does (one run for ``wss simulate --trace``,
result.json byte for byte the plain one); :mod:`wss.model.folding.folded_spans` places its spans on the unfolded axis.
Each folded span is checked against the run that simulates every micro-batch and step: same name, same place.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

import wss
from wss.model.folding.folded_spans import UnfoldedSpans, folded_stretches
from wss.model.simulate import simulate_detailed
from wss.views.trace import build_trace, trace_json

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
#: GPT-3 125M on 4 wafers, 8 micro-batches of 2 per wafer per step, 8 steps: micro-batches and steps both fold.
SMALL_GPT = {
    "name": "gpt-small", "hardware": {"preset": "cs2-cluster", "wafers": 4}, "workload": {"model": "gpt3-125m"},
    "training": {"global_batch": 64, "seq_len": 512, "micro_batch": 2, "steps": 8, "optimizer": "adamw"}, "seed": 0,
}
#: Shipped scenarios that fold: steps (FC-MNIST, 1,000 steps), micro-batches (the others, with smaller ones).
SHIPPED = {
    "fc_mnist x 1000 steps": (SCENARIOS / "fc_mnist.yaml", {"training.steps": 1000}),
    "cs3_gpt3_13b, 16 micro-batches": (SCENARIOS / "cs3_gpt3_13b.yaml", {"training.micro_batch": 4}),
    "cerebras_gpt_13b, 9 micro-batches": (SCENARIOS / "cerebras_gpt_13b.yaml", {"training.micro_batch": 5}),
    "bert_large, 32 micro-batches x 2 steps": (SCENARIOS / "bert_large.yaml", {"training.micro_batch": 8}),
}
#: Each case: the scenario with micro-batch folding on or off, and the kinds of fold its run makes.  The full run
#: folds nothing (``fold_layers=False`` too).
CASES = {
    "gpt3-125m: micro-batches and steps": (
        lambda fold: {**SMALL_GPT, "simulation": {"fold_micro_batches": fold}}, {"micro-batch", "step"}),
    "gpt3_175b: blocks": (lambda fold: wss.load_scenario(SCENARIOS / "gpt3_175b.yaml"), {"block"}),
    # 16 wafers apart, wafer 5 slower (it paces; the others wait): every wafer's track places its own passes; 32 of
    # the 96 blocks fold as the 96 do (9 forward and 8 backward simulated), with a third of the spans to compare
    "gpt3_175b unfolded, a straggler: blocks": (lambda fold: wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", {
        "hardware.wafers": 16, "training.global_batch": 128, "simulation.fold_wafers": False,
        "workload.model.layers.1.repeat": 32, "faults.stragglers": [{"wafer": 5, "slowdown": 1.1}]}), {"block"}),
    # cut to 12 of its 40 blocks (four simulated at each end, four copies; 10 is the fewest that fold), with 8
    # micro-batches and 7 steps (7 of each is the fewest): the three folds nest as at 40 blocks, and the full run
    # this is checked against simulates 12 blocks, not 40, at about a third of the cost
    "cs3_gpt3_13b x 7 steps: blocks, micro-batches and steps": (lambda fold: wss.load_scenario(
        SCENARIOS / "cs3_gpt3_13b.yaml", {"training.micro_batch": 8, "training.steps": 7,
                                          "workload.model.layers.1.repeat": 12,
                                          "simulation.fold_micro_batches": fold}), {"block", "micro-batch", "step"}),
    # every wafer apart; 22 micro-batches of an even split, the last two smaller: 16 copies before micro-batch 20
    # (pinned: with lanes the planner prefers one offloaded micro-batch of 64, which has no micro-batches to fold);
    # 12 of its 32 blocks fold the same (micro-batches only, 6 simulated), with a third of the spans to compare
    "gpt3_6.7b_sparse unfolded: micro-batches": (lambda fold: wss.load_scenario(
        SCENARIOS / "gpt3_6.7b_sparse.yaml", {"hardware.wafers": 4, "training.global_batch": 256,
                                              "workload.model.layers.1.repeat": 12,
                                              "training.micro_batch": 3, "training.activation_checkpointing": "none",
                                              "simulation.fold_wafers": False, "simulation.fold_micro_batches": fold,
                                              # the calibration this fold pattern was found at
                                              "hardware.wafer.kernel_efficiency": 0.59,
                                              "hardware.runtime.step_overhead_s": 0.084}),
        {"micro-batch"}),
}
TOL_US = 2e-3  # times are rounded to the nanosecond


@cache
def _run(case: str, fold: bool):
    return simulate_detailed(CASES[case][0](fold), record=True, fold_layers=fold)


@cache
def _trace(case: str, fold: bool) -> dict:
    return json.loads(trace_json(build_trace(*_run(case, fold))))


def _names(doc: dict) -> tuple[dict[int, str], dict[int, str]]:
    processes = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    threads = {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    return processes, threads


def _spans(doc: dict) -> dict[tuple, list[tuple[float, float]]]:
    """Every span but the folded-copies marks, by (process, thread, name, micro-batch, kernel)."""
    processes, threads = _names(doc)
    out: dict[tuple, list[tuple[float, float]]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] != "folded":
            args = e["args"]
            key = (processes[e["pid"]], threads[e["tid"]], e["name"], args.get("micro_batch"), args.get("kernel"))
            out.setdefault(key, []).append((e["ts"], e["dur"]))
    return out


@pytest.mark.parametrize("case", SHIPPED)
def test_recording_folds_and_leaves_the_result_as_it_is(case):
    path, overrides = SHIPPED[case]
    scenario = wss.load_scenario(path, overrides)
    result, cluster = simulate_detailed(scenario, record=True)
    assert cluster.folding.fold is not None or cluster.folding.step_fold is not None
    assert cluster.memoryx.stream_spans  # it recorded
    assert result.to_json() == wss.simulate(scenario).to_json()


@pytest.mark.parametrize("case", CASES)
def test_every_span_of_the_folded_trace_is_where_the_full_run_has_it(case):
    folded, full = _spans(_trace(case, True)), _spans(_trace(case, False))
    missing = []
    for key, spans in folded.items():
        others = full.get(key, [])
        for ts, dur in spans:
            tol = TOL_US + 1e-9 * ts
            if not any(abs(ts - t) <= tol and abs(dur - d) <= tol for t, d in others):
                missing.append((key, ts, dur))
    assert not missing, missing[:5]
    assert sum(map(len, folded.values())) < sum(map(len, full.values())) / 2


@pytest.mark.parametrize("case", CASES)
def test_what_the_folded_trace_leaves_out_lies_by_the_marked_stretches(case):
    stretches = folded_stretches(_run(case, True)[1])
    folded, full = _spans(_trace(case, True)), _spans(_trace(case, False))
    inside = 0
    for key, spans in full.items():
        drawn = folded.get(key, [])
        for ts, dur in spans:
            if any(abs(ts - t) <= TOL_US + 1e-9 * ts for t, _ in drawn):
                continue
            a, b = ts / 1e6, (ts + dur) / 1e6
            # a copy's spans start before its stretch when MemoryX streams ahead, or end after it
            assert any(a < s.end_s + s.period_s and b > s.start_s - s.period_s for s in stretches), (key, ts, dur)
            inside += 1
    assert inside > 0


@pytest.mark.parametrize("case", CASES)
def test_each_track_marks_each_stretch_once_and_its_spans_nest_in_the_mark(case):
    _, cluster = _run(case, True)
    stretches = folded_stretches(cluster)
    assert {s.kind for s in stretches} == CASES[case][1]
    doc = _trace(case, True)
    _, threads = _names(doc)
    by_thread: dict[int, list[dict]] = {}
    for e in doc["traceEvents"]:
        if e["ph"] == "X":
            by_thread.setdefault(e["tid"], []).append(e)
    assert {"weight stream", "compute", "stalls", "update", "weights down", "gradients up", "input"} <= {
        threads[t] for t in by_thread}
    for tid, events in by_thread.items():
        marks = [e for e in events if e["cat"] == "folded"]
        assert 0 < len(marks) <= len(stretches), threads[tid]
        # first in the file, in time order: a viewer taking spans that start together in file order nests them
        assert events[: len(marks)] == sorted(marks, key=lambda m: m["ts"]), threads[tid]
        assert len({m["name"] for m in marks}) == len(marks)
        for m in marks:
            s = next(s for s in stretches if s.name == m["name"])
            assert s.start_s * 1e6 - TOL_US <= m["ts"] and m["ts"] + m["dur"] <= s.end_s * 1e6 + TOL_US
            assert m["args"]["copies"] == s.copies and m["args"]["period_us"] == pytest.approx(s.period_s * 1e6)
            plural = {"block": "blocks", "micro-batch": "micro-batches", "step": "steps"}[s.kind]
            assert m["args"]["stands_for"] == f"{plural} {s.stands_for[0]}-{s.stands_for[1]}"
            lo, hi = m["ts"], m["ts"] + m["dur"]
            for e in events:
                a, b = e["ts"], e["ts"] + e["dur"]
                if e is not m and a < hi - TOL_US and b > lo + TOL_US:  # overlaps the mark: must be inside it
                    assert lo - TOL_US <= a and b <= hi + TOL_US, (threads[tid], m["name"], e["name"])


def test_stretches_are_where_the_result_has_the_copies():
    """Each copy repeats the period before its stretch: the first simulated micro-batch (or step) after the
    stretch starts as far after its end as the copied one starts after the period before it."""
    result, cluster = _run("gpt3-125m: micro-batches and steps", True)
    stretches = folded_stretches(cluster)
    steps = result.scenario.training.steps
    first = result.records[0].name  # the first pass of every micro-batch
    starts = {(r.step, r.micro_batch): r.start_s for r in result.records
              if r.where == "wafer" and r.name == first and r.phase == "forward"}
    step = next(s for s in stretches if s.kind == "step")
    assert step.stands_for == (4, steps - 2)  # steps 4..6 of 0..7
    assert starts[(steps - 1, 0)] - step.end_s == pytest.approx(starts[(3, 0)] - (step.start_s - step.period_s),
                                                                abs=1e-12)
    mb = [s for s in stretches if s.kind == "micro-batch"]
    assert [s.step for s in mb] == [0, 1, 2, 3, steps - 1]
    last = cluster.folding.fold.last_micro_batch
    for s in mb:
        assert s.stands_for == (4, last - 1)
        assert starts[(s.step, last)] - s.end_s == pytest.approx(starts[(s.step, 3)] - (s.start_s - s.period_s),
                                                                 abs=1e-12)


@pytest.mark.parametrize("case", CASES)
def test_cumulative_busy_time_is_the_full_runs(case):
    """Busy seconds up to a time, read through the stretches, are the full run's outside them and at every
    copy's boundary, and add up to the Result's counters."""
    _, cluster = _run(case, True)
    _, full = _run(case, False)
    placed = UnfoldedSpans(cluster)

    def busy(spans):
        arr = np.asarray([s[:2] for s in spans], dtype=float)

        def until(t):
            return np.clip(t[:, None] - arr[None, :, 0], 0.0, arr[None, :, 1] - arr[None, :, 0]).sum(axis=1)
        return until

    times = sorted({0.0, *(s.start_s + i * s.period_s for s in placed.stretches for i in range(s.copies + 1))})
    t = np.asarray(times)
    for link, twin in zip(cluster.links(), full.links()):
        assert link.name == twin.name
        if not link.spans:
            continue
        mine = placed.cumulative(busy(link.spans), t)
        theirs = busy(twin.spans)(t)
        np.testing.assert_allclose(mine, theirs, rtol=1e-9, atol=1e-15, err_msg=link.name)
        end = placed.cumulative(busy(link.spans), np.asarray([1e9]))[0]
        assert end == pytest.approx(cluster.total(link.name), rel=1e-9)


def test_the_timeline_figure_draws_the_spans_where_the_full_run_has_them_and_hatches_the_copies():
    from wss.views.plots import _rows_from_cluster, _step_window, gantt_figure

    case = "gpt3-125m: micro-batches and steps"
    (result, cluster), (_, full) = _run(case, True), _run(case, False)
    for step in (0, result.scenario.training.steps - 1):
        lo, hi = _step_window(result, step)
        mine, theirs = _rows_from_cluster(cluster, lo, hi), _rows_from_cluster(full, lo, hi)
        assert [label for label, _ in mine] == [label for label, _ in theirs]
        for (label, groups), (_, others) in zip(mine, theirs):
            for key, spans in groups.items():
                for a, b in spans:
                    assert any(abs(a - x) <= 1e-9 * hi and abs(b - y) <= 1e-9 * hi for x, y in others[key]), label
        legend = [t.get_text() for t in gantt_figure(result, cluster, step=step).axes[0].get_legend().get_texts()]
        assert f"folded copies (x3 folded copies of micro-batch 3 s{step})" in legend


def test_block_stretches_are_where_the_result_has_the_copies():
    """GPT-3 175B's 96 blocks: blocks 0-3 and 92-95 simulated (since the refit on the model with lanes its forward
    passes settle early, so four at each end); 88 copies of block 3 in the forward passes and of block 92 in the
    backward ones (recompute and backward), each stretch one period per copy, ending as far before the next
    simulated block as the copied block starts after the period before the stretch."""
    result, cluster = _run("gpt3_175b: blocks", True)
    starts: dict[tuple[str, str], float] = {}
    for r in result.records:
        if r.where == "wafer" and r.layer.startswith("block."):
            key = (r.layer, "forward" if r.phase == "forward" else "backward")
            starts[key] = min(starts.get(key, r.start_s), r.start_s)
    stretches = folded_stretches(cluster)
    assert [(s.direction, s.copied, s.copies, s.stands_for) for s in stretches] == [
        ("forward", 3, 88, (4, 91)), ("backward", 92, 88, (4, 91))]
    for s in stretches:
        after = s.copied + s.copies + 1 if s.direction == "forward" else s.copied - s.copies - 1
        assert starts[(f"block.{after}", s.direction)] - s.end_s == pytest.approx(
            starts[(f"block.{s.copied}", s.direction)] - (s.start_s - s.period_s), abs=1e-12)
