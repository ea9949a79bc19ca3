"""The analytic level works out per-plan figures once per model, not once per candidate it evaluates, and what it
keeps for later candidates (per size, per sweep, per segment) gives each candidate its own answer."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import wss
from wss.model.plan import plan_inputs
from wss.model.plan.analytic import model as analytic_model
from wss.model.plan.analytic import optimizer

REPO = Path(__file__).resolve().parents[2]


def test_block_inputs_are_worked_out_once_per_model(monkeypatch):
    """Every offload candidate's sends and returns read the block inputs; with a new micro-batch size per
    candidate, working them out each time was a fifth of a cold evaluation on GPT-3 175B/192."""
    inp = plan_inputs(wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml"), None)
    model = analytic_model.StepModel(inp.costing.model.scenario, inp.costing.model.ops, inp.costing.model.kernels,
                                     inp.costing.model.wafer_samples, inp.costing.model.jobs.optimizer)
    calls = []
    real = analytic_model.offloaded_block_inputs
    monkeypatch.setattr(analytic_model, "offloaded_block_inputs", lambda *a: calls.append(a) or real(*a))
    offload = [c for c in inp.candidates if c.checkpointing == "offload"]
    assert len({c.micro_batches for c in offload}) > 1
    first = [model.evaluate(c.micro_batches, c.checkpointing).step_time_s for c in offload]
    again = [model.evaluate(c.micro_batches, c.checkpointing).step_time_s for c in offload]
    assert len(calls) == 1 and first == again


def _fresh(model: analytic_model.StepModel) -> analytic_model.StepModel:
    return analytic_model.StepModel(model.scenario, model.ops, model.kernels, model.wafer_samples,
                                    model.jobs.optimizer)


@pytest.mark.parametrize("name", ["cerebras_gpt_13b", "mixtral_8x7b_4xcs3"])
def test_every_candidate_gets_its_own_estimate_whatever_was_evaluated_before(name):
    """What the model keeps per micro-batch size, per sweep and per segment (pass seconds, the sweeps' rows,
    the optimizer's queue of a sweep, the sends) is shared by later candidates: a cache keyed too coarsely
    would hand a candidate another's figure.  Each candidate on a model of its own, and every candidate on one
    model in order and in reverse, give the same estimates to the last bit.  Cerebras-GPT 13B has candidates
    with and without recompute at one size; Mixtral's offloaded block inputs slow the stream (an offload
    sweeper of its own)."""
    inp = plan_inputs(wss.load_scenario(REPO / "scenarios" / f"{name}.yaml"), None)
    base = inp.costing.model
    cands = [(c.micro_batches, c.checkpointing) for c in inp.candidates]
    sizes = {mode: {s for mbs, m in cands if m == mode for s in mbs} for mode in ("none", "blocks", "offload")}
    assert sizes["none"] & sizes["blocks"] and sizes["offload"]
    alone = [_fresh(base).evaluate(*c) for c in cands]
    one = _fresh(base)
    forward = [one.evaluate(*c) for c in cands]
    other = _fresh(base)
    backward = [other.evaluate(*c) for c in reversed(cands)][::-1]
    assert forward == alone and backward == alone


def test_the_sweeps_rows_are_the_schedules_figures():
    """The sweeps read each schedule's figures segment by segment (Columns.span, Sweeper.span): a span cached
    under another's key, or cut one pass off, would sweep other passes' figures."""
    inp = plan_inputs(wss.load_scenario(REPO / "scenarios" / "mixtral_8x7b_4xcs3.yaml"), None)
    model = _fresh(inp.costing.model)
    tokens = inp.candidates[0].micro_batches[0] * model.scenario.seq_len
    sched = model.schedule(True, offload=True)
    sweeper = model.sweeper(True, tokens, offload=True)
    assert sweeper is not model.sweeper(True, tokens)  # the block inputs matter: the offload rows are read
    compute, paced = model.pass_seconds(True, tokens)
    for a, b, _ in sched.segments[:5] + sched.segments[-5:]:
        cols = sweeper.columns.span(a, b)
        assert cols[0] == sched.stream_s[a:b].tolist() and cols[3] == sched.up_chunks[a:b].tolist()
        assert cols[5] == sched.lead_cap[a:b].tolist()  # the cap as each pass begins
        assert cols[6] == [float(sched.lead_cap[(i + 1) % len(sched.lead_cap)]) for i in range(a, b)]
        # the shortest from a weight kernel's pass to the next (kernel_pass_min_s): weight kernels only
        floor = model.scenario.hardware.runtime.kernel_pass_min_s
        assert cols[12] == [floor if k >= 0 else 0.0 for k in sched.kernel[a:b].tolist()]
        assert cols[13] == sched.takes_input[a:b].tolist()
        assert cols[14] == [[float(w[i]) for w in sched.wire] for i in range(a, b)]
        # the short way of the recursion: passes that stream, prefetch and send up nothing, and wait for no readying
        assert cols[15] == [not (cols[1][j] or cols[3][j] or cols[7][j] or cols[11][j] or cols[12][j])
                            for j in range(b - a)]
        assert sweeper.span(a, b) == (compute[a:b].tolist(), paced[a:b].tolist(),
                                      (sched.return_s[a:b] * tokens).tolist())
    assert any(model.columns(True, True).span(a, b)[15][0] for a, b, _ in sched.segments)


def test_pass_seconds_are_kept_per_schedule_and_size():
    """Each micro-batch size's pass seconds are worked out once per schedule (with recompute or not) and read by
    the sweeps, the sends and the forward starts; asked in any order they are the ones a model asked only for
    them gives."""
    inp = plan_inputs(wss.load_scenario(REPO / "scenarios" / "cerebras_gpt_13b.yaml"), None)
    base = inp.costing.model
    model = _fresh(base)
    keys = [(True, 2048), (False, 2048), (True, 4096), (False, 4096)]
    got = {k: model.pass_seconds(*k) for k in keys}
    for k in keys:
        assert model.pass_seconds(*k) is got[k]  # kept
        c, paced = _fresh(base).pass_seconds(*k)
        assert c.tolist() == got[k][0].tolist() and paced.tolist() == got[k][1].tolist()
        assert not got[k][0].flags.writeable  # shared: nobody may change them
    assert got[(True, 2048)][0].size > got[(False, 2048)][0].size  # the recomputes are passes of their own


@pytest.mark.parametrize("clipping", ["global_norm", "none"])
def test_the_updates_after_the_flash_channel_add_up_in_order(clipping):
    """Jobs.after_channel adds the flash reads and the work after the last flash-resident update with cumulative
    sums; they must add in the order a loop over the updates would (Brain 120T: flash- and DRAM-resident
    kernels; without clipping the updates run in the gradients' order, with it in the model's)."""
    raw = yaml.safe_load((REPO / "scenarios" / "brain_120t.yaml").read_text())
    raw.setdefault("training", {})["gradient_clipping"] = clipping
    inp = plan_inputs(wss.load_scenario(raw), None)
    model = _fresh(inp.costing.model)
    jobs = model.jobs
    assert {k.tier for k in model.kernels} == {"dram", "flash"}
    order = jobs.update_order(model.schedule(True).backward_kernels)
    for n_mb in (1, 2):
        service, read = jobs.services("update", n_mb - 1, n_mb)
        reads = after = 0.0
        for k in order.tolist():
            if not model.kernels[k].owns_state:
                continue
            reads += float(read[k])
            after = float(service[k] - read[k]) if read[k] else after + float(service[k])
        assert jobs.after_channel(order, n_mb) == (reads, after)


def test_a_sweeps_optimizer_queue_is_kept_per_kind_of_job():
    """The optimizer's queue of a sweep is kept for every candidate whose micro-batch made that sweep: the first
    micro-batch's accumulations, a later one's, and the last one's updates (or norms) alone or after others each
    cost what they cost, whichever was asked first."""
    inp = plan_inputs(wss.load_scenario(REPO / "scenarios" / "cerebras_gpt_13b.yaml"), None)
    model = _fresh(inp.costing.model)
    sw = model.sweeper(True, 2048).sweep(0.0, 0.0)
    order = model.schedule(True).backward_kernels
    jobs = ["accumulate", model.jobs.last_kind()]
    asks = [(kind, m, n) for kind in jobs for n in (1, 2, 3) for m in range(n)]
    for kind, m, n in asks + asks[::-1]:
        direct = optimizer.fifo(sw.arrivals, model.jobs.services(kind, m, n)[0][order])
        assert model.fifo(sw, order, kind, m, n) == direct
    assert len({model.fifo(sw, order, *ask) for ask in asks}) > 2


def test_forward_starts_wait_for_each_weight_pass_to_be_readied_from_the_last_ones_start():
    """With kernel_pass_min_s the forward starts (clipping's yardstick; the sends with offload read the same) keep
    every weight kernel's pass at least the minimum after the last one began, and no more than that: work between
    them (attention, norms) counts towards it, as in the sweep and the simulator."""
    floor = 4e-4
    s = wss.load_scenario(REPO / "scenarios" / "bert_large.yaml", overrides={
        "training.global_batch": 16, "hardware.runtime.kernel_pass_min_s": floor})
    model = plan_inputs(s, None).costing.model
    tokens = 16 * s.seq_len
    _, starts = model.forward_starts(False, tokens)
    gaps = [b - a for a, b in zip(starts.tolist(), starts[1:].tolist())]
    assert min(gaps) == pytest.approx(floor, rel=1e-9)  # some passes wait: the minimum binds
    sched = model.schedule(False)
    _, paced = model.pass_seconds(False, tokens)
    took = [max(p, st) for p, st in zip(paced[sched.phase == 0].tolist(), sched.stream_s[sched.phase == 0].tolist())]
    weight = (sched.kernel[sched.phase == 0] >= 0).tolist()
    plain = [sum(took[:i]) for i in range(len(took)) if weight[i]]  # the starts if nothing waited
    for gap, a, b in zip(gaps, plain, plain[1:]):
        assert gap == pytest.approx(max(floor, b - a), rel=1e-9)  # only what the minimum asks beyond the work
