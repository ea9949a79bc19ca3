"""Every wafer its own process: the unfolded run against the folded one, and what ``fold_wafers: auto`` decides.

On a uniform cluster the folded chain is exact, so the unfolded run must give the same step time
and breakdown (to 1e-9 relative) on every shipped scenario: that checks the unfolded tree and the
fold at once (with ``simulation.wafer_classes: false``: every wafer and edge truly its own process;
the default classes of identical wafers must give the same Result).  The 192-wafer scenarios take
minutes with every wafer apart (about 27 million events for GPT-3 175B), so the default suite runs
them on 5 wafers with the same 8 samples per wafer (a tree of two levels whose root has a full and a
one-wafer child); WSS_SLOW=1 runs them at full size.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from core_helpers import SCENARIOS, dense_model, scenario_dict

from wss import load_scenario, simulate
from wss.cli import main
from wss.model.result.results import BREAKDOWN_CATEGORIES, Result
from wss.model.scenario.shards import placed_split
from wss.model.sim.unfolded import UnfoldedCluster
from wss.model.simulate import simulate_detailed

SLOW = bool(os.environ.get("WSS_SLOW"))
REL = 1e-9
SHIPPED = sorted(SCENARIOS.glob("*.yaml"))
BIG = [p for p in SHIPPED if load_scenario(p).hardware.wafers > 16]
SMALL = [p for p in SHIPPED if p not in BIG]
#: The 192-wafer scenarios in the default suite: 8 samples on each of 5 wafers, as at full size.
REDUCED = ["hardware.wafers=5", "training.global_batch=40"]


def _both(source, overrides: list[str] = ()) -> tuple[Result, Result]:
    """Folded, and unfolded with truly one process per wafer and per edge (``wafer_classes: false``: with
    classes a uniform tree would collapse to the folded chain, and check nothing).  The unfolded run with
    classes must give that same Result, byte for byte but for its event count."""
    folded = simulate(load_scenario(source, [*overrides, "simulation.fold_wafers=true"]))
    unfolded = simulate(load_scenario(source, [*overrides, "simulation.fold_wafers=false",
                                               "simulation.wafer_classes=false"]))
    classes = simulate(load_scenario(source, [*overrides, "simulation.fold_wafers=false"]))
    assert _without_events(classes) == _without_events(unfolded)
    assert classes.sim_events <= unfolded.sim_events
    return folded, unfolded


def _without_events(result: Result) -> dict:
    data = json.loads(result.to_json())
    data.pop("sim_events")
    data["scenario"]["simulation"].pop("wafer_classes", None)
    return data


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= REL * abs(scale)


def _assert_same_answer(folded: Result, unfolded: Result) -> None:
    assert folded.wafer_folding.folded and not unfolded.wafer_folding.folded
    t = folded.step_time_s
    assert _close(unfolded.step_time_s, t, t)
    for c in BREAKDOWN_CATEGORIES:
        assert _close(unfolded.breakdown_s[c], folded.breakdown_s[c], t), c
    for a, b in zip(folded.steps, unfolded.steps):
        assert _close(a.time_s, b.time_s, t)
    for c in folded.pacing_s:
        assert _close(unfolded.pacing_s[c], folded.pacing_s[c], t), c
    assert unfolded.bound_by == folded.bound_by
    for name, lb in folded.link_bytes.items():
        assert _close(unfolded.link_bytes[name].total_bytes, lb.total_bytes, lb.total_bytes), name
    # Every wafer of a uniform cluster did exactly what the folded one did.
    assert unfolded.wafers is not None and len(unfolded.wafers) == folded.scenario.hardware.wafers
    for w in unfolded.wafers:
        for c in BREAKDOWN_CATEGORIES:
            assert _close(w.breakdown_s[c], folded.breakdown_s[c], t), (w.wafer, c)


#: Cheaper runs that check the same (WSS_SLOW=1 runs the shipped ones).  A numerics run simulates every step (no
#: step fold), so the walk-through's 200 steps cost 10x what 20 do and check the same: every simulated step of the
#: unfolded run against the folded one's, numerics on.  Llama-3 70B's 16 wafers (a full tree of two levels, each
#: wafer its own process) cost twice what 5 at the same 64 samples per wafer do: two levels too, the root's
#: children a full one and a one-wafer one, as the 192-wafer scenarios have below, and the same step.
SMALLER = {"fc_mnist_numerics": ["training.steps=20"],
           "llama3_70b_16xcs3": ["hardware.wafers=5", "training.global_batch=320"]}


@pytest.mark.parametrize("path", SMALL, ids=lambda p: p.stem)
def test_uniform_scenario_unfolded_gives_the_folded_answer(path: Path):
    _assert_same_answer(*_both(path, [] if SLOW else SMALLER.get(path.stem, [])))


@pytest.mark.parametrize("path", BIG, ids=lambda p: p.stem)
def test_192_wafer_scenario_unfolded_gives_the_folded_answer_on_5_wafers(path: Path):
    _assert_same_answer(*_both(path, REDUCED))


#: The 192-wafer scenarios the work bound admits with every wafer apart (brain_120t and gpt_1t would take
#: 30 and 15 million chunk passes, over its 12 million: docs/limits.md).
FULL_SIZE = [p for p in BIG if p.stem == "gpt3_175b"]


@pytest.mark.skipif(not SLOW, reason="unfolded, a 192-wafer scenario takes minutes: set WSS_SLOW=1")
@pytest.mark.parametrize("path", FULL_SIZE, ids=lambda p: p.stem)
def test_192_wafer_scenario_unfolded_gives_the_folded_answer_at_full_size(path: Path):
    _assert_same_answer(*_both(path))


def test_micro_batch_folding_works_unfolded_and_checks_every_wafer():
    """Sparse GPT-3 6.7B on 4 wafers runs 22 micro-batches a step: 6 simulated, the rest folded, every wafer's
    counters checked for the period; the same answer, per wafer too, as simulating every micro-batch."""
    s = load_scenario(SCENARIOS / "gpt3_6.7b_sparse.yaml",
                      ["hardware.wafers=4", "training.global_batch=256", "simulation.fold_wafers=false",
                       "training.micro_batch=3", "training.activation_checkpointing=none",
                       # the calibration and micro-batches this fold was found at (the planner now picks 2 of 32)
                       "hardware.wafer.kernel_efficiency=0.59", "hardware.runtime.step_overhead_s=0.084"])
    result, cluster = simulate_detailed(s, record=False)
    assert isinstance(cluster, UnfoldedCluster) and cluster.folding.fold is not None and cluster.folding.fold.copies > 0
    everything = simulate(load_scenario(s, ["simulation.fold_micro_batches=false"]))
    assert everything.cluster["micro_batches_simulated"] > result.cluster["micro_batches_simulated"]
    t = everything.step_time_s
    assert _close(result.step_time_s, t, t)
    assert result.wafers is not None and everything.wafers is not None
    for a, b in zip(result.wafers, everything.wafers):
        for c in BREAKDOWN_CATEGORIES:
            assert _close(a.breakdown_s[c], b.breakdown_s[c], t), (a.wafer, c)
        assert _close(a.compute_s, b.compute_s, t)


def _tiny(**training) -> dict:
    """4 wafers, a model whose compute grows with the micro-batch, two steps."""
    return scenario_dict(dense_model(2048, 2048, 2048), wafers=4, training={"steps": 2, **training})


def test_auto_unfolds_uneven_shards_and_the_busiest_wafer_paces():
    """253 samples on 4 wafers: 64, 63, 63, 63.  The lock-step tree waits for the busiest wafer, so the
    folded chain (the busiest wafer standing for all) gives the same step; the others idle."""
    raw = _tiny(global_batch=253, micro_batch=8)
    auto = simulate(raw)
    folded = simulate(load_scenario(raw, ["simulation.fold_wafers=true"]))
    assert not auto.wafer_folding.folded and "uneven" in auto.wafer_folding.reason
    assert folded.wafer_folding.folded and "busiest" in folded.wafer_folding.reason
    assert _close(auto.step_time_s, folded.step_time_s, folded.step_time_s)
    assert auto.wafers is not None
    assert [w.samples for w in auto.wafers] == placed_split(253, 4, 4) == [64, 63, 63, 63]
    assert auto.wafers[1].micro_batches == [8] * 7 + [7]
    busiest, other = auto.wafers[0], auto.wafers[1]
    assert other.compute_s < busiest.compute_s and other.idle_s > busiest.idle_s
    for w in auto.wafers:  # each wafer's time adds up to the step
        assert _close(sum(w.breakdown_s.values()), auto.step_time_s, auto.step_time_s)
        assert _close(w.compute_s, w.breakdown_s["compute"], auto.step_time_s)
        assert _close(w.idle_s, auto.step_time_s - w.compute_s, auto.step_time_s)


def test_a_wafer_with_an_empty_micro_batch_waits_it_out():
    """10 samples on 4 wafers in micro-batches of 1: the wafers with 2 samples have a third, empty one."""
    raw = scenario_dict(dense_model(256, 256), wafers=4, global_batch=10, training={"micro_batch": 1})
    r = simulate(raw)
    assert r.wafers is not None and r.wafers[3].micro_batches == [1, 1, 0]
    assert r.wafers[3].compute_s == pytest.approx(2 / 3 * r.wafers[0].compute_s, rel=1e-9)


def test_result_json_leaves_the_folding_out_only_for_a_uniform_folded_run(tmp_path: Path):
    uniform = simulate(scenario_dict(dense_model(256, 256), wafers=2, global_batch=8))
    data = json.loads(uniform.to_json())
    assert "wafer_folding" not in data and "wafers" not in data
    assert "fold_wafers" not in data["scenario"]["simulation"]
    assert Result.model_validate_json(uniform.to_json()).wafer_folding == uniform.wafer_folding
    apart = simulate(scenario_dict(dense_model(256, 256), wafers=2, global_batch=8,
                                   simulation={"fold_wafers": False}))
    data = json.loads(apart.to_json())
    assert data["wafer_folding"] == {"folded": False, "reason": "simulation.fold_wafers is false"}
    assert data["scenario"]["simulation"]["fold_wafers"] is False and len(data["wafers"]) == 2
    back = Result.load(apart.save(tmp_path / "r.json"))
    assert back.to_json() == apart.to_json()


def test_summary_and_trace_of_an_unfolded_run(tmp_path: Path, capsys):
    path = tmp_path / "uneven.yaml"
    path.write_text(json.dumps(scenario_dict(dense_model(256, 256), wafers=3, global_batch=7)))
    assert main(["simulate", str(path), "-o", str(tmp_path / "out"), "--trace"]) == 0
    out = capsys.readouterr().out
    assert "each ran apart (auto: the shards are uneven, 7 samples over 3 wafers: 1 wafer of 3, 2 of 2)" in out
    assert "idle per step" in out
    assert (tmp_path / "out" / "trace.json").is_file()


def test_a_bad_fold_wafers_value_is_a_clear_error(tmp_path: Path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(scenario_dict(dense_model(256, 256))))
    assert main(["validate", str(path), "--set", "simulation.fold_wafers=sometimes"]) == 2
    err = capsys.readouterr().err
    assert "simulation.fold_wafers" in err and "Traceback" not in err


@pytest.mark.parametrize("raw, rule", [
    (scenario_dict(dense_model(256, 256), wafers=4, global_batch=8), "auto: the cluster is uniform"),
    (scenario_dict(dense_model(256, 256), wafers=3, global_batch=7), "auto: the shards are uneven"),
    (scenario_dict(dense_model(256, 256), wafers=3, global_batch=7, simulation={"fold_wafers": True}),
     "simulation.fold_wafers is true; the shards are uneven"),
    (scenario_dict(dense_model(256, 256), wafers=4, global_batch=8, simulation={"fold_wafers": True}),
     "simulation.fold_wafers is true"),
    (scenario_dict(dense_model(256, 256), wafers=4, global_batch=8, simulation={"fold_wafers": False}),
     "simulation.fold_wafers is false"),
    ({**scenario_dict(dense_model(256, 256), wafers=4, global_batch=8),
      "faults": {"stragglers": [{"wafer": 1, "slowdown": 1.5}]}}, "auto: faults"),
])
def test_the_quick_rule_is_the_recorded_one(raw, rule):
    """``folds_wafers`` (the scenario's work checks ask it without building the Result's record) decides as the
    record ``wafer_folding`` says, for every rule."""
    from wss.model.result.measure import wafer_folding
    from wss.model.scenario.fold_rules import folds_wafers

    s = load_scenario(raw)
    record = wafer_folding(s)
    assert record.reason.startswith(rule)
    assert folds_wafers(s) is record.folded


def _straggler_run(wafers: int) -> tuple[Result, UnfoldedCluster]:
    """``wafers`` wafers, one a straggler: as many simulated wafers (classes of identical ones) whatever ``wafers``."""
    raw = scenario_dict(dense_model(256, 256), wafers=wafers, global_batch=wafers,
                        faults={"stragglers": [{"wafer": 3, "slowdown": 1.5}]})
    result, cluster = simulate_detailed(raw, record=False)
    assert isinstance(cluster, UnfoldedCluster)
    return result, cluster


def test_counting_the_parts_costs_the_simulated_parts_not_the_wafers(monkeypatch):
    """Folding counts the cluster at every snapshot and measure reads many totals: the counters name the
    simulated parts only (a wafer stood for by another has none of its own), and measure counts the parts a
    few times, not once per wafer; every wafer's busy fraction still comes from its stand-in's."""
    small, big = _straggler_run(32)[1], _straggler_run(64)[1]
    assert len(small.simulated) == len(big.simulated) < 32
    assert len(small.counters()) == len(big.counters())
    calls = []
    own = UnfoldedCluster.counters

    def counting(self: UnfoldedCluster) -> dict[str, float]:
        calls.append(1)
        return own(self)

    monkeypatch.setattr(UnfoldedCluster, "counters", counting)
    result, cluster = _straggler_run(64)
    assert len(calls) < 64
    assert cluster.totals() == {name: cluster.total(name) for name in cluster.counters()}
    busy = result.energy.busy_fraction["wafer"] if result.energy is not None else None
    fast, slow = (cluster.total(f"wafer.{w}.compute") / result.total_time_s for w in (0, 3))
    assert slow > fast and busy == pytest.approx((63 * fast + slow) / 64, rel=1e-12)
