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
from types import SimpleNamespace

import pytest
from core_helpers import SCENARIOS, larger_shards_first, result_numbers

import wss
from wss.model.folding.drift import Delay, DriftWorld, waited_for
from wss.model.folding.layer_fold import FoldPoint, LayerFoldMismatch
from wss.model.simulate import simulate_detailed

REL = 1e-9
#: The calibration these runs were looked at with (the shipped one moves with every refit).
#: ... and the activation store they were found with: each wafer's own, limited only by its edge.
PINNED = {"hardware.wafer.kernel_efficiency": 0.59, "hardware.runtime.step_overhead_s": 0.084,
          "hardware.activation_store.bandwidth_Bps": None}


@pytest.fixture(autouse=True, scope="module")
def _larger_shards_first():
    """Every test here runs on the layouts it was written on: the larger shards on the first wafers
    (``larger_shards_first``).  ``test_shard_placement.py`` drift-folds the default, spread placement."""
    with larger_shards_first():
        yield


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
    """13 wafers: 5 of 56 samples, 8 of 55, in two drifting worlds (wafers 8 to 11 under a node of their own, and
    wafer 12 under another, which is the same world's class; wafers 5 to 7 beside wafer 4 of 56); 25 wafers: 20 of
    29, 5 of 28, in one (wafers 20 to 23, and wafer 24 alike).  The smaller
    shards gain 0.017 ms a forward block and 0.051 ms a backward one: both directions fold, with 32 copies each."""
    folded, fc, full, uc = _runs(wafers)
    drift = fc.folding.drift
    assert isinstance(drift, DriftWorld)
    assert fc.plan.uneven_slots == {0} and not fc.plan.blocks_unfolded_in
    worlds = {13: 2, 25: 1}[wafers]
    assert list(drift.worlds) == list(range(1, worlds + 1))
    assert sorted((d.world, d.point.direction, d.point.copies) for d in drift.delays) == sorted(
        (k, direction, 32) for k in drift.worlds for direction in ("forward", "backward"))
    for d in drift.delays:
        lead = 0.0171307e-3 if d.point.direction == "forward" else 0.0513920e-3
        assert d.seconds == pytest.approx(32 * lead, rel=1e-3)
    assert fc.events < uc.events / 4
    assert _same_numbers(folded, full) == {}


def test_a_lead_that_runs_out_over_the_copies_is_waited_for_once_behind_the_delay() -> None:
    """17 wafers (6 of 43 samples, 11 of 42): a smaller shard gains 0.5 ms a forward block, and its buffers run dry
    within the 32 copies.  In its first block behind the delay line it waits for the weight stream, in one go, what
    the lead could not carry; its next block keeps the pacing world's step.  The drift fold holds, with every number
    equal to every block simulated (before: the slot simulated every block)."""
    folded, fc, full, uc = _runs(17)
    drift = fc.folding.drift
    assert not fc.plan.blocks_unfolded_in
    assert [(d.point.direction, d.point.copies) for d in drift.delays] == [("forward", 32)] * 3
    assert set(drift.ran_out.values()) == {"stream"} and len(drift.ran_out) == 3
    assert fc.events < uc.events / 4
    assert _same_numbers(folded, full) == {}


def test_a_lead_that_ran_out_in_the_compared_blocks_is_waited_for_behind_the_delay_too() -> None:
    """61 wafers (49 of 12 samples, 12 of 11, in two drifting worlds): wafer 49's lead runs out in the second of
    its compared blocks, which waits longer than the first for the stream.  Its copies are its first (free) block,
    and its block behind the delay waits the rest: the drift fold holds (before: a longer stretch at the start)."""
    folded, fc, full, uc = _runs(61)
    drift = fc.folding.drift
    assert max(r.head for r in fc.plan.layer_runs) == 4 and len(drift.delays) == 2
    early = []
    for delay in drift.delays:
        f = delay.point
        for wafer in drift.world_wafers(delay.world):
            marks = fc.folding.wafer_marks[wafer.name]
            if marks[f.c][0] - marks[f.b][0] > delay.block * 1.01:  # the second compared block already waited
                early.append(wafer.name)
                assert drift.ran_out[(wafer.name, f.c)] == "stream"
    assert early == ["wafer.49"]
    assert fc.events < uc.events / 4
    assert _same_numbers(folded, full) == {}


def test_chunks_that_cross_before_the_lead_is_measured_are_held_until_it_is() -> None:
    """96 wafers (48 of 8 samples, 48 of 7): the drifting subtree under a first-level node gets the fold point's
    first chunks before its wafers have started their compared blocks.  They are held until the lead is measured,
    then go in as late as the delay says (before: the check refused the fold, and the slot simulated every block)."""
    over = {**PINNED, "hardware.wafers": 96, "training.steps": 1}
    folded, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over),
                                   record=False)
    full, uc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides={
        **over, "simulation.fold_micro_batches": False}), record=False, fold_layers=False)
    drift = fc.folding.drift
    assert drift.early > 0 and len(drift.delays) == 2 and not fc.plan.blocks_unfolded_in
    assert fc.events < uc.events / 3
    assert _same_numbers(folded, full) == {}


def test_a_refused_run_out_in_the_forward_passes_settles_with_a_longer_stretch(monkeypatch) -> None:
    """Where a run-out is refused in the forward passes (here: every one, by a check made to refuse), the ladder
    simulates a longer stretch at the start, past which the smaller shards keep the largest's step and an ordinary
    fold holds: the same answers, with more blocks simulated."""
    from wss.model.folding import drift as drift_module

    def refuse(wafer, delay, free, block, extra):
        f = delay.point
        raise LayerFoldMismatch("refused", f.direction, f.micro_batch, step=f.step, settles=f.direction == "forward")

    monkeypatch.setattr(drift_module, "waited_for", refuse)
    over = {**PINNED, "hardware.wafers": 64, "training.steps": 1}
    folded, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over),
                                   record=False)
    _, _, full, _ = _runs(64)
    assert max(r.head for r in fc.plan.layer_runs) > 4 and not fc.plan.blocks_unfolded_in
    assert fc.folding.drift.delays == [] and fc.folding.layers is not None
    assert _same_numbers(folded, full) == {}


def _drifter(spans: list[tuple[float, float, str, int]]) -> SimpleNamespace:
    return SimpleNamespace(name="wafer.9", timeline=spans)


#: A drifting wafer's marks at a fold point (passes a=10, b=20, c=30, the blocks after it 40 and 50): free blocks of
#: 1 s of compute, a pacing block of 1.5 s; the block behind the delay waits 1.2 s for the stream.
_POINT = FoldPoint(step=0, micro_batch=0, direction="forward", a=10, b=20, c=30, copies=4)
_DELAY = Delay(_POINT, 1, seconds=4 * 0.5, block=1.0)


def _timeline(driven_wait: float = 0.5, other: str = "stream") -> tuple[list, dict]:
    spans = [(0.0, 1.0, "compute", 10), (1.0, 2.0, "compute", 20), (2.0, 3.0, "compute", 30),
             (3.0, 4.2, "stream", 30), (4.2, 5.2, "compute", 40), (5.2, 5.2 + driven_wait, other, 40)]
    marks = {10: (0.0, 0, 0.0), 20: (1.0, 1, 1.0), 30: (2.0, 2, 2.0), 40: (4.2, 4, 3.0),
             50: (5.2 + driven_wait, 6, 4.0)}
    return spans, marks


def test_a_run_out_is_one_cause_of_waiting_alone() -> None:
    spans, _ = _timeline()
    wafer = _drifter(spans)
    assert waited_for(wafer, _DELAY, (0, 1), (2, 4), 1.2) == "stream"
    with pytest.raises(LayerFoldMismatch, match="waited longer in stream") as refused:
        waited_for(wafer, _DELAY, (0, 1), (2, 4), 1.0)  # its wait is not the extra time
    assert refused.value.settles  # forward: the ladder may try a longer stretch
    wafer.timeline[3] = (3.0, 3.6, "stream", 30)
    wafer.timeline.insert(4, (3.6, 4.2, "input", 30))
    with pytest.raises(LayerFoldMismatch, match="input, stream"):
        waited_for(wafer, _DELAY, (0, 1), (2, 5), 1.2)  # two causes grew
    with pytest.raises(LayerFoldMismatch, match="nothing"):
        waited_for(wafer, _DELAY, (0, 1), (1, 2), 0.0)  # nothing ran out


def _check_run_out(spans: list, marks: dict, holds: bool) -> None:
    """A drifting wafer whose lead ran out at ``_POINT`` (waiting for the stream): the check after the run passes
    on its ``spans`` and ``marks``, or refuses them."""
    wafer = _drifter(spans)
    drift = DriftWorld([wafer], {id(wafer): 1}, [], [], [], lags=[0.0, 0.0])
    drift.delays.append(_DELAY)
    drift.ran_out[(wafer.name, _POINT.c)] = "stream"
    if holds:
        drift.check_after({wafer.name: marks})
    else:
        with pytest.raises(LayerFoldMismatch, match="its lead ran out over the copies"):
            drift.check_after({wafer.name: marks})


@pytest.mark.parametrize(("driven_wait", "other", "holds"), [
    (0.5, "stream", True),  # a pacing block: the free block and P - its block more of the stream
    (0.4, "stream", False),  # shorter than the pacing period: the wafer is still gaining
    (0.5, "input", False),  # as long, but waiting for something else
])
def test_a_run_out_must_be_followed_by_a_block_in_the_pacing_worlds_step(driven_wait, other, holds) -> None:
    _check_run_out(*_timeline(driven_wait, other), holds)


def _settling(driven: tuple[float, float, float], cause: str = "stream") -> tuple[list, dict]:
    """As :func:`_timeline`, with three blocks after the one behind the delay, waiting ``driven`` in turn."""
    spans = [(0.0, 1.0, "compute", 10), (1.0, 2.0, "compute", 20), (2.0, 3.0, "compute", 30),
             (3.0, 4.2, "stream", 30)]
    marks = {10: (0.0, 0, 0.0), 20: (1.0, 1, 1.0), 30: (2.0, 2, 2.0), 40: (4.2, 4, 3.0)}
    t = 4.2
    for i, wait in enumerate(driven):
        p = 40 + 10 * i
        spans += [(t, t + 1.0, "compute", p), (t + 1.0, t + 1.0 + wait, cause if i == 1 else "stream", p)]
        t += 1.0 + wait
        marks[p + 10] = (t, len(spans), 4.0 + i)
    return spans, marks


@pytest.mark.parametrize(("driven", "cause", "holds"), [
    ((0.6, 0.4, 0.5), "stream", True),  # a block more to settle: two pacing periods together, then one
    ((0.6, 0.4, 0.6), "stream", False),  # the block after them is not a pacing block
    ((0.6, 0.3, 0.5), "stream", False),  # the two together are shorter than two periods: still gaining
    ((0.6, 0.4, 0.5), "input", False),  # as long, but the second waits for something else
])
def test_a_run_out_may_take_one_block_more_to_settle(driven, cause, holds) -> None:
    _check_run_out(*_settling(driven, cause), holds)


def test_gpt3_on_37_wafers_drift_folds_where_a_run_out_takes_a_block_more_to_settle() -> None:
    """GPT-3 175B on 37 wafers with each wafer's block inputs on activation servers of 25 GB/s (the cluster presets'),
    one step: in the backward passes of the slot whose micro-batches differ, wafer 20's lead runs out over the
    copies, and after its wait behind the delay its block inputs, coming back beside the weights, take one more
    block to settle (one block waits longer than the pacing period, the next as much less).  The drift fold holds,
    and every number equals every block simulated (before: that slot simulated every block, 1.4 million events)."""
    over = {"hardware.wafers": 37, "hardware.wafer.kernel_efficiency": 0.41, "hardware.runtime.step_overhead_s": 0.052,
            "hardware.activation_store.bandwidth_Bps": 2.5e10}
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", overrides=over)
    folded, fc = simulate_detailed(s, record=False)
    full, uc = simulate_detailed(s, record=False, fold_layers=False)
    drift = fc.folding.drift
    assert isinstance(drift, DriftWorld) and not fc.plan.blocks_unfolded_in
    two = [(w.name, d.point.direction) for d in drift.delays for w in drift.world_wafers(d.world)
           if (w.name, d.point.c) in drift.ran_out and DriftWorld._settled(
               fc.folding.wafer_marks[w.name], d.point, d.block + d.seconds / d.point.copies) == 2]
    assert two == [("wafer.20", "backward")]
    assert fc.events < uc.events / 8
    assert _same_numbers(folded, full) == {}


def test_a_cluster_of_even_shards_has_no_drifting_world() -> None:
    """Nothing changes where no slot is uneven: no drifting world, no link counts by pass."""
    _, c = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",
                                               overrides={**PINNED, "hardware.wafers": 16}), record=False)
    assert c.folding.drift is None
    assert all(link.tally is None for link in (*c.swarmx.down, *c.swarmx.up))


def test_a_drifting_subtree_of_two_paces_keeps_the_slot_simulated_in_full() -> None:
    """13 wafers with wafer 0 (56 samples) 1.05x slower: it paces the cluster, and the others drift ahead of it,
    wafers 1 to 4 (56 samples) more slowly than those of 55, and one drifting subtree holds wafers of both paces:
    one delay cannot stand for both, the drift fold is refused, and the slot simulates every block."""
    over = {**PINNED, "hardware.wafers": 13, "faults.stragglers": [{"wafer": 0, "slowdown": 1.05}]}
    _, c = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over), record=False)
    assert c.folding.drift is None and c.plan.blocks_unfolded_in == {0}


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


def test_the_pause_waits_for_gradients_still_inside_a_drifting_worlds_tree(monkeypatch) -> None:
    """GPT-3 175B on 40 wafers (16 of 39 samples, 24 of 38): the drifting world under a first-level edge holds a
    chain of three edges going up.  A pause may come only once no gradient of a pass before its fold point is left
    anywhere in the world (counted as it enters the wafer's own edge, not only the world's top): else the one
    still inside would reach the pacing world's reduction after the pause, and its world would hear the sum late.
    Before, the check refused the fold, and the slot simulated every block (586,601 events).  At the shipped
    calibration, where that happened; the pauses' invariant is checked at any."""
    seen: list[tuple[float, list[int]]] = []
    move = DriftWorld._move

    def recording_move(self, env, shifts):
        ups = [link for link in self.links if ".up." in link.name]
        seen.append((max(shifts), [c.pass_index for link in ups for c in link.inbox.items if c.kind == "weights"]))
        move(self, env, shifts)

    monkeypatch.setattr(DriftWorld, "_move", recording_move)
    over = {"hardware.wafers": 40, "training.steps": 1}
    _, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", overrides=over), record=False)
    drift = fc.folding.drift
    assert not fc.plan.blocks_unfolded_in and len(drift.delays) == 2
    (world,) = drift.worlds
    assert sum(".up.l" in link.name for link in drift.links if drift.members[id(link)] == world) == 3
    pauses = sorted(d.point.c for d in drift.delays)
    assert len(seen) == 2
    for c, (_, passes) in zip(pauses, seen):
        assert all(p >= c for p in passes)
    assert all(n == 0 for n in drift._upcoming.values()) and all(n == 0 for n in drift._held.values())
    assert fc.events < 200_000


def test_a_recorded_run_drift_folds_and_places_each_worlds_spans_past_its_own_copies() -> None:
    """Recorded for traces and plots, Cerebras-GPT 13B on 13 wafers drift-folds as the plain run does, with the same
    result.json byte for byte.  Its drifting worlds' links recorded on their own axes; placed past their world's
    own block copies, every span of a pass both runs simulate lies where the every-block recorded run has it (to
    1e-9 of the step); placed past the pacing world's copies, they would be milliseconds off."""
    from wss.model.folding.folded_spans import UnfoldedSpans

    over = {**PINNED, "hardware.wafers": 13, "training.steps": 1}
    path = SCENARIOS / "cerebras_gpt_13b.yaml"
    recorded, rc = simulate_detailed(wss.load_scenario(path, overrides=over), record=True)
    plain, _ = simulate_detailed(wss.load_scenario(path, overrides=over), record=False)
    full, uc = simulate_detailed(wss.load_scenario(path, overrides={**over, "simulation.fold_micro_batches": False}),
                                 record=True, fold_layers=False)
    assert recorded.to_json() == plain.to_json()
    drift = rc.folding.drift
    assert drift.delays and set(drift.world_layers) == set(drift.worlds)

    def by_pass(cluster, placed, spans):
        out: dict[tuple, list[tuple[float, float]]] = {}
        for a, b, p, _ in placed.pass_spans(spans):
            q = cluster.program[p]
            out.setdefault((q.step, q.micro_batch, q.op, q.phase), []).append((a, b))
        return out

    placed, every = UnfoldedSpans(rc), UnfoldedSpans(uc)
    theirs = {link.name: link for link in uc.tree.links()}
    own, naive, compared = 0.0, 0.0, 0
    for link in rc.tree.links():
        if not link.world:
            continue
        want = by_pass(uc, every, theirs[link.name].spans)
        got = by_pass(rc, placed.in_world(drift.world_layers[link.world]), link.spans)
        pacing = by_pass(rc, placed, link.spans)
        for key, spans in got.items():
            if key in want:
                assert len(spans) == len(want[key])
                for (a, b), (x, y), (c, d) in zip(spans, want[key], pacing[key]):
                    own, naive = max(own, abs(a - x), abs(b - y)), max(naive, abs(c - x), abs(d - y))
                    compared += 1
    assert compared > 10_000
    assert own <= 1e-9 * full.step_time_s < 1e-4 < naive


def test_each_wafers_own_limited_store_drifts_with_it_and_folds_to_every_block_simulated() -> None:
    """Cerebras-GPT 13B on 13 wafers with every wafer's block inputs on a host store of 50 GB/s of its own (the shape
    of the ``activation-servers`` preset, a rate where forward blocks still repeat): a smaller shard's store is its
    own, so it drifts with its wafer; the drift fold holds, and every number equals every block of every wafer
    simulated (1,386,322 events; before, any limited store kept such a slot simulated in full: 336,155 events)."""
    over = {**PINNED, "hardware.wafers": 13, "training.steps": 1, "hardware.activation_store.bandwidth_Bps": 5e10}
    folded, fc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides=over),
                                   record=False)
    full, uc = simulate_detailed(wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", overrides={
        **over, "simulation.fold_micro_batches": False, "simulation.wafer_classes": False}), record=False,
        fold_layers=False)  # every wafer apart, every block: the stand-ins beside the busiest are checked too
    drift = fc.folding.drift
    assert isinstance(drift, DriftWorld) and drift.delays
    drifting = [w.name for w in drift.wafers]
    assert drifting and all(drift.ignores(f"{name}.store") for name in drifting)  # the stores' bandwidths drift too
    assert not drift.ignores(f"{fc.wafer.name}.store")  # the busiest wafer's is the pacing world's
    assert len(fc.simulated) == 3 and fc.events < uc.events / 10
    assert _same_numbers(folded, full) == {}


def test_a_drifting_stores_bandwidth_keeps_its_worlds_time_and_its_timer_moves_with_its_world() -> None:
    """A limited store's bandwidth has no process of its own: its timer's callback runs with none active.  In a
    drifting world the timer must move with that world at a pause, and the callback must read that world's clock
    (a pause of the pacing world alone leaves a transfer of the drifting world's store where it was)."""
    import simpy

    from wss.model.components.shared_bandwidth import SharedBandwidth
    from wss.model.folding.drift import _world_clock

    env = simpy.Environment()
    bw = SharedBandwidth(env, 1e9, "wafer.8.store")
    drift = DriftWorld([], {id(bw): 1}, [], [], [], lags=[0.0, 0.0])
    bw.clock = _world_clock(env, drift.lags, 1)
    done = bw.transfer(1e6)  # alone: 1 ms
    (timer,) = [ev for _, _, _, ev in env._queue]
    assert drift.world_of_event(timer) == 1
    drift._move(env, [5e-3, 0.0])  # the pacing world pauses 5 ms, the store's world not at all
    env.run(done)
    assert env._now == pytest.approx(1e-3)
    assert bw.busy_s == pytest.approx(1e-3) and bw.in_progress == 0
