"""The planner: 'auto' checkpointing and micro-batches run the fastest candidate, split evenly.

The analytic ranking is checked against the simulator: on a grid of Cerebras-GPT cases with a
global batch that does not divide evenly, the candidate 'auto' runs is within 1% of the fastest
simulated forced alternative (checkpointing none/blocks x four micro-batch sizes each).
"""

from __future__ import annotations

import json
import os
import sys

import pytest
from core_helpers import SCENARIOS, scenario_dict

import wss
from wss.cli import main
from wss.model.plan import rank_candidates
from wss.model.plan.micro_batching import simulated_micro_batches, split_evenly
from wss.model.plan.search import forced_scenario
from wss.model.result.results import Result

TINY_GPT = "gpt3-125m"


@pytest.mark.parametrize("samples", [1, 7, 64, 65, 99, 256])
def test_even_split_sizes_differ_by_at_most_one_and_the_more_numerous_come_first(samples):
    for n in range(1, samples + 1):
        sizes = split_evenly(samples, n)
        assert len(sizes) == n and sum(sizes) == samples
        assert max(sizes) - min(sizes) <= 1
        first = sizes.count(sizes[0])
        assert first >= n - first  # the leading run is the longer one: folding repeats it
        assert sizes == sorted(sizes[:first]) + sizes[first:]  # one run of each size


def test_sixty_five_at_sixteen_runs_as_five_of_thirteen():
    # Changed with the planner: this ran 16 + 16 + 16 + 16 + 1, the last streaming every weight for one sample.
    s = wss.load_scenario(scenario_dict(model=TINY_GPT, global_batch=65, training={"micro_batch": 16}))
    assert wss.plan(s).micro_batches == [13] * 5


def test_folding_repeats_the_leading_run_and_simulates_the_tail():
    assert simulated_micro_batches([13] * 9, fold=True) == [0, 1, 2, 3, 8]
    assert simulated_micro_batches([7] * 7 + [6] * 2, fold=True) == [0, 1, 2, 3, 7, 8]
    assert simulated_micro_batches([7] * 5 + [6] * 4, fold=True) == list(range(9))  # too few copies: no fold
    assert simulated_micro_batches([7] * 9, fold=False) == list(range(9))


def test_an_even_split_with_a_tail_folds_to_the_full_simulation():
    """61 samples at 7: 7 x 7 then 6 x 2.  Micro-batches 4-6 are copies; 7 and 8 are simulated."""
    raw = scenario_dict(model=TINY_GPT, wafers=1, global_batch=61, steps=2, optimizer="adamw",
                        training={"micro_batch": 7, "seq_len": 256})
    folded = wss.simulate(raw)
    full = wss.simulate({**raw, "simulation": {"fold_micro_batches": False}})
    assert folded.memory.micro_batches == 9
    assert folded.cluster["micro_batches_simulated"] == 6
    assert full.cluster["micro_batches_simulated"] == 9
    assert folded.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    for a, b in zip(folded.steps, full.steps):
        assert a.end_s == pytest.approx(b.end_s, rel=1e-9)
    by_key = {(r.step, r.micro_batch, r.name, r.phase, r.where): r for r in full.records}
    tol = 1e-9 * full.total_time_s
    for r in folded.records:
        ref = by_key[(r.step, r.micro_batch, r.name, r.phase, r.where)]
        assert abs(r.end_s - ref.end_s) <= tol, (r.step, r.micro_batch, r.name, r.phase)


def test_explicit_values_restrict_the_search():
    base = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml")
    both = rank_candidates(base)
    assert {c.checkpointing for c in both} == {"none", "blocks", "offload"}
    mode = rank_candidates(wss.load_scenario(base, {"training.activation_checkpointing": "none"}))
    assert {c.checkpointing for c in mode} == {"none"}
    assert len(mode) > 1
    size = rank_candidates(wss.load_scenario(base, {"training.micro_batch": 2}))
    assert sorted(c.checkpointing for c in size) == ["blocks", "none", "offload"]
    assert all(c.largest == 2 for c in size)
    plan = wss.plan(wss.load_scenario(base, {"training.micro_batch": 2, "training.activation_checkpointing": "none"}))
    assert plan.choice is not None and plan.choice.candidates == 1 and plan.choice.searched == ()
    assert plan.choice.line() == "none checkpointing, 23 micro-batches of 2 and 1 (asked for)"


def test_the_choice_is_recorded_in_the_result_and_the_summary(tmp_path):
    from wss.views.summary import format_result

    r = wss.simulate(SCENARIOS / "cerebras_gpt_13b.yaml")
    choice = r.plan_choice
    assert choice is not None
    assert choice.chosen.checkpointing == r.memory.activation_checkpointing
    assert len(choice.chosen.micro_batches) == r.memory.micro_batches
    assert choice.searched == ("activation_checkpointing", "micro_batch")
    assert 1 <= len(choice.alternatives) <= 4
    assert all(a.step_time_s >= choice.chosen.step_time_s for a in choice.alternatives)
    line = "  plan         blocks checkpointing, 2 micro-batches of 23 and 22 (auto; next best: blocks x 3, +"
    assert line in format_result(r)
    path = r.save(tmp_path / "result.json")
    assert json.loads(path.read_text())["plan_choice"]["chosen"]["micro_batches"] == [23, 22]
    assert Result.load(path) == r


@pytest.mark.parametrize("bound, gain", [("hardware", 2.0), ("shipped", 1.2)])
def test_auto_beats_the_old_rule_on_gpt3_6_7b_on_one_wafer(bound, gain):
    """The issue's case: the old 'auto' kept every activation (one sample fits), so the micro-batches were
    tiny and each streamed every weight again; block checkpointing allows far fewer.

    The gain is largest at the hardware's own bound (no fixed costs, the ideal kernel schedule: the
    issue measured 2.9x there); with the shipped calibrated costs compute takes a larger share of the
    step and the gain is smaller, but auto must still win clearly.
    """
    over = {"workload.model": "gpt3-6.7b", "hardware.wafers": 1, "training.global_batch": 64}
    if bound == "hardware":
        over |= {"hardware.runtime.preset": "ideal", "hardware.wafer.kernel_efficiency": 1.0}
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", over)
    none = rank_candidates(wss.load_scenario(s, {"training.activation_checkpointing": "none"}))
    old_rule = min(none, key=lambda c: len(c.micro_batches))  # the largest micro-batch that fits, no checkpointing
    auto = wss.simulate(s)
    old = wss.simulate(forced_scenario(s, old_rule))
    assert auto.memory.activation_checkpointing in ("blocks", "offload")  # checkpointed: far fewer micro-batches
    assert auto.step_time_s * gain < old.step_time_s


GRID = [
    ("cerebras-gpt-1.3b", 1, 131),
    ("cerebras-gpt-1.3b", 4, 131),
    ("cerebras-gpt-6.7b", 1, 67),
    ("cerebras-gpt-6.7b", 4, 131),
]


@pytest.mark.parametrize("model, wafers, batch", GRID)
def test_auto_is_within_one_percent_of_the_best_forced_alternative(model, wafers, batch):
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",
                          {"workload.model": model, "hardware.wafers": wafers, "training.global_batch": batch})
    auto = wss.simulate(s)
    assert s.training.global_batch % s.hardware.wafers or batch % 2  # a batch that does not divide evenly
    forced = []
    feasible = set()
    for mode in ("none", "blocks"):
        try:
            ranked = rank_candidates(wss.load_scenario(s, {"training.activation_checkpointing": mode}))
        except wss.InfeasibleError:  # GPT-3 175B: one sample's activations do not fit without checkpointing
            continue
        feasible.add(mode)
        by_count = sorted(ranked, key=lambda c: len(c.micro_batches))
        forced += by_count[:4]  # the four largest micro-batch sizes of the mode (all, if it has fewer)
    assert len({c.largest for c in forced}) >= 4
    assert "blocks" in feasible and {c.checkpointing for c in forced} == feasible
    times = [wss.simulate(forced_scenario(s, c)).step_time_s for c in forced]
    best = min(times)
    assert auto.step_time_s <= best * 1.01, (auto.plan_choice.line() if auto.plan_choice else None,
                                             [(c.short(), t) for c, t in zip(forced, times)])


def test_plan_command_prints_the_choice_and_the_alternatives(capsys):
    assert main(["plan", str(SCENARIOS / "cerebras_gpt_13b.yaml"), "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cerebras-gpt-13b-16: blocks checkpointing, 2 micro-batches of 23 and 22 (auto; next best:")
    rows = [line for line in out.splitlines() if line.split()[0].isdigit()]
    assert len(rows) == 3
    assert "analytic" in out and "crossings" in out and "simulated" not in out


def test_plan_command_json_and_simulate(capsys):
    assert main(["plan", str(SCENARIOS / "fc_mnist.yaml"), "--top", "1", "--json", "--simulate"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scenario"] == "fc-mnist"
    assert len(data["shown"]) == 2
    first = data["shown"][0]
    assert first["micro_batches"] == [64]
    assert first["simulated_step_time_s"] == pytest.approx(wss.simulate(SCENARIOS / "fc_mnist.yaml").step_time_s)
    assert main(["plan", str(SCENARIOS / "fc_mnist.yaml"), "--top", "1", "--simulate"]) == 0
    assert "simulated" in capsys.readouterr().out


def test_plan_command_bad_input_is_one_error_line(capsys, tmp_path):
    assert main(["plan", str(SCENARIOS / "fc_mnist.yaml"), "--set", "training.micro_batch=0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")


def _shipped_runs() -> list[tuple[str, dict]]:
    """Every shipped scenario as the fidelity cross-check runs it (the slow ones reduced)."""
    sys.path.insert(0, str(SCENARIOS.parent / "tests" / "fidelity"))
    from fidelity_helpers import CROSS_CHECK

    return [(name, CROSS_CHECK[name][0]) for name in sorted(CROSS_CHECK)]


@pytest.mark.parametrize(("name", "overrides"), _shipped_runs(), ids=[n for n, _ in _shipped_runs()])
def test_the_analytic_level_is_within_three_percent_of_the_simulator(name, overrides):
    """The analytic level prices the plan the planner chose within 3% of what the simulator then measures
    (docs/fidelity.md gives the errors, and a grid of models x wafers x batches from tools/analytic_grid.py);
    and the planner's price of its choice is what ``wss estimate`` reports: one model, two views."""
    s = wss.load_scenario(SCENARIOS / f"{name}.yaml", overrides)
    analytic = rank_candidates(s)[0].step_time_s
    assert analytic == pytest.approx(wss.simulate(s).step_time_s, rel=0.03)
    assert analytic == pytest.approx(wss.estimate(s).step_time_s, rel=1e-12)


ISSUE_GRID = [(m, n) for m in ("cerebras-gpt-1.3b", "cerebras-gpt-6.7b", "cerebras-gpt-13b", "gpt3-175b")
              for n in (1, 4, 16, 64)]
#: One global batch per model that does not divide evenly over the wafers x micro-batch.
ODD_BATCH = {"cerebras-gpt-1.3b": 131, "cerebras-gpt-6.7b": 131, "cerebras-gpt-13b": 131, "gpt3-175b": 1031}


@pytest.mark.skipif(not os.environ.get("WSS_SLOW"), reason="the full grid simulates ~150 runs: set WSS_SLOW=1")
@pytest.mark.parametrize("model, wafers", ISSUE_GRID)
def test_auto_is_within_one_percent_of_the_best_forced_alternative_on_the_full_grid(model, wafers):
    # At least 8 samples per wafer, so that four micro-batch sizes exist; still not a multiple of the wafers.
    batch = max(ODD_BATCH[model], 8 * wafers + 3)
    test_auto_is_within_one_percent_of_the_best_forced_alternative(model, wafers, batch)
