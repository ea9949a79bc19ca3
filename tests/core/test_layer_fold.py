"""Layer folding (wss/model/folding/layer_fold.py): runs of identical blocks simulated in part, the rest repeated.

The answer must not change: on every shipped scenario the step time, every breakdown category and every
utilisation agree with the run that simulates every block to 1e-9 relative (measured: at most 1.3e-12), and
where no block folds the result.json is byte-identical.  The fold must also refuse itself where the blocks do
not repeat (the check falls back, and the answer is then the unfolded one, byte for byte).
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest

import wss
from wss.model.folding.fold import FoldMismatch
from wss.model.folding.layer_fold import LayerFoldMismatch, LayersFold, fold_points
from wss.model.plan import make_plan
from wss.model.plan.layer_runs import BlockRun, block_runs
from wss.model.program import build_program
from wss.model.simulate import simulate_detailed

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
REL = 1e-9
#: The calibration and activation store the fold patterns pinned below were found with (a refit moves the wafer's
#: pace against the stream's and the store's, and with it where blocks start to repeat).
PINNED = {"hardware.wafer.kernel_efficiency": 0.35, "hardware.runtime.step_overhead_s": 0.047,
          "hardware.activation_store.preset": "host-unlimited"}


def _scenario(name: str, overrides: dict[str, object]) -> wss.Scenario:
    return wss.load_scenario(ROOT / "scenarios" / f"{name}.yaml", overrides=overrides)


@cache
def _folded(name: str, **overrides: object) -> tuple:
    """The run as simulated (blocks folded where they fold), once per worker: tests that only look at how it folded
    need not simulate every block too."""
    return simulate_detailed(_scenario(name, dict(overrides)), record=False)


@cache
def _pair(name: str, **overrides: object) -> tuple:
    folded, fc = _folded(name, **overrides)
    full, uc = simulate_detailed(_scenario(name, dict(overrides)), record=False, fold_layers=False)
    return folded, fc, full, uc


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-300)


#: Cheaper runs that check the same; WSS_SLOW=1 runs the shipped ones.  A numerics run simulates every step, and
#: FC-MNIST has no blocks to fold: 20 of the walk-through's 200 steps check the same (nothing folded, the same bytes)
#: at a tenth of the cost.  Llama-3 70B's 80 blocks and Mixtral's 32 fold as 16 and 12 do (four simulated at each
#: end, the rest copies), and the run that simulates every one of 16 or 12 costs a quarter and a third as much.
SMALLER = {} if os.environ.get("WSS_SLOW") else {
    "fc_mnist_numerics": {"training.steps": 20},
    "llama3_70b_16xcs3": {"workload.model.layers.1.repeat": 16},
    "mixtral_8x7b_4xcs3": {"workload.model.layers.1.repeat": 12},
}


#: What a folded Result says differently by design: its events, its records (a folded block's stands for its
#: copies), which blocks it folded, and its cluster facts on blocks (how many, how many simulated each way).
_FOLD_FACTS = {"sim_events", "records", "layer_folds", "cluster.blocks", "cluster.blocks_simulated_forward",
               "cluster.blocks_simulated_backward"}


def _numbers(result: wss.Result) -> dict[str, object]:
    """Every leaf of the Result's JSON by path (``steps[0].breakdown_s.stream``), but the folding facts."""
    out: dict[str, object] = {}

    def walk(x: object, path: str) -> None:
        if path in _FOLD_FACTS:
            return
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{path}[{i}]")
        else:
            out[path] = x

    walk(json.loads(result.to_json()), "")
    return out


def _numbers_that_differ(folded: wss.Result, full: wss.Result) -> list[str]:
    """The paths where the folded Result says otherwise than every block simulated: a float off by more than
    1e-9 of itself (no floor: measured at most 1.6e-11 on the shipped scenarios), anything else unequal, or a
    leaf only one of them has."""
    a, b = _numbers(folded), _numbers(full)
    out = sorted(a.keys() ^ b.keys())
    for path in a.keys() & b.keys():
        x, y = a[path], b[path]
        if isinstance(x, float) or isinstance(y, float):
            if not (isinstance(x, (int, float)) and isinstance(y, (int, float))) or _rel(x, y) > REL:
                out.append(f"{path}: {x!r} vs {y!r}")
        elif x != y:
            out.append(f"{path}: {x!r} vs {y!r}")
    return out


@pytest.mark.parametrize("name", SHIPPED)
def test_folded_layers_give_the_answer_of_every_block_simulated(name):
    folded, fc, full, uc = _pair(name, **SMALLER.get(name, {}))
    assert uc.folding.layers is None
    assert _rel(folded.step_time_s, full.step_time_s) <= REL
    scale = full.step_time_s
    for c, v in full.breakdown_s.items():
        assert abs(folded.breakdown_s[c] - v) <= REL * scale, c
    for c, v in full.pacing_s.items():
        assert abs(folded.pacing_s[c] - v) <= REL * scale, c
    for part, v in full.utilisation.items():
        assert abs(folded.utilisation[part] - v) <= REL * max(v, 1e-3), part
    for link, v in full.link_bytes.items():
        assert _rel(folded.link_bytes[link].total_bytes, v.total_bytes) <= REL, link
    assert [s.time_s for s in folded.steps] == pytest.approx([s.time_s for s in full.steps], rel=REL)
    if fc.folding.layers is None:  # nothing folded (no run of identical blocks, or the check refused it): same bytes
        assert folded.to_json() == full.to_json()
    else:
        assert fc.events < uc.events
        assert len(folded.records) < len(full.records)
        # every other figure too: per-wafer ones, the optimizer's phases, memory, energy, each step's
        assert _numbers_that_differ(folded, full) == []


def test_the_benchmark_scenarios_fold_their_blocks():
    """GPT-3 175B folds its 96 blocks both ways, four simulated at each end: at the kernel efficiency refitted
    on the model with lanes (0.35) its forward blocks compute slowly enough that the SwarmX inboxes settle by the
    first compared block of four at each end (before the refit they settled at the fourth and the ladder, trying a
    longer stretch, simulated six, as it still does with a straggler, below).  The optimizer-bound 120T model folds
    both ways with its gradients clipped (the backward passes leave only cheap norm jobs behind, and its updates,
    stand-ins for the folded blocks' among them, run after the last gradient), but without clipping only its
    forward passes (its update backlog grows from block to block in the backward passes, which the check refuses,
    and no longer stretch is tried: it drifts, it does not settle late)."""
    _, gpt = _folded("gpt3_175b")
    assert gpt.plan.layer_runs == (BlockRun(0, 95, settle=4),)
    assert gpt.plan.layer_directions == ("forward", "backward")
    _, brain = _folded("brain_120t")
    assert brain.folding.layers is not None and brain.plan.layer_directions == ("forward", "backward")
    _, unclipped = _folded("brain_120t", **{"training.gradient_clipping": "none"})
    assert unclipped.folding.layers is not None and unclipped.plan.layer_directions == ("forward",)
    assert {r.settle for r in unclipped.plan.layer_runs} == {4}


def _gradient_intervals(cluster, nnz: int) -> list[float]:
    """Seconds between the arrivals at the optimizer of the gradients of successive kernels of ``nnz`` weights
    (one a block), away from the run's ends."""
    arrived = sorted(j.arrived for j in cluster.optimizer.jobs
                     if j.nnz == nnz and j.kind != "accumulate" and j.released_by is None)
    return [b - a for a, b in zip(arrived[4:-5], arrived[5:-4])]


def test_unclipped_120t_folds_its_forward_passes_only_because_its_optimizer_contends_with_them():
    """Without clipping, the 120T model's updates run during its backward passes, each longer than its kernel's
    share of a block (a block's four updates take 27.8 s, the block 12.56 s), so the optimizer's backlog grows by
    four jobs a block; the backward check refuses that, the ladder folds the forward passes only, and the answer
    is every block simulated's, number for number.

    A fold "up to a shift" (compare the backlog up to the jobs each block adds, then lay the copies' updates
    back to back) would not be exact here, whatever its check: the updates share MemoryX's flash channel with the
    weight prefetch and its DRAM with the gradient intake, so where an update falls against a block changes what
    both take, and that place moves by 15.2 s a block.  In the run with every block simulated, updates of kernels
    of one size take different times (9.277-9.374 s for the largest), and one block's gradients reach the
    optimizer 12.5604-12.5652 s after the block before's, where with clipping (the updates after the last
    gradient) every interval is the same.  The wafers' backward blocks stay equally long (the delays do not
    reach them here), but the step's end is the last update's, and so a sum of those phase-dependent times."""
    folded, fc, full, uc = _pair("brain_120t", **{"training.gradient_clipping": "none", **PINNED})
    assert fc.plan.layer_directions == ("forward",) and fc.folding.layers is not None
    assert fc.events < uc.events
    assert _numbers_that_differ(folded, full) == []
    last_gradient = max(j.arrived for j in uc.optimizer.jobs)
    by_size: dict[int, list[float]] = {}
    for j in uc.optimizer.jobs:
        if j.kind == "update" and j.end < last_gradient:
            by_size.setdefault(j.nnz, []).append(j.end - j.start)
    assert len(by_size) > 1 and all(_rel(min(d), max(d)) > 1e-4 for d in by_size.values())
    smallest = min(by_size)
    unclipped = _gradient_intervals(uc, smallest)
    clipped = _gradient_intervals(_pair("brain_120t", **PINNED)[3], smallest)
    assert len(unclipped) == len(clipped) > 200
    assert _rel(min(clipped), max(clipped)) <= REL
    assert _rel(min(unclipped), max(unclipped)) > 1e-4


def test_clipped_updates_of_folded_blocks_are_stood_in_for():
    """With clipping, the updates run after the step's last gradient; the folded run's stand-ins for the blocks
    it leaves out make its optimizer as busy as the run that simulates every block."""
    folded, fc, full, _ = _pair("brain_120t")
    assert fc.plan.dropped_blocks and fc.plan.scenario.training.gradient_clipping == "global_norm"
    assert folded.utilisation["memoryx.optimizer"] == pytest.approx(full.utilisation["memoryx.optimizer"], rel=REL)
    assert folded.step_time_s == pytest.approx(full.step_time_s, rel=REL)


def test_block_runs_need_identical_adjacent_blocks():
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml")
    assert block_runs(make_plan(s)) == (BlockRun(0, 95),)
    assert make_plan(s).layer_runs == () and make_plan(s, fold_layers=True).layer_runs == (BlockRun(0, 95),)
    # the 120T model's state fills DRAM first-fit in forward order: its first blocks' state parts sit in other
    # tiers than the rest's, so they differ and the run of identical blocks starts after them
    brain = make_plan(wss.load_scenario(ROOT / "scenarios" / "brain_120t.yaml"))
    (run,) = block_runs(brain)
    assert run.hi == 259 and run.lo > 0
    # too few blocks to remove two: no run
    small = wss.load_scenario(ROOT / "scenarios" / "fc_mnist.yaml")
    assert block_runs(make_plan(small)) == ()


def test_the_program_leaves_out_the_middle_of_each_run():
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml")
    plan = make_plan(s, fold_layers=True)
    program = build_program(plan)
    blocks = {plan.ops[p.op].block for p in program if plan.ops[p.op].block is not None}
    assert blocks == {0, 1, 2, 3, 92, 93, 94, 95}
    points = fold_points(program, plan.ops, plan.layer_runs)
    assert [(f.direction, f.copies) for f in points] == [("forward", 88), ("backward", 88)]
    fw, bw = points
    block_of = {p.index: plan.ops[p.op].block for p in program}
    assert (block_of[fw.a], block_of[fw.b], block_of[fw.c]) == (2, 3, 92)
    assert (block_of[bw.a], block_of[bw.b], block_of[bw.c]) == (93, 92, 3)


def test_a_folded_record_stands_for_the_blocks_left_out():
    folded, _, full, _ = _pair("gpt3_175b")
    assert folded.cluster["blocks"] == 96
    assert folded.cluster["blocks_simulated_forward"] == folded.cluster["blocks_simulated_backward"] == 8
    for phase in ("forward", "recompute", "backward"):
        got = sum(r.repeats * (r.end_s - r.start_s) for r in folded.records if r.phase == phase)
        want = sum(r.end_s - r.start_s for r in full.records if r.phase == phase)
        assert _rel(got, want) <= REL, phase
    updates = [r for r in folded.records if r.phase == "update"]
    assert sum(r.repeats for r in updates) == sum(1 for r in full.records if r.phase == "update")


def test_layers_fold_shift_and_repeats_are_exact():
    from wss.model.folding.layer_fold import FoldPoint, LayerFold

    fp = FoldPoint(0, 0, "forward", a=10, b=20, c=30, copies=5)
    fold = LayersFold((LayerFold(fp, at=7.0, period=2.0, deltas={"x": 3.0}, spans=((0.0, 2.0, "compute"),)),))
    assert fold.shift(29) == 0.0 and fold.shift(30) == 10.0 and fold.shift(10**6) == 10.0
    assert fold.repeats(19) == 1 and fold.repeats(20) == 6 and fold.repeats(29) == 6 and fold.repeats(30) == 1
    assert fold.extra("x") == 15.0 and fold.extra("x", before_pass=29) == 0.0 and fold.extra("y") == 0.0


def test_a_mismatch_says_where_and_in_which_passes():
    exc = LayerFoldMismatch("step 0, micro-batch 0, backward: queues differ", "backward")
    assert isinstance(exc, FoldMismatch) and exc.direction == "backward"
    assert str(exc) == "step 0, micro-batch 0, backward: queues differ"
    again = type(exc)(*exc.args)  # SimPy re-raises a process's exception from its args
    assert again.direction == "backward" and str(again) == str(exc)


def _assert_same_answer(folded: wss.Result, full: wss.Result) -> None:
    """The folded run's answer is that of every block simulated (1e-9): step time, breakdown, each step's time,
    every link's bytes and, wafers apart, each wafer's compute, idle time and breakdown."""
    t = full.step_time_s
    assert _rel(folded.step_time_s, t) <= REL
    for c, v in full.breakdown_s.items():
        assert abs(folded.breakdown_s[c] - v) <= REL * t, c
    assert [s.time_s for s in folded.steps] == pytest.approx([s.time_s for s in full.steps], rel=REL)
    for link, v in full.link_bytes.items():
        assert _rel(folded.link_bytes[link].total_bytes, v.total_bytes) <= REL, link
    assert (folded.wafers is None) == (full.wafers is None)
    for a, b in zip(folded.wafers or [], full.wafers or []):
        assert abs(a.compute_s - b.compute_s) <= REL * t and abs(a.idle_s - b.idle_s) <= REL * t, a.wafer
        for c, v in b.breakdown_s.items():
            assert abs(a.breakdown_s[c] - v) <= REL * t, (a.wafer, c)


def test_multi_step_runs_fold_layers_or_fall_back_exactly():
    """A 3-step GPT-3 run (too few steps to fold steps, which takes 7) folds its blocks in every step: with clipped
    updates each later step's forward pass starts behind the previous step's update backlog, so the ladder
    simulates a longer stretch at the start of the run (30 blocks, the end keeping four), and the answer equals
    every block simulated.  Before, the fold failed in step 1 and every block of every step was simulated.  Three
    steps have two later ones, the second behind a later step's own backlog; 6 (the most that do not fold steps)
    gave the same plan and folds at twice the cost."""
    folded, fc, full, uc = _pair("gpt3_175b", **{"training.steps": 3, **PINNED})
    assert fc.plan.step_fold_copies == 0 and fc.plan.simulated_steps == 3
    assert fc.plan.layer_runs == (BlockRun(0, 95, settle=4, lead=26),)
    assert fc.folding.layers is not None
    assert {f.point.step for f in fc.folding.layers.folds if f.point.direction == "forward"} == set(range(3))
    assert fc.events < uc.events / 2
    _assert_same_answer(folded, full)


def test_a_pass_minimum_that_binds_folds_blocks_and_gives_the_answer_of_every_block_simulated():
    """kernel_pass_min_s carries from pass to pass (the time since the last weight kernel's pass began): at 30 ms,
    which most of GPT-3 175B's passes wait for, identical blocks still repeat, and the folded run is exact."""
    folded, fc, full, uc = _pair("gpt3_175b", **{"training.steps": 2, "hardware.runtime.kernel_pass_min_s": 0.03})
    assert folded.breakdown_s["switch"] > 0.5 * folded.step_time_s
    assert fc.folding.layers is not None and fc.events < uc.events / 3
    _assert_same_answer(folded, full)
    assert _numbers_that_differ(folded, full) == []


_STRAGGLER = {"hardware.wafers": 16, "training.global_batch": 128, "simulation.fold_wafers": False,
              "faults.stragglers": [{"wafer": 5, "slowdown": 1.1}]}


@pytest.mark.parametrize(("name", "overrides"), [
    ("cerebras_gpt_13b", {"training.steps": 3}),
    # cut to 48 of its 96 blocks (WSS_SLOW=1: 96): the backlog drains 11 blocks into the forward pass instead of 23
    ("gpt3_175b", {"training.steps": 2, **_STRAGGLER,
                   **({} if os.environ.get("WSS_SLOW") else {"workload.model.layers.1.repeat": 48})}),
], ids=["cerebras-13b-3-steps", "straggler-2-steps"])
def test_later_steps_fold_their_blocks_after_the_update_backlog(name, overrides):
    """Multi-step runs with clipped updates (issue #23) fold their blocks in every step, and the answer equals
    every block simulated.  GPT-3 175B's later steps repeat only once the update backlog has drained, about 25
    blocks into the forward pass, so the ladder simulates more blocks at the start of the run; Cerebras-GPT 13B's
    backlog drains within the first four.  (GPT-3 175B folded, on 3 steps: test_multi_step_runs_fold_layers_or_
    fall_back_exactly checks all this and more, the run's exact blocks ladder.)"""
    s = wss.load_scenario(ROOT / "scenarios" / f"{name}.yaml", overrides=overrides)
    folded, fc = simulate_detailed(s, record=False)
    full, uc = simulate_detailed(s, record=False, fold_layers=False)
    assert fc.folding.layers is not None and uc.folding.layers is None
    assert {f.point.step for f in fc.folding.layers.folds} == set(range(fc.plan.simulated_steps))
    assert fc.events < uc.events
    if name == "gpt3_175b":
        assert all(r.lead > 0 for r in fc.plan.layer_runs)
    _assert_same_answer(folded, full)


@pytest.mark.parametrize("overrides", [
    {},
    {"faults.stragglers": [{"wafer": 5, "slowdown": 1.1}]},
    {"training.global_batch": 136},  # uneven shards: wafers 0-7 have 9 samples, the rest 8
    {"faults.links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]},
    {"faults.shards": [{"shard": 0, "dram_factor": 0.5}]},
    {"faults.nodes": [{"node": "swarmx.l2.n1"}]},  # its wafers cut off: the batch of 128 split unevenly over 12
], ids=["uniform", "straggler", "uneven", "slow-edge", "slow-shard", "node-down"])
def test_unfolded_runs_fold_layers_too(overrides):
    """Every wafer apart (16 of them, with classes): blocks fold, and each wafer's breakdown, compute and idle
    time, and each step's pacer agree with every block simulated.

    With uneven shards (and a node down, which leaves them uneven) the wafers with fewer samples run ahead of the
    largest block after block in the micro-batch whose sizes differ: a drift fold stands for their blocks
    (:mod:`wss.model.folding.drift`); where its checks refuse, every block of it is simulated
    (``Plan.blocks_unfolded_in``), nothing folds, and the run must equal the one with every block simulated, byte
    for byte.

    GPT-3 175B cut to 32 of its 96 blocks (WSS_SLOW=1: all 96): each case folds as at 96 (the same blocks
    simulated, 9 forward with the straggler, 8 otherwise, the uneven and node-down ones by drift folds), and the
    runs that simulate every block cost a quarter as much."""
    base = {"hardware.wafers": 16, "training.global_batch": 128, "simulation.fold_wafers": False,
            **({} if os.environ.get("WSS_SLOW") else {"workload.model.layers.1.repeat": 32})}
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml", overrides={**base, **overrides})
    folded, fc = simulate_detailed(s, record=False)
    full, uc = simulate_detailed(s, record=False, fold_layers=False)
    assert uc.folding.layers is None
    if fc.folding.layers is None:
        assert fc.plan.uneven_slots, "only uneven shards may refuse the fold"
        assert folded.to_json() == full.to_json()
        return
    assert fc.events < uc.events / 2
    t = full.step_time_s
    assert _rel(folded.step_time_s, t) <= REL
    for c, v in full.breakdown_s.items():
        assert abs(folded.breakdown_s[c] - v) <= REL * t, c
    assert folded.wafers is not None and full.wafers is not None
    for a, b in zip(folded.wafers, full.wafers):
        assert abs(a.compute_s - b.compute_s) <= REL * t and abs(a.idle_s - b.idle_s) <= REL * t, a.wafer
        for c, v in b.breakdown_s.items():
            assert abs(a.breakdown_s[c] - v) <= REL * t, (a.wafer, c)
    assert folded.step_pacers is not None and full.step_pacers is not None
    for a, b in zip(folded.step_pacers, full.step_pacers):
        assert a.part == b.part and _rel(a.busy_s, b.busy_s) <= REL
    assert _numbers_that_differ(folded, full) == []  # every other figure too


_SLOW = pytest.mark.skipif(not os.environ.get("WSS_SLOW"), reason="every block of 192 wafers apart: set WSS_SLOW=1")


_STRAGGLER = {"faults.stragglers": [{"wafer": 17, "slowdown": 1.1}]}
_SLOW_EDGE = {"faults.links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]}


@pytest.mark.parametrize(("overrides", "runs", "simulated"), [
    (_STRAGGLER, (BlockRun(0, 95),), (8, 8)),
    (_SLOW_EDGE, (BlockRun(0, 95, settle=4, forward_lead=1),), (9, 8)),
    pytest.param({"faults.shards": [{"shard": 0, "dram_factor": 0.5}]}, (BlockRun(0, 95),), (8, 8), marks=_SLOW),
    ({"faults.nodes": [{"node": "swarmx.l4.n1"}]}, (BlockRun(0, 95),), (8, 8)),
], ids=["straggler", "slow-edge", "slow-shard", "node-down"])
def test_the_faults_of_issue_23_on_192_wafers_give_the_answer_of_every_block_simulated(overrides, runs, simulated):
    """GPT-3 175B on 192 wafers (issue #23): a 1.1x straggler on wafer 17 drift-folds with four blocks at each end
    (the other wafers run ahead of it in the forward passes until their buffers run dry; before, the ladder found
    seven at the start); a half-rate edge under the root folds where the ladder finds its blocks repeating (five
    blocks at the start of the forward passes, four at the end; the backward passes, which settle within four,
    simulate four at each end and fold the rest, the blocks only the forward passes needed too), a slow MemoryX
    shard folds as a uniform cluster does, and a node down leaves uneven
    shards whose slot drift-folds (the smaller shards' lead runs out over the backward copies, and each waits for
    it once behind the delay: :mod:`wss.model.folding.drift`).  Every Result figure equals every block simulated
    to 1e-9 (byte for byte where nothing folds)."""
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml", overrides={**overrides, **PINNED})
    folded, fc = simulate_detailed(s, record=False)
    full, uc = simulate_detailed(s, record=False, fold_layers=False)
    assert fc.plan.layer_runs == runs and uc.folding.layers is None
    if fc.folding.layers is None:
        assert simulated is None
        assert fc.plan.blocks_unfolded_in == fc.plan.uneven_slots != frozenset()
        assert folded.to_json() == full.to_json()
        return
    assert (folded.cluster["blocks_simulated_forward"], folded.cluster["blocks_simulated_backward"]) == simulated
    assert [(f.point.direction, f.point.copies) for f in fc.folding.layers.folds] == [
        ("forward", 96 - simulated[0]), ("backward", 96 - simulated[1])]
    assert fc.events < uc.events / 4
    assert _numbers_that_differ(folded, full) == []


def test_a_straggler_drift_folds_both_ways_without_a_longer_stretch():
    """GPT-3 175B on 16 wafers, wafer 5 1.1x slower: the other wafers run ahead of it in the forward passes until
    the buffers above them run dry, so their compared blocks are shorter than the straggler's.  A drift fold stands
    for them (:mod:`wss.model.folding.drift`: they wait once, behind the delay, for what their lead could not
    carry), and both directions fold with four blocks at each end (before: one block more at the start, found by a
    second run; before that, six at each end).  The answer equals every block simulated
    (test_unfolded_runs_fold_layers_too, "straggler")."""
    over = {"hardware.wafers": 16, "training.global_batch": 128, "simulation.fold_wafers": False,
            "faults.stragglers": [{"wafer": 5, "slowdown": 1.1}]}
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml", overrides=over)
    folded, fc = simulate_detailed(s, record=False)
    assert fc.plan.layer_runs == (BlockRun(0, 95),)
    assert fc.plan.layer_directions == ("forward", "backward") and fc.folding.layers is not None
    assert (folded.cluster["blocks_simulated_forward"], folded.cluster["blocks_simulated_backward"]) == (8, 8)
    assert [f.point.copies for f in fc.folding.layers.folds] == [88, 88]
    drift = fc.folding.drift
    assert [d.point.direction for d in drift.delays] == ["forward"] and set(drift.ran_out.values()) == {"stream"}


def _same_per_block_views(folded: wss.Result, full: wss.Result) -> None:
    """report --by layer/kernel, diff (through group_rows) and the per-kernel plot show the same for every block."""
    from wss.views.plots import kernel_breakdown
    from wss.views.report import group_rows, kernel_table

    for by in ("layer", "kernel"):
        got = {(g["where"], g[by]): g for g in group_rows(kernel_table(folded), by, steps=len(folded.steps))}
        want = {(g["where"], g[by]): g for g in group_rows(kernel_table(full), by, steps=len(full.steps))}
        assert got.keys() == want.keys(), by
        for key, g in want.items():
            assert got[key]["passes"] == g["passes"], key
            for f in ("duration_s", "compute_s", "bytes_in", "bytes_out"):
                assert got[key][f] == pytest.approx(g[f], rel=1e-6, abs=1e-12), (key, f)
    plot_got = {d["name"]: d["total_s"] for d in kernel_breakdown(folded, "layer", top=1000)}
    plot_want = {d["name"]: d["total_s"] for d in kernel_breakdown(full, "layer", top=1000)}
    assert plot_got.keys() == plot_want.keys()
    assert all(plot_got[k] == pytest.approx(v, rel=1e-6) for k, v in plot_want.items())


def test_per_block_views_of_a_folded_run_give_each_block_its_own_time():
    """report --by layer/kernel, diff (through group_rows), the per-kernel plot and to_pandas: a block standing
    for folded ones is spread over them, so every block shows what the run that simulates each block shows."""
    folded, _, full, _ = _pair("gpt3_175b")
    assert folded.layer_folds is not None and full.layer_folds is None
    assert {(f.direction, f.layer, len(f.stands_for)) for f in folded.layer_folds} == {
        ("forward", "block.3", 89), ("backward", "block.92", 89)}
    _same_per_block_views(folded, full)
    df = folded.to_pandas()
    assert set(df.loc[df["blocks"] > 1, "layer"]) == {"block.3", "block.92"}
    assert ((df["repeats"] % df["blocks"]) == 0).all()


def test_per_block_views_of_a_straggler_count_the_backward_passes_folded_past_the_forward_ones():
    """GPT-3 175B on 16 wafers with a 1.1x straggler folds both directions from block 4, its other wafers drifting
    ahead of it (test_a_straggler_drift_folds_both_ways_without_a_longer_stretch): every block's passes and times
    are those of every block simulated.  Cut to 32 of its 96 blocks, it folds the same way (at 96: 88 blocks stood
    for each way), at a quarter of the cost."""
    over = {"hardware.wafers": 16, "training.global_batch": 128, "simulation.fold_wafers": False,
            "faults.stragglers": [{"wafer": 5, "slowdown": 1.1}], "workload.model.layers.1.repeat": 32}
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml", overrides=over)
    folded = simulate_detailed(s, record=False)[0]
    full = simulate_detailed(s, record=False, fold_layers=False)[0]
    assert folded.layer_folds is not None
    assert [(f.direction, f.layer, f.stands_for[0], len(f.stands_for)) for f in folded.layer_folds] == [
        ("forward", "block.3", "block.3", 25), ("backward", "block.28", "block.4", 25)]
    _same_per_block_views(folded, full)
