"""The fallback ladder (wss/model/folding/ladder.py): each failed fold check runs the plan again, folded less."""

from __future__ import annotations

from pathlib import Path

import pytest

import wss
from wss.model.folding.fold import FoldMismatch
from wss.model.folding.ladder import run_folded
from wss.model.folding.layer_fold import LayerFoldMismatch
from wss.model.plan import Plan, make_plan
from wss.model.plan.layer_runs import BlockRun

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _failing(times: int, error: Exception) -> tuple[list[Plan], object]:
    """A run that fails its fold check ``times`` times, then answers with the plan it ran."""
    tried: list[Plan] = []

    def run(p: Plan) -> Plan:
        tried.append(p)
        if len(tried) <= times:
            raise error
        return p

    return tried, run


def test_steps_unfold_first_then_micro_batches():
    s = wss.load_scenario(SCENARIOS / "fc_mnist.yaml",
                          ["training.steps=40", "training.global_batch=1024", "training.micro_batch=8"])
    p = make_plan(s)
    assert p.step_fold_copies > 0 and p.fold_copies > 0
    tried, run = _failing(1, FoldMismatch("steps differ"))
    assert run_folded(s, None, p, run).step_fold_copies == 0
    assert tried[1].fold_copies == p.fold_copies
    tried, run = _failing(2, FoldMismatch("nothing repeats"))
    last = run_folded(s, None, p, run)
    assert len(tried) == 3 and last.fold_copies == 0 and last.step_fold_copies == 0


def test_blocks_failing_one_direction_fold_the_other_in_a_one_step_run():
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.steps=1"])
    p = make_plan(s, fold_layers=True)
    assert p.layer_runs and len(p.layer_directions) == 2
    failed = p.layer_directions[0]
    tried, run = _failing(1, LayerFoldMismatch("blocks differ", failed))
    answer = run_folded(s, None, p, run)
    assert len(tried) == 2
    assert answer.layer_directions == tuple(d for d in p.layer_directions if d != failed)
    assert answer.layer_runs == p.layer_runs


def _straggler() -> tuple[wss.Scenario, Plan]:
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml",
                          ["training.steps=1", "faults.stragglers=[{wafer: 5, slowdown: 1.1}]"])
    return s, make_plan(s, fold_layers=True)


def test_wafers_apart_settle_longer_before_folding_less():
    """Wafers simulated apart (a straggler) whose forward blocks do not repeat: six blocks at the low end, then nine,
    14, 21 and 32 (the high end keeping four; at most half of the 96 simulated), and only then the rungs from the
    plan as it was (one direction).  In this run of one step the blocks added are simulated in the forward passes
    only (the backward passes keep four at each end)."""
    s, p = _straggler()
    assert p.layer_runs == (BlockRun(0, 95),)
    tried, run = _failing(1, LayerFoldMismatch("blocks differ", "forward", 0))
    answer = run_folded(s, None, p, run)
    assert len(tried) == 2 and answer.layer_runs == (BlockRun(0, 95, settle=4, forward_lead=2),)
    assert answer.dropped_in("forward") == frozenset(range(6, 92))
    assert answer.dropped_in("backward") == frozenset(range(4, 92))
    assert answer.layer_directions == p.layer_directions
    tried, run = _failing(6, LayerFoldMismatch("blocks differ", "forward", 0))
    answer = run_folded(s, None, p, run)
    assert [(q.layer_runs[0].head, q.layer_runs[0].settle) for q in tried] == [
        (4, 4), (6, 4), (9, 4), (14, 4), (21, 4), (32, 4), (4, 4)]
    assert answer.layer_runs == p.layer_runs and answer.layer_directions == ("backward",)
    # a wait reaching across copies (no micro-batch named) is no matter of settling
    tried, run = _failing(1, LayerFoldMismatch("a wait across copies", ""))
    run_folded(s, None, p, run)
    assert [q.layer_runs for q in tried] == [p.layer_runs, ()]


def test_wafers_apart_lengthen_the_end_whose_fold_failed():
    """Wafers apart: a forward fold that fails lengthens the low end (where the forward passes settle), a backward
    one the high end, keeping the head; one block at a time where the failed fold had settled late (its second
    compared block already repeated), half as far again where not.  GPT-3 175B on 192 wafers with a 1.1x straggler
    so folds with seven blocks at the start and four at the end, tried after four and six (120,611 events), where it
    folded with nine at both ends after a try at six that ran to its end (193,705).  In a run of one step the blocks
    added at the low end are simulated in the forward passes only (97,988 events): the backward passes simulate four
    there, or as many as the high end where that is more."""
    s, p = _straggler()
    late = LayerFoldMismatch("wafer.64: blocks took", "forward", 0, settled_late=True, step=0)
    calls: list[Plan] = []

    def forward_then_late_then_backward(q: Plan) -> Plan:
        calls.append(q)
        if len(calls) == 1:
            raise LayerFoldMismatch("queues differ", "forward", 0, step=0)
        if len(calls) == 2:
            raise late
        if len(calls) == 3:
            raise LayerFoldMismatch("queues differ", "backward", 0, step=0)
        return q

    answer = run_folded(s, None, p, forward_then_late_then_backward)
    assert [(q.layer_runs[0].head, q.layer_runs[0].settle) for q in calls] == [(4, 4), (6, 4), (7, 4), (7, 6)]
    assert answer.layer_runs == (BlockRun(0, 95, settle=6, forward_lead=1),)
    assert list(answer.layer_runs[0].dropped) == list(range(7, 90))
    assert list(answer.layer_runs[0].dropped_in("backward")) == list(range(6, 90))
    _, run = _failing(1, LayerFoldMismatch("queues differ", "backward", 0, settled_late=True, step=0))
    assert run_folded(s, None, p, run).layer_runs == (BlockRun(0, 95, settle=5),)


def test_wafers_apart_over_several_steps_lengthen_both_directions_at_the_low_end():
    """With more than one simulated step the blocks added at the low end are simulated both ways (the run's lead):
    the next step streams each of them forward after its update, which a backward pass folded away never makes."""
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml",
                          ["training.steps=2", "faults.stragglers=[{wafer: 5, slowdown: 1.1}]"])
    p = make_plan(s, fold_layers=True)
    assert p.simulated_steps == 2 and p.layer_runs == (BlockRun(0, 95),)
    tried, run = _failing(2, LayerFoldMismatch("queues differ", "forward", 0, step=0))
    answer = run_folded(s, None, p, run)
    assert [q.layer_runs[0].head for q in tried] == [4, 6, 9]
    assert answer.layer_runs == (BlockRun(0, 95, settle=4, lead=5),)
    assert answer.dropped_in("forward") == answer.dropped_in("backward") == frozenset(range(9, 92))


def test_uneven_slots_go_straight_to_their_rung():
    """Blocks that fail in an uneven slot are simulated in full there, with four at each end elsewhere: uneven
    wafers drift apart for longer than a longer stretch may settle, so no longer one is tried."""
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["hardware.wafers=63"])
    p = make_plan(s, fold_layers=True)
    (slot,) = p.uneven_slots
    tried, run = _failing(1, LayerFoldMismatch("blocks differ", "forward", slot))
    answer = run_folded(s, None, p, run)
    assert [q.layer_runs for q in tried] == [p.layer_runs, p.layer_runs]
    assert answer.blocks_unfolded_in == {slot}


def test_folded_wafers_settle_longer_only_where_they_settled_late():
    """In a folded cluster blocks that do not repeat mostly fall further behind block after block (brain-120T's
    optimizer): no longer stretch is tried.  Where the run settled late (the second compared block started from the
    queues after the copies), six blocks at each end are, and then nine, only while each failure settled late."""
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.steps=1"])
    p = make_plan(s, fold_layers=True)
    for drifting in (LayerFoldMismatch("blocks differ", "backward"), LayerFoldMismatch("blocks differ", "backward", 0)):
        tried, run = _failing(1, drifting)
        run_folded(s, None, p, run)
        assert [q.layer_runs[0].settle for q in tried] == [4, 4]
    tried, run = _failing(1, LayerFoldMismatch("blocks differ", "forward", 0, settled_late=True))
    answer = run_folded(s, None, p, run)
    assert [q.layer_runs[0].settle for q in tried] == [4, 6] and answer.layer_directions == p.layer_directions
    tried, run = _failing(2, LayerFoldMismatch("blocks differ", "forward", 0, settled_late=True))
    run_folded(s, None, p, run)
    assert [q.layer_runs[0].settle for q in tried] == [4, 6, 9]
    calls: list[Plan] = []

    def late_then_drifting(q: Plan) -> Plan:
        calls.append(q)
        if len(calls) <= 2:
            raise LayerFoldMismatch("blocks differ", "forward", 0, settled_late=len(calls) == 1)
        return q

    answer = run_folded(s, None, p, late_then_drifting)
    assert [q.layer_runs[0].settle for q in calls] == [4, 6, 4] and answer.layer_directions == ("backward",)


def test_a_failure_on_the_last_rung_is_raised():
    s = wss.load_scenario(SCENARIOS / "fc_mnist.yaml")
    tried, run = _failing(10, FoldMismatch("never"))
    with pytest.raises(FoldMismatch):
        run_folded(s, None, make_plan(s), run)
    assert tried[-1].fold_copies == 0


def test_a_later_steps_forward_passes_start_longer():
    """With clipped updates a step's first forward pass starts behind the previous step's update backlog, and its
    blocks repeat only once that has drained (issue #23): a forward fold failing in step 1 is tried again with 8,
    16 and 32 blocks simulated at the start of each run (at most half of its 96), the end keeping its four, and
    then the rungs from the plan as it was.  A failure in step 0, or in the backward passes, starts no longer."""
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.steps=2"])
    p = make_plan(s, fold_layers=True)
    assert p.layer_runs == (BlockRun(0, 95),) and p.simulated_steps == 2
    draining = LayerFoldMismatch("queues differ", "forward", 0, step=1)
    tried, run = _failing(2, draining)
    answer = run_folded(s, None, p, run)
    assert [(q.layer_runs[0].head, q.layer_runs[0].settle) for q in tried] == [(4, 4), (8, 4), (16, 4)]
    assert answer.layer_runs == (BlockRun(0, 95, settle=4, lead=12),)
    assert list(answer.layer_runs[0].dropped) == list(range(16, 92)) and answer.layer_runs[0].copies == 76
    tried, run = _failing(4, draining)
    run_folded(s, None, p, run)
    assert [q.layer_runs[0].head for q in tried[:4]] == [4, 8, 16, 32] and tried[4].layer_runs == ()
    for other in (LayerFoldMismatch("blocks differ", "forward", 0, step=0),
                  LayerFoldMismatch("blocks differ", "backward", 0, step=1)):
        tried, run = _failing(1, other)
        run_folded(s, None, p, run)
        assert [q.layer_runs for q in tried] == [p.layer_runs, ()]


def test_a_drain_measured_by_the_failed_check_is_tried_at_once():
    """Where the failed check saw queued counts fall (GPT-3 175B: 343 jobs, then 329, so 24 more blocks to empty),
    the next start reaches two blocks past that guess (4 + 24 + 2 = 30 blocks), not merely twice as far; a guess
    shorter than doubling doubles."""
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["training.steps=2"])
    p = make_plan(s, fold_layers=True)
    tried, run = _failing(1, LayerFoldMismatch("queues differ", "forward", 0, step=1, drains_in=24))
    assert run_folded(s, None, p, run).layer_runs == (BlockRun(0, 95, settle=4, lead=26),)
    tried, run = _failing(1, LayerFoldMismatch("queues differ", "forward", 0, step=1, drains_in=1))
    assert run_folded(s, None, p, run).layer_runs[0].head == 8
    tried, run = _failing(1, LayerFoldMismatch("queues differ", "forward", 0, step=1, drains_in=60))
    run_folded(s, None, p, run)
    assert [q.layer_runs for q in tried] == [p.layer_runs, ()], "a guess past half the run is not tried"


def test_a_folded_clusters_forward_passes_whose_buffers_fill_settle_longer():
    """A folded cluster whose first step's forward blocks fail with other queues at their starts (buffers filling, as
    block inputs leave for a store slower than the wafer makes them, or such a store's backlog running down)
    lengthens the low end, as wafers apart do; queues in the backward passes, or forward blocks that differ in
    anything but their queues, keep the old rule (fold less; a later step's forward passes have a rung of their
    own, the lead)."""
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", ["training.steps=1"])
    p = make_plan(s, fold_layers=True)
    assert p.layer_runs == (BlockRun(0, 39),) and p.layer_directions == ("forward", "backward")
    for exc in (LayerFoldMismatch("queues differ", "forward", 0, step=0, fills=True, queued=True),
                LayerFoldMismatch("queues differ", "forward", 0, step=0, queued=True)):
        tried, run = _failing(1, exc)
        answer = run_folded(s, None, p, run)
        assert len(tried) == 2 and answer.layer_runs == (BlockRun(0, 39, settle=4, forward_lead=2),), exc
        assert answer.layer_directions == p.layer_directions
    for exc in (LayerFoldMismatch("queues differ", "backward", 0, step=0, fills=True, queued=True),
                LayerFoldMismatch("one block took longer", "forward", 0, step=0)):
        tried, run = _failing(1, exc)
        answer = run_folded(s, None, p, run)
        assert len(tried) == 2 and answer.layer_runs == p.layer_runs and len(answer.layer_directions) == 1, exc


def test_a_store_slower_than_the_wafer_folds_the_forward_passes_once_its_buffers_are_full():
    """Cerebras-GPT 13B on 16 wafers with every wafer's block inputs on a 25 GB/s host store: they leave slower
    than the wafer makes them, the wafer's edge fills block by block, and the forward blocks repeat from the ninth
    on.  The fold holds there (27,199 events; before, every forward block was simulated: 53,632; every block:
    104,384), and every number equals every block simulated to 1e-9."""
    import json

    from core_helpers import result_numbers

    from wss.model.simulate import simulate_detailed

    # At the calibration this was found with (a later refit moves the wafer's pace against the store's).
    over = {"hardware.wafers": 16, "training.steps": 1, "hardware.activation_store.bandwidth_Bps": 2.5e10,
            "hardware.wafer.kernel_efficiency": 0.35, "hardware.runtime.step_overhead_s": 0.047}
    folded, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over),
                                   record=False)
    full, uc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides={
        **over, "simulation.fold_micro_batches": False}), record=False, fold_layers=False)
    assert [f.direction for f in folded.layer_folds or []] == ["forward", "backward"]
    assert fc.plan.layer_runs[0].forward_lead > 0 and fc.events < uc.events / 3
    simulated = (".sim_events", ".cluster.", ".records[")
    got, want = ({k: v for k, v in result_numbers(json.loads(r.to_json())).items() if not k.startswith(simulated)}
                 for r in (folded, full))
    assert got.keys() == want.keys()
    assert {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > 1e-9 * max(abs(v), 1e-12)} == {}


def test_a_stores_backlog_running_down_folds_the_forward_passes_once_it_has():
    """Cerebras-GPT 13B on 9 wafers (80 samples each, two micro-batches) with the activation servers' 25 GB/s
    store: the store's backlog of block inputs falls from the first forward blocks to the next (6.6 MB queued, then
    2.6 MB), so they do not repeat at first; simulated from the fifth block on, they do.  The run folds both
    directions (42,036 events; before, the backward passes only: 97,092), every number equal to every block
    simulated to 1e-9."""
    import json

    from core_helpers import result_numbers

    from wss.model.simulate import simulate_detailed

    over = {"hardware.wafers": 9, "training.steps": 1, "hardware.activation_store.bandwidth_Bps": 2.5e10,
            "hardware.wafer.kernel_efficiency": 0.41, "hardware.runtime.step_overhead_s": 0.052}
    folded, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over),
                                   record=False)
    full, uc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides={
        **over, "simulation.fold_micro_batches": False}), record=False, fold_layers=False)
    assert fc.plan.layer_directions == ("forward", "backward") and fc.plan.layer_runs[0].forward_lead > 0
    assert fc.events < uc.events / 4
    simulated = (".sim_events", ".cluster.", ".records[")
    got, want = ({k: v for k, v in result_numbers(json.loads(r.to_json())).items() if not k.startswith(simulated)}
                 for r in (folded, full))
    assert got.keys() == want.keys()
    assert {k: (got[k], v) for k, v in want.items() if abs(got[k] - v) > 1e-9 * max(abs(v), 1e-12)} == {}
