"""Drift folds: the blocks of an uneven slot fold where the smaller shards run ahead of the largest (issue #23).

In a slot where the wafers' micro-batches differ, a wafer with fewer samples starts every block a little earlier
than the last, relative to the busiest.  :mod:`wss.model.folding.drift` folds such blocks anyway: each world's
copies are its own block, the drifting wafers' inputs past a fold point come through a delay line of the lead
they would gain over the copies, and the pacing world pauses for as long once every top of the drifting subtrees
has had such an input.  The answers must equal those of the run that simulates every block, to 1e-9, in every
number a Result reports; where the checks find the lead would not carry (it runs out over the copies), the run
falls back to simulating every block of the slot, with the same answers.
"""

from __future__ import annotations

import json
from functools import cache

import pytest
from core_helpers import SCENARIOS, result_numbers

import wss
from wss.model.folding.drift import DriftWorld
from wss.model.simulate import simulate_detailed

REL = 1e-9
#: The calibration these runs were looked at with (the shipped one moves with every refit).
PINNED = {"hardware.wafer.kernel_efficiency": 0.59, "hardware.runtime.step_overhead_s": 0.084}


@cache
def _runs(wafers: int) -> tuple:
    """Cerebras-GPT 13B (40 identical blocks, one micro-batch, block inputs offloaded) on ``wafers`` wafers, folded
    as far as its checks allow, and with every block simulated."""
    over = {**PINNED, "hardware.wafers": wafers, "training.steps": 1}
    folded, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over),
                                   record=False)
    full, uc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides={
        **over, "simulation.fold_micro_batches": False}), record=False, fold_layers=False)
    return folded, fc, full, uc


def _same_numbers(folded: wss.Result, full: wss.Result) -> dict[str, tuple[float, float]]:
    """The numbers two Results report differently (past 1e-9 of the full run's), leaving out what says how much
    was simulated (events, the blocks and micro-batches simulated, the per-pass records standing for copies)."""
    simulated = (".sim_events", ".cluster.", ".records[")
    got, want = ({k: v for k, v in result_numbers(json.loads(r.to_json())).items() if not k.startswith(simulated)}
                 for r in (folded, full))
    assert got.keys() == want.keys() and len(want) > 100
    return {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > REL * max(abs(v), 1e-12)}


@pytest.mark.parametrize("wafers", [13, 25])
def test_the_smaller_shards_drift_folds_and_reports_every_figure_of_every_block_simulated(wafers: int) -> None:
    """13 wafers: 5 of 56 samples, 8 of 55, in three drifting worlds (wafers 8 to 11 under a node of their own,
    wafer 12 under another, wafers 5 to 7 beside wafer 4 of 56); 25 wafers: 20 of 29, 5 of 28, in two.  The smaller
    shards gain 0.017 ms a forward block and 0.051 ms a backward one: both directions fold, with 32 copies each."""
    folded, fc, full, uc = _runs(wafers)
    drift = fc.folding.drift
    assert isinstance(drift, DriftWorld)
    assert fc.plan.uneven_slots == {0} and not fc.plan.blocks_unfolded_in
    worlds = {13: 3, 25: 2}[wafers]
    assert list(drift.worlds) == list(range(1, worlds + 1))
    assert sorted((d.world, d.point.direction, d.point.copies) for d in drift.delays) == sorted(
        (k, direction, 32) for k in drift.worlds for direction in ("forward", "backward"))
    for d in drift.delays:
        lead = 0.0171307e-3 if d.point.direction == "forward" else 0.0513920e-3
        assert d.seconds == pytest.approx(32 * lead, rel=1e-3)
    assert fc.events < uc.events / 4
    assert _same_numbers(folded, full) == {}


def test_a_lead_that_runs_out_over_the_copies_falls_back_to_every_block() -> None:
    """17 wafers (6 of 43 samples, 11 of 42): a smaller shard gains 1.9 ms a forward block, and its buffers run dry
    within the copies.  Its first block behind the delay line waits where its compared blocks did not: the drift
    fold is refused, and the slot simulates every block, as before."""
    folded, fc, full, uc = _runs(17)
    assert fc.plan.blocks_unfolded_in == {0}
    assert fc.events == uc.events
    assert _same_numbers(folded, full) == {}


def test_a_cluster_of_even_shards_has_no_drifting_world() -> None:
    """Nothing changes where no slot is uneven: no drifting world, no link counts by pass."""
    _, c = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",
                                               overrides={**PINNED, "hardware.wafers": 16}), record=False)
    assert c.folding.drift is None
    assert all(link.tally is None for link in (*c.swarmx.down, *c.swarmx.up))


def test_a_straggler_keeps_the_uneven_slot_simulated_in_full() -> None:
    """A fault that sets a wafer apart besides the uneven shards leaves the slot to every block simulated."""
    over = {**PINNED, "hardware.wafers": 13, "faults.stragglers": [{"wafer": 0, "slowdown": 1.05}]}
    _, c = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over), record=False)
    assert c.folding.drift is None


def test_the_pacing_world_check_leaves_the_drifting_worlds_parts_out() -> None:
    _, fc, _, _ = _runs(13)
    drift = fc.folding.drift
    assert drift.ignores("wafer.5.compute") and drift.ignores("wafer.5.intake")
    assert drift.ignores("swarmx.down.l1.2") and drift.ignores("swarmx.down.l1.2.bytes")
    assert drift.ignores("swarmx.up.l2") and drift.ignores("wafer.offload.in.bytes")  # level views
    assert not drift.ignores("wafer.0.compute") and not drift.ignores("wafer.compute")
    assert not drift.ignores("swarmx.down.l1.0") and not drift.ignores("swarmx.partial_sums")
    assert not drift.ignores("wafer.50.compute")
    # The lag of a pass: its world's delays at the fold points it comes after.
    forward, backward = (next(d for d in drift.delays if d.world == 1 and d.point.direction == way)
                         for way in ("forward", "backward"))
    assert drift.lag(forward.point.c - 1, 1) == 0.0
    assert drift.lag(forward.point.c, 1) == forward.seconds
    assert drift.lag(backward.point.c, 1) == forward.seconds + backward.seconds
    # The pacing world's clock lags by its pauses; the drifting worlds, each as far ahead as the furthest, ran on.
    assert drift.lags[0] == pytest.approx(forward.seconds + backward.seconds, rel=1e-12)
    assert all(lag == 0.0 for lag in drift.lags[1:])


def test_a_lead_that_runs_out_early_folds_past_it_with_a_longer_stretch() -> None:
    """64 wafers (16 of 12 samples, 48 of 11): a smaller shard's lead runs out within a few forward blocks.  The drift
    fold is refused (its first block behind the delay waits), but past a longer stretch at the start the smaller
    shards are back in step with the largest: an ordinary fold holds there, in both directions, with every number of
    the Result equal to every block simulated."""
    folded, fc, full, uc = _runs(64)
    assert fc.plan.uneven_slots == {0} and not fc.plan.blocks_unfolded_in
    assert max(r.head for r in fc.plan.layer_runs) > 4  # the longer stretch at the start
    assert fc.folding.drift is not None and fc.folding.drift.delays == []
    assert {f.point.direction for f in fc.folding.layers.folds} == {"forward", "backward"}
    assert fc.events < uc.events / 2
    assert _same_numbers(folded, full) == {}
