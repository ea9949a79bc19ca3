"""What planning keeps between plans of one scenario, and that it gives the answers it would work out anew.

A scenario is often planned more than once (``wss.plan`` then ``wss.simulate``; a run's plan with other folds),
so the planner keeps the choice made for a scenario object while it lives, what it derives before the choice
for the scenarios planned last, and every sampled non-zero profile (a function of its shape, density and seed)
with its busiest engine rows.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import wss
from wss.model import plan as planner
from wss.model.kernels.cycles import NnzProfile, sampled_profile
from wss.model.kernels.mapping import row_loads
from wss.model.plan import _CHOICES, INPUTS_KEPT, make_plan, plan_inputs
from wss.model.plan.profiles import kernel_profiles, mask_rng
from wss.model.plan.search import choose
from wss.model.workload import StreamedKernel

SPARSE = {
    "name": "sparse-gpt",
    "hardware": {"preset": "cs2-cluster", "wafers": 2},
    "workload": {"model": "gpt3-125m", "sparsity": 0.75},
    "training": {"global_batch": 8, "seq_len": 128},
}


def test_a_scenario_planned_again_reuses_its_choice_and_a_new_one_makes_the_same():
    s = wss.load_scenario(SPARSE)
    first = make_plan(s)
    again = make_plan(s, fold=False, fold_layers=True)
    assert again.choice is first.choice
    fresh = wss.load_scenario(SPARSE)
    assert make_plan(fresh).choice is not first.choice
    assert make_plan(fresh).choice == first.choice == choose(*_costing(fresh))[1]


def _costing(s: wss.Scenario) -> tuple:
    inp = plan_inputs(s, None)
    return inp.costing, inp.candidates


def test_the_choice_is_let_go_with_its_scenario():
    s = wss.load_scenario(SPARSE)
    make_plan(s)
    key = id(s)
    assert key in _CHOICES
    others = [wss.load_scenario(SPARSE) for _ in range(INPUTS_KEPT)]
    for other in others:  # planned since: the kept inputs let go of s
        make_plan(other)
    del s
    gc.collect()
    assert key not in _CHOICES


def test_a_scenario_planned_again_reuses_its_inputs_and_its_plans_equal_fresh_ones(monkeypatch):
    derived = []

    def counted(s, profiles):
        derived.append(id(s))
        return plan_inputs(s, profiles)

    monkeypatch.setattr(planner, "plan_inputs", counted)
    s = wss.load_scenario(SPARSE)
    first = make_plan(s)
    again = make_plan(s, fold=False, fold_layers=True)
    wss.simulate(s)
    assert derived == [id(s)]  # once for every plan of the scenario
    fresh = wss.load_scenario(SPARSE)
    assert make_plan(fresh) == first and make_plan(fresh, fold=False, fold_layers=True) == again
    assert derived == [id(s), id(fresh)]
    assert first.ops is not again.ops and first.wafer_samples is not again.wafer_samples  # each plan's own lists
    first.ops.clear()
    first.wafer_samples.clear()
    assert make_plan(s) == make_plan(fresh)


def test_only_the_last_planned_scenarios_inputs_are_kept():
    kept = [wss.load_scenario(SPARSE) for _ in range(INPUTS_KEPT + 1)]
    for s in kept:
        make_plan(s)
    assert id(kept[0]) not in planner._INPUTS
    assert all(planner._INPUTS[id(s)][0] is s for s in kept[1:])
    assert len(planner._INPUTS) == INPUTS_KEPT


def test_given_profiles_are_never_answered_from_the_kept_choice():
    s = wss.load_scenario(SPARSE)
    dense = make_plan(s)
    specs = [op for op in plan_inputs(s, None).ops if isinstance(op, StreamedKernel)]
    given = {k.name: NnzProfile(k.out_features, k.in_features, k.out_features * k.in_features) for k in specs}
    with_given = make_plan(s, given)
    assert with_given.choice is not dense.choice


def test_sampled_profiles_are_drawn_once_read_only_and_as_the_seeded_generator_draws_them():
    s = wss.load_scenario(SPARSE)
    specs = [op for op in plan_inputs(s, None).ops if isinstance(op, StreamedKernel)]
    one, two = kernel_profiles(s, specs, None), kernel_profiles(s, specs, None)
    k = next(k for k in specs if k.density < 1.0)
    at = specs.index(k)
    assert one[at] is two[at]
    drawn = sampled_profile(k.out_features, k.in_features, k.density, mask_rng(s.seed, k))
    assert np.array_equal(one[at].col_counts, drawn.col_counts)
    assert np.array_equal(one[at].row_counts, drawn.row_counts)
    with pytest.raises(ValueError, match="read-only"):
        one[at].col_counts[0] = 0


@pytest.mark.parametrize("rows", [1, 7, 757])
def test_a_profiles_busiest_rows_are_dealt_once_and_agree_with_dealing_anew(rows):
    rng = np.random.default_rng(3)
    cols, out = rng.integers(0, 50, size=300), rng.integers(0, 40, size=200)
    p = NnzProfile(200, 300, int(cols.sum()), cols, out)
    assert p.busiest_input_row(rows) == int(row_loads(cols, rows).max())
    assert p.busiest_output_row(rows) == int(row_loads(out, rows).max())
    busiest = p.busiest_input_row(rows)
    cols[:] = 0  # the rows were dealt once: what was worked out answers, not a new deal
    assert p.busiest_input_row(rows) == busiest > 0
