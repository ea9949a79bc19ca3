"""Where an uneven batch's larger shards sit: spread over the SwarmX tree (``wss/model/scenario/shards.py``).

Where the global batch does not divide over the wafers, some wafers take one sample more.  They are spread over
the tree, one under each leaf node before any second one, the top-level subtrees in turn, so every subtree carries
as even a share as the count allows.  The step does not depend on it (the busiest wafer paces every broadcast and
reduction wherever it sits); the simulator then meets the lighter wafers only beside busier ones under the same
nodes, which leaves fewer kinds of wafer to simulate.  Each run here must still equal the run with every block
simulated, to 1e-9 in every number a Result reports.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from core_helpers import SCENARIOS, larger_shards_first, result_numbers

import wss
from wss.model.numerics.spec import NumericsSpec
from wss.model.numerics.train import train
from wss.model.scenario.shards import placed_split, spread_order
from wss.model.simulate import simulate_detailed

REL = 1e-9
#: The calibration and store the drift-fold tests use (test_drift_fold.py), so their figures compare.
PINNED = {"hardware.wafer.kernel_efficiency": 0.59, "hardware.runtime.step_overhead_s": 0.084,
          "hardware.activation_store.bandwidth_Bps": None}


def test_the_larger_shards_go_one_under_each_leaf_node_first_taking_the_top_level_subtrees_in_turn() -> None:
    assert spread_order(49, 4)[:17] == [0, 16, 32, 48, 4, 20, 36, 8, 24, 40, 12, 28, 44, 1, 17, 33, 5]
    assert spread_order(4, 4) == [0, 1, 2, 3] and spread_order(1, 4) == [0] and spread_order(0, 4) == []
    for wafers, fan_out in [(9, 4), (49, 4), (192, 4), (100, 3), (37, 2)]:
        order = spread_order(wafers, fan_out)
        assert sorted(order) == list(range(wafers)) and order[0] == 0
        leaves = -(-wafers // fan_out)
        first = order[:leaves]
        assert len({w // fan_out for w in first}) == leaves  # one under every leaf node before any second
        for extra in range(wafers):  # however many take a sample more, each top-level subtree has its share
            shards = placed_split(wafers * 5 + extra, wafers, fan_out)
            assert sum(shards) == wafers * 5 + extra and max(shards) - min(shards) <= 1 and shards[0] == max(shards)
    # a wafer cut off takes nothing; the others split the batch, the larger shares spread as before
    assert placed_split(50, 16, 4, cut_off=[0, 1, 2, 3, 12, 13, 14, 15]) == [0] * 4 + [7, 6, 6, 6] * 2 + [0] * 4


def test_the_numerics_split_the_batch_as_the_timing_places_it(monkeypatch) -> None:
    """Each numerics wafer trains on as many samples as the timing gives it (consecutive samples)."""
    import importlib

    train_module = importlib.import_module("wss.model.numerics.train")  # the package names its function train

    seen: list[int] = []
    real = train_module.wafer_step

    def counting(streamed, xs, ys, *rest):
        seen.append(len(ys))
        return real(streamed, xs, ys, *rest)

    monkeypatch.setattr(train_module, "wafer_step", counting)
    spec = NumericsSpec(layer_sizes=(8, 6, 3), global_batch=23, wafers=9, steps=1, fan_out=4)
    outcome = train(spec)
    assert seen == placed_split(23, 9, 4) == [3, 3, 2, 2, 3, 3, 2, 2, 3]  # wafers 0, 4, 8, 1 and 5 take 3
    assert np.isfinite(outcome.losses).all()


def test_the_step_is_the_same_wherever_the_larger_shards_sit_and_fewer_wafers_are_simulated() -> None:
    """GPT-3 175B on 9 wafers (six of 171 samples, three of 170): spread, the three lighter wafers hang beside
    busier ones under the leaf nodes, one kind, and the run simulates 2 wafers; on the first wafers, 3 (a lighter
    wafer beside the busiest, and one below each of the other two nodes)."""
    over = {"hardware.wafers": 9, "training.steps": 1}
    spread, sc = simulate_detailed(wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", overrides=over), record=False)
    with larger_shards_first():
        first, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", overrides=over), record=False)
    assert [w.samples for w in spread.wafers] == [171, 171, 171, 170, 171, 171, 170, 170, 171]
    assert [w.samples for w in first.wafers] == [171] * 6 + [170] * 3
    simulated = [sum(1 for w, s in enumerate(c.stand_in) if s == w) for c in (sc, fc)]
    assert simulated == [2, 3] and sc.events < 0.8 * fc.events
    assert spread.step_time_s == pytest.approx(first.step_time_s, rel=1e-12)
    assert spread.breakdown_s == pytest.approx(first.breakdown_s, rel=1e-12, abs=1e-15)
    busiest, lighter = spread.wafers[0], spread.wafers[3]
    assert first.wafers[0].breakdown_s == pytest.approx(busiest.breakdown_s, rel=1e-12, abs=1e-15)
    assert first.wafers[8].compute_s == pytest.approx(lighter.compute_s, rel=1e-12)


def _numbers(result: wss.Result) -> dict[str, float]:
    simulated = (".sim_events", ".cluster.", ".records[")
    return {k: v for k, v in result_numbers(json.loads(result.to_json())).items() if not k.startswith(simulated)}


@pytest.mark.parametrize(("batch", "worlds"), [(720, 1), (718, 2)])
def test_spread_shards_drift_fold_to_every_block_simulated(batch: int, worlds: int) -> None:
    """Cerebras-GPT 13B on 13 wafers (fan-out 4: leaf nodes of 4, 4, 4 and 1 wafers).  Batch 720: five wafers of
    56, one under each leaf node and a second under the first, so the lighter ones hang beside them alone: one
    drifting world.  Batch 718: three of 56 (wafers 0, 4 and 8), so wafer 12's node has none and drifts as a
    world of its own beside the siblings' world.  Both directions fold, equal to every block simulated."""
    over = {**PINNED, "hardware.wafers": 13, "training.global_batch": batch, "training.steps": 1}
    path = SCENARIOS / "cerebras_gpt_13b.yaml"
    folded, fc = simulate_detailed(wss.load_scenario(path, overrides=over), record=False)
    full, uc = simulate_detailed(wss.load_scenario(path, overrides={**over, "simulation.fold_micro_batches": False}),
                                 record=False, fold_layers=False)
    drift = fc.folding.drift
    assert drift is not None and len(drift.worlds) == worlds and not fc.plan.blocks_unfolded_in
    assert {d.point.direction for d in drift.delays} == {"forward", "backward"}
    assert fc.events < uc.events / 4
    got, want = _numbers(folded), _numbers(full)
    assert got.keys() == want.keys() and len(want) > 100
    assert {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > REL * max(abs(v), 1e-12)} == {}


def _simulated(shards: list[int], fan_out: int) -> int:
    """Wafers an unfolded run of these shards simulates, by the tree's classes, the lighter wafers standing beside
    the busiest (one micro-batch: every lighter wafer has less work in it)."""
    from wss.model.scenario.fold_rules import stand_ins
    from wss.model.scenario.hardware import SwarmXConfig

    wafers, busiest = len(shards), max(shards)
    nodes = SwarmXConfig.model_construct(fan_out=fan_out).nodes_per_level(wafers)  # the tree's one definition
    lighter = [w for w, n in enumerate(shards) if n < busiest]
    leaves = stand_ins(nodes, wafers, fan_out, shards, drifting=lighter)[-1]
    return sum(1 for w, s in enumerate(leaves) if s == w)


def test_spread_shards_never_leave_more_kinds_of_wafer_than_the_first_wafers_did() -> None:
    """Over every wafer count to 70 (fan-out 4, the presets') and to 40 (fan-out 2), and every number of larger
    shards: spread, the run
    simulates at most as many wafers as with the larger shards on the first wafers, and 2 wherever there are at
    least as many larger shards as leaf nodes (the lighter wafers beside busier ones under the leaf nodes alone)."""
    fewer = 0
    for fan_out, most in ((4, 70), (2, 40)):
        for wafers in range(fan_out + 1, most + 1):
            leaf_nodes = -(-wafers // fan_out)
            for extra in range(1, wafers):
                spread = _simulated(placed_split(wafers + extra, wafers, fan_out), fan_out)
                first = _simulated([2] * extra + [1] * (wafers - extra), fan_out)
                assert spread <= first, (fan_out, wafers, extra)
                if extra >= leaf_nodes:
                    assert spread == 2, (fan_out, wafers, extra)
                fewer += spread < first
    assert fewer > 2000
