"""Folding watches a run from outside (wss/model/folding/probe.py): the wafer calls no one at its pass boundaries,
a probe wraps them on the wafer it watches, a run that folds nothing attaches nothing, and the fold state lives in
the probe the runner owns, not in the wafer or the cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import simpy

import wss
from wss.model.components.wafer import KernelWork, PassTiming, Wafer, WaferSettings
from wss.model.folding.probe import FoldProbe, observe_passes
from wss.model.kernels.cycles import KernelCycles
from wss.model.program import Pass
from wss.model.sim.cluster import Cluster, run_cluster
from wss.model.sim.unfolded import run_unfolded

FC = Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml"


def _wafer() -> tuple[simpy.Environment, Wafer]:
    """A wafer running two on-wafer ops of 1 s each (forward, then backward), one micro-batch, no input wait."""
    env = simpy.Environment()
    settings = WaferSettings(clock_Hz=1e9, kernels=(KernelWork(1, 0.0, {1: KernelCycles(0.0, 0.0, 0, 0, 0)}),),
                             op_seconds={(0, 1): (1.0, 1.0)}, loss_op=0, ingress_buffer_bytes=1)
    program = [Pass(index=i, step=0, micro_batch=0, op=0, kernel=None, phase=phase, tokens=1, streamed=False,
                    waits_for_update=False)
               for i, phase in enumerate(("forward", "backward"))]
    ready = {(0, 0): env.event().succeed()}
    return env, Wafer(env, settings, program, ready, {(0, 0): env.event()})


def test_a_probe_sees_every_pass_boundary_in_order_after_the_wafer_begins_it():
    env, wafer = _wafer()
    seen: list[tuple[str, int, float, int]] = []
    observe_passes(wafer, lambda p: seen.append(("first", p.index, env.now, len(wafer.passes))))
    observe_passes(wafer, lambda p: seen.append(("second", p.index, env.now, wafer.current_pass)))
    env.run(env.process(wafer.run()))
    assert seen == [("first", 0, 0.0, 1), ("second", 0, 0.0, 0), ("first", 1, 1.0, 2), ("second", 1, 1.0, 1)]
    assert [t.start for t in wafer.passes] == [0.0, 1.0] and env.now == 2.0


def test_an_unwatched_wafer_runs_its_own_pass_boundary():
    env, wafer = _wafer()
    env.run(env.process(wafer.run()))
    assert "start_pass" not in vars(wafer) and isinstance(wafer.start_pass(wafer.program[0]), PassTiming)


def test_a_run_that_folds_nothing_attaches_nothing_and_one_that_folds_watches_its_wafer():
    plain = run_cluster(wss.plan(wss.load_scenario(FC)))
    assert plain.folding == FoldProbe() and "start_pass" not in vars(plain.wafer)
    steps = run_cluster(wss.plan(wss.load_scenario(FC, ["training.steps=12"])))
    assert steps.folding.step_fold is not None and "start_pass" in vars(steps.wafer)
    assert sorted(steps.folding.snapshots) == [(s, 0) for s in range(steps.plan.simulated_steps)]


def test_the_fold_state_is_the_probes_not_the_wafers_or_the_clusters():
    fields = {f.name for f in dataclasses.fields(Cluster)}
    assert "folding" in fields
    assert not fields & {"snapshots", "fold", "step_fold", "layer_points", "layer_snapshots", "layer_folds", "layers"}
    _, wafer = _wafer()
    assert not {"on_micro_batch_start", "on_marked_pass", "marked_passes"} & set(vars(wafer))


def test_an_unfolded_run_folding_micro_batches_marks_every_wafer_at_each_micro_batch_start():
    plan = wss.plan(wss.load_scenario(FC.parent / "gpt3_6.7b_sparse.yaml", [
        "hardware.wafers=4", "training.global_batch=256", "simulation.fold_wafers=false",
        "training.micro_batch=3", "training.activation_checkpointing=none",
        # the calibration and micro-batches this fold was found at (the planner now picks 2 micro-batches of 32)
        "hardware.wafer.kernel_efficiency=0.59", "hardware.runtime.step_overhead_s=0.084"]))
    cluster = run_unfolded(plan)
    folding = cluster.folding
    assert folding.fold is not None and set(folding.marks) == set(folding.snapshots)
    assert all(len(lengths) == len(cluster.wafers) for lengths in folding.marks.values())
    assert "start_pass" in vars(cluster.wafer)


def test_other_wafers_blocks_are_checked_as_they_reach_the_fold_point_not_after_the_run(monkeypatch):
    """Wafers apart, each other wafer's compared blocks are checked once both it and the representative have
    started the pass after them, so a try whose wafers have not settled stops there rather than at the end of the
    run.  GPT-3 175B on 192 wafers with wafer 17 1.1x slower, six blocks at the start, and no drift fold (which
    would stand for the wafers running ahead of the straggler): wafer 64 (under another root edge, behind the most
    buffers) has a first compared forward block shorter than the straggler's and its second already as long (it
    settled late), and the run stops in the forward passes, before a quarter of it (it ran to the end before the
    check was made there)."""
    from wss.model.folding.layer_fold import LayerFoldMismatch
    from wss.model.folding.run_plan import folding_plan

    monkeypatch.setattr("wss.model.sim.unfolded.drifting_wafers", lambda cluster, sizes: ([], frozenset()))

    s = wss.load_scenario(FC.parent / "gpt3_175b.yaml", {"faults.stragglers": [{"wafer": 17, "slowdown": 1.1}],
                                                         "hardware.activation_store.bandwidth_Bps": None})
    p = folding_plan(s, None)
    p = dataclasses.replace(p, layer_runs=tuple(dataclasses.replace(r, lead=2) for r in p.layer_runs))
    told: list[float] = []
    with pytest.raises(LayerFoldMismatch, match=r"^wafer\.64: blocks took .* the representative wafer's") as caught:
        run_unfolded(p, progress=told.append)
    assert caught.value.direction == "forward" and caught.value.settled_late and caught.value.step == 0
    assert 0 < max(told) < 0.25
