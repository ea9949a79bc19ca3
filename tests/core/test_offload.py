"""Activation offload: block inputs leave the wafer during the forward pass and come back before each
block's recompute, over the wafer's own edge (shared with the weights and gradients)."""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS, ideal_hardware, scenario_dict

import wss
from wss.model.plan import make_plan, rank_candidates
from wss.model.plan.micro_batching import activation_elements_per_token, block_input_widths
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
    assert activation_elements_per_token(ops, "offload") == outside + 2 * D + max(per_block.values()) + working
    assert activation_elements_per_token(ops, "blocks") == outside + BLOCKS * D + max(per_block.values()) + working


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


def test_the_planner_chooses_offload_where_it_crosses_fewer_weights():
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml")
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
