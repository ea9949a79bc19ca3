"""Activation offload: block inputs leave the wafer during the forward pass and come back before each
block's recompute, over the wafer's own edge (shared with the weights and gradients)."""

from __future__ import annotations

import numpy as np
import pytest
from core_helpers import SCENARIOS, ideal_hardware, scenario_dict

import wss
from wss.model.plan import make_plan, rank_candidates
from wss.model.plan.activation_sram import activation_elements_per_token, block_input_widths
from wss.model.plan.analytic import StepModel
from wss.model.plan.analytic.returns import WIRE, returns_matter, wire_figures
from wss.model.plan.analytic.sends import send_waits
from wss.model.plan.analytic.sweep import Columns, Sweeper
from wss.model.workload import WaferOp

D, BLOCKS, SEQ = 256, 4, 64
TINY = {"name": "tiny-gpt", "input": "tokens", "seq_len": SEQ, "layers": [
    {"kind": "embedding", "name": "embed", "vocab_size": 512, "d_model": D, "max_positions": SEQ},
    {"kind": "transformer_block", "name": "block", "repeat": BLOCKS, "d_model": D, "n_heads": 4, "d_ff": 4 * D},
    {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": 512, "tied": True},
]}


def _raw(mode: str, micro_batch: int = 8, **over) -> dict:
    return scenario_dict(model=TINY, global_batch=16, steps=2, optimizer="adamw",
                         training={"activation_checkpointing": mode, "micro_batch": micro_batch}, **over)


def test_sram_holds_two_block_inputs_and_one_block():
    """Offload keeps two block inputs (the block's own and the one before it) beside the block's activations,
    block checkpointing every block input; the peak is the larger of a block's recompute and the loss (the
    logits and the head's input, where offload holds one block input: the last block's, arriving)."""
    plan = make_plan(wss.load_scenario(_raw("offload")))
    ops = plan.ops
    per_block: dict[int, int] = {}
    outside = 0
    for op in ops:
        if op.block is None:
            outside += op.stored_elements_per_token
        else:
            per_block[op.block] = per_block.get(op.block, 0) + op.stored_elements_per_token
    working = max(op.working_elements_per_token for op in ops if isinstance(op, WaferOp))
    widths = block_input_widths(ops)
    assert widths == dict.fromkeys(range(BLOCKS), D)
    block = max(per_block.values())
    assert activation_elements_per_token(ops, "offload") == max(2 * D + block, D + outside + working)
    assert activation_elements_per_token(ops, "blocks") == BLOCKS * D + max(block, outside + working)


def test_offload_moves_every_block_input_out_and_back_once_per_micro_batch():
    r = wss.simulate(_raw("offload"))
    blocks = wss.simulate(_raw("blocks"))
    act = BLOCKS * 8 * SEQ * D * 2  # per micro-batch: every block's input, fp16
    per_step = 2 * act  # two micro-batches of 8
    assert r.link_bytes["activations->wafer"].per_link_bytes == pytest.approx(per_step)
    up = r.link_bytes["wafer->swarmx.l1"].per_link_bytes - blocks.link_bytes["wafer->swarmx.l1"].per_link_bytes
    assert up == pytest.approx(per_step)  # written out beside the gradients, which stop at the wafer's edge
    assert r.link_bytes["swarmx->memoryx"] == blocks.link_bytes["swarmx->memoryx"]
    assert r.memory.activation_checkpointing == "offload"
    assert "activations->wafer" not in blocks.link_bytes


def test_on_a_stream_bound_edge_the_returns_cost_their_bytes_over_the_edge():
    """Everything but the wafer's edge is instant: the edge carries the weights down and the returning block
    inputs, one wire, so offloading adds about the returns' bytes over its bandwidth to the step."""
    edge = 2e9
    hw = ideal_hardware(wafer={"io_bandwidth_Bps": edge}, swarmx={"link_bandwidth_Bps": 1e18, "hop_latency_s": 0.0})
    hw["wafer"]["clock_Hz"] = 1e11  # the fastest clock a scenario may give: compute is short beside the edge
    off = wss.simulate(_raw("offload", hardware=hw))
    blk = wss.simulate(_raw("blocks", hardware=hw))
    returns = off.link_bytes["activations->wafer"].per_link_bytes
    assert off.step_time_s - blk.step_time_s == pytest.approx(returns / edge, rel=0.05)
    # The analytic level follows the returns pass by pass on the shared wire: here it is the simulation.
    for raw, sim in ((_raw("offload", hardware=hw), off), (_raw("blocks", hardware=hw), blk)):
        assert wss.estimate(raw).step_time_s == pytest.approx(sim.step_time_s, rel=1e-9)


def test_the_planner_chooses_offload_where_it_crosses_fewer_weights():
    # With a store that keeps up with the wafer's edge (the cluster's activation servers, slower, tip it to blocks).
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", {"hardware.activation_store.preset": "host-unlimited"})
    ranked = rank_candidates(s)
    assert ranked[0].checkpointing == "offload" and len(ranked[0].micro_batches) == 1
    best_blocks = min((c for c in ranked if c.checkpointing == "blocks"), key=lambda c: c.step_time_s)
    assert len(best_blocks.micro_batches) > 1  # without offload the 45 samples do not fit at once
    from wss.model.plan.search import forced_scenario

    assert wss.simulate(s).step_time_s < wss.simulate(forced_scenario(s, best_blocks)).step_time_s


@pytest.mark.parametrize("buffer", [2**12, 2**16, 2**20, 2**27])
def test_offload_never_deadlocks_whatever_the_buffers(buffer):
    hw = {"wafer": {"ingress_buffer_bytes": buffer}, "swarmx": {"port_buffer_bytes": buffer}}
    r = wss.simulate(_raw("offload", micro_batch=4, hardware=hw))
    assert r.step_time_s > 0 and r.memory.micro_batches == 4


# ------------------------------------------------------------------------------------ the analytic level


def test_the_analytic_level_brings_each_block_input_back_one_block_ahead_of_its_recompute():
    """The store sends the first recomputed block's input as the forward pass ends and each later one when the
    wafer takes the one before it (its intake holds one); every recompute waits for its own."""
    plan = make_plan(wss.load_scenario(_raw("offload")))
    model = StepModel.of_plan(plan)
    sched = model.schedule(True, offload=True)
    edge = model.path.edge_Bps
    first_backward = int(np.flatnonzero(sched.phase != 0)[0])
    takes = np.flatnonzero(sched.takes_input).tolist()
    assert [int(plan.ops[sched.pos[i]].block) for i in takes] == list(range(BLOCKS - 1, -1, -1))
    assert all(sched.phase[i] == 1 for i in takes)
    starts = np.flatnonzero(sched.return_s).tolist()
    assert starts == [first_backward, *takes[:-1]]  # the last recompute (block 0) has nothing left to fetch
    assert sched.return_s[starts] == pytest.approx(D * 2 / edge)  # one fp16 block input per token
    assert not model.schedule(True).return_s.any() and not model.schedule(True).takes_input.any()


def test_while_block_inputs_come_back_the_weights_lose_the_wire_one_activation_chunk_in_turn():
    """Per pass: an edge-bound stream (``e = s``) yields an activation chunk ``a`` after each of its chunks;
    a stream paced upstream (``s - e >= a``) leaves a gap the chunk fits in; a pass with nothing to stream
    takes the figures of the next that streams (wrapping round, as micro-batches repeat)."""
    stream = np.array([4.0, 0.0, 8.0, 0.0])  # chunk times 1 and 2 (two and four chunks); two non-weight passes
    chunks = np.array([4, 0, 4, 0])
    edge = 100.0
    out = wire_figures(stream, chunks, np.array([400.0, 0.0, 400.0, 0.0]), edge, 0.25)  # e = 1 in both
    k1, k2, q, r, share = (out[c] for c in WIRE)
    assert (k1[0], k2[0], q[0], r[0], share[0]) == pytest.approx((0.25, 1.0, 0.8, 0.2, 1.0))
    assert (k1[2], k2[2], q[2], r[2], share[2]) == pytest.approx((0.0, 0.0, 1.0, 0.5, 0.5))
    assert [x[1] for x in (k1, k2, q, r, share)] == pytest.approx([x[2] for x in (k1, k2, q, r, share)])
    assert [x[3] for x in (k1, k2, q, r, share)] == pytest.approx([x[0] for x in (k1, k2, q, r, share)])


def test_block_inputs_that_fit_in_the_streams_gaps_in_time_change_no_sweep():
    """MemoryX's network paces the stream and the edge is fast: an activation chunk fits in the gap after each
    weight chunk and every block input is back long before its recompute.  The offload sweeper is then the one
    without (shared, as fast), and the recursion with the returns would give the same sweep."""
    raw = _raw("offload", hardware=ideal_hardware(memoryx={"network_bandwidth_Bps": 1e9}))
    plan = make_plan(wss.load_scenario(raw))
    model = StepModel.of_plan(plan)
    tokens = plan.tokens_per_micro_batch[0]
    sched = model.schedule(True, offload=True)
    plain = model.sweeper(True, tokens)
    assert not returns_matter(sched.wire, sched.return_s * tokens, sched.takes_input, plain.compute)
    assert model.sweeper(True, tokens, offload=True) is plain
    forced = Sweeper(sched, Columns(sched), plain.compute, plain.paced, sched.return_s * tokens, plain)
    a, b = forced.sweep(0.0, 0.0), plain.sweep(0.0, 0.0)
    assert (a.duration, a.lead_out, a.lag_out, a.held) == (b.duration, b.lead_out, b.lag_out, 0.0)
    assert wss.estimate(raw).step_time_s == pytest.approx(wss.simulate(raw).step_time_s, rel=1e-9)
    # Edge-bound (Mixtral's experts on 4 CS-3): they do matter, and the sweeper is one of its own.
    mixtral = make_plan(wss.load_scenario(SCENARIOS / "mixtral_8x7b_4xcs3.yaml"))
    moe = StepModel.of_plan(mixtral)
    size = mixtral.tokens_per_micro_batch[0]
    assert moe.sweeper(True, size, offload=True) is not moe.sweeper(True, size)


def test_a_forward_pass_waits_for_each_block_input_to_leave_sram():
    """SRAM holds one outgoing block input: where a block's input takes longer on the edge than the block's
    forward pass, each later block starts late by the difference (the first by that less what the buffer in
    front of the edge and the wire hold); where it takes less, nothing waits."""
    blocks, per = 5, 10  # blocks of 10 forward passes of 1 ms, a block input of 3 ms on the edge
    pos = np.arange(blocks * per + 2)  # and two passes after the blocks (the head, the loss)
    phase = np.zeros(pos.size, dtype=np.int64)
    took = np.full(pos.size, 1e-3)
    inputs = {b * per: 3e5 for b in range(blocks)}  # bytes per token
    edge, tokens = 1e9, 100  # 30 MB per block input: 30 ms on the edge
    args = (pos, phase, took, inputs, tokens, edge)
    held = (2 + 1) * 3.75e6 / edge  # a 4 MB buffer admits two chunks of 3.75 MB; one more is on the wire
    assert send_waits(*args, 4_000_000, 3.75e6) == pytest.approx((blocks - 1) * 20e-3 - held)
    assert send_waits(*args, 100_000_000, 3.75e6) == pytest.approx(0.0)  # all but the last block buffered
    slow = np.full(pos.size, 4e-3)  # 40 ms blocks: each input has left before the next block
    assert send_waits(pos, phase, slow, inputs, tokens, edge, 4_000_000, 3.75e6) == 0.0


def test_the_analytic_level_prices_the_block_inputs_leaving_in_the_forward_pass():
    """90%-sparse GPT-3 6.7B, one offloaded micro-batch of 64 sequences on a CS-2: a block input takes twice as
    long on the edge as the block's forward pass, which waits about 2.7 ms a block for it (the edge is
    idle for the rest of the step); priced over the whole micro-batch the sends looked free."""
    s = wss.load_scenario(SCENARIOS / "gpt3_6.7b_sparse.yaml",
                          {"training.activation_checkpointing": "offload", "training.micro_batch": 64})
    est, sim = wss.estimate(s), wss.simulate(s)
    assert sim.breakdown_s["offload"] > 0.05  # 86 ms at the refitted kernel efficiency (0.35)
    assert est.breakdown_s["offload"] == pytest.approx(sim.breakdown_s["offload"], rel=0.01)
    assert est.step_time_s == pytest.approx(sim.step_time_s, rel=0.01)
