"""Causal attention: only the on-wafer attention work shrinks, to the s (s + 1) / 2 query-key pairs a mask leaves.

Per token, full attention costs ``4 s h d_h`` (scores and context) plus ``5 h s`` (softmax) FLOPs
forward; causal attention visits ``(s + 1) / 2`` keys per query on average, so both terms scale by
``(s + 1) / (2 s)``.  Weights, bytes, MemoryX state and the activations kept do not change.
"""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS, scenario_dict

import wss
from wss.errors import ScenarioError
from wss.model.workload import WaferOp

D, HEADS, D_HEAD, VOCAB, SEQ = 128, 4, 32, 1000, 64


def tiny_gpt(causal: bool | None, seq: int = SEQ) -> dict:
    block = {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": D, "n_heads": HEADS}
    if causal is not None:
        block["causal"] = causal
    layers = [
        {"kind": "embedding", "name": "embed", "vocab_size": VOCAB, "d_model": D},
        block,
        {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": VOCAB, "tied": True},
    ]
    model = {"name": "tiny-gpt", "input": "tokens", "seq_len": seq, "layers": layers}
    return scenario_dict(model=None, global_batch=4, optimizer="adamw", workload={"model": model})


def attention_ops(plan) -> list[WaferOp]:
    return [op for op in plan.ops if isinstance(op, WaferOp) and op.name.endswith(".attention")]


@pytest.mark.parametrize("seq", [1, 2, 64, 2048])
def test_causal_attention_counts_the_pairs_the_mask_leaves(seq):
    full, causal = wss.plan(tiny_gpt(False, seq)), wss.plan(tiny_gpt(True, seq))
    attn = HEADS * D_HEAD
    for f, c in zip(attention_ops(full), attention_ops(causal), strict=True):
        assert f.flops_per_token == 4.0 * seq * attn + 5.0 * HEADS * seq
        # s (s + 1) / 2 pairs per sequence over s tokens: (s + 1) / 2 keys per query, exactly
        assert c.flops_per_token == (4.0 * attn + 5.0 * HEADS) * (seq + 1) / 2
        assert c.flops_per_token / f.flops_per_token == pytest.approx((seq + 1) / (2 * seq), rel=1e-15)
        assert (c.stored_elements_per_token, c.backward_factor) == (f.stored_elements_per_token, f.backward_factor)
    assert len(attention_ops(full)) == 2


def test_only_the_attention_op_changes():
    full, causal = wss.plan(tiny_gpt(False)), wss.plan(tiny_gpt(True))
    changed = [f.name for f, c in zip(full.ops, causal.ops, strict=True) if f != c]
    assert changed == ["block.0.attention", "block.1.attention"]
    for a, b in zip(full.kernels, causal.kernels, strict=True):
        assert a.kernel == b.kernel and a.stream_bytes == b.stream_bytes and a.grad_bytes == b.grad_bytes
        assert a.state_bytes == b.state_bytes and a.cycles == b.cycles
    assert full.memoryx_state_bytes == causal.memoryx_state_bytes
    assert full.sram_bytes_needed == causal.sram_bytes_needed


def test_causal_attention_removes_exactly_its_share_of_the_steps_flops():
    """Forward + backward (x 3) of the attention FLOPs the mask removes, in both FLOP counts; bytes do not move."""
    full, causal = wss.simulate(tiny_gpt(False)), wss.simulate(tiny_gpt(True))
    assert causal.memory.wafer_sram_total_bytes == full.memory.wafer_sram_total_bytes
    tokens = 4 * SEQ
    per_token = (4.0 * HEADS * D_HEAD + 5.0 * HEADS) * (SEQ - (SEQ + 1) / 2)  # one block, forward
    removed = 2 * 3 * per_token * tokens  # two blocks, forward + backward (twice forward), no recompute
    assert wss.plan(tiny_gpt(True)).checkpointing == "none"
    assert full.flops.executed_per_step - causal.flops.executed_per_step == pytest.approx(removed, rel=1e-12)
    assert full.flops.dense_equivalent_per_step - causal.flops.dense_equivalent_per_step == pytest.approx(
        removed, rel=1e-12
    )
    assert full.link_bytes == causal.link_bytes
    assert causal.step_time_s <= full.step_time_s


def test_causal_is_off_by_default_on_in_decoder_presets_and_off_in_encoders():
    assert wss.plan(tiny_gpt(None)).ops == wss.plan(tiny_gpt(False)).ops
    from wss.model.scenario.presets import list_presets

    def blocks(model):
        s = wss.load_scenario({"name": "t", "hardware": {"preset": "cs2-cluster"}, "workload": {"model": model},
                               "training": {"global_batch": 8}})
        return [layer for layer in s.workload.model.layers if layer.kind in ("transformer_block", "dit_block")]

    # Encoders, vision and diffusion transformers attend to every token.
    encoders = {"bert-large", "esm-2-35m", "vit-base-16", "dit-xl-2", "dit-2b"}
    for model in list_presets()["model"]:
        bs = blocks(model)
        if bs:
            assert all(b.causal == (model not in encoders) for b in bs), model
    off = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", ["workload.model.layers.1.causal=false"])
    assert not off.workload.model.layers[1].causal


def test_causal_must_be_a_boolean_and_only_on_blocks():
    raw = tiny_gpt(None)
    raw["workload"]["model"]["layers"][1]["causal"] = "sometimes"
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(raw)
    assert [p.path for p in info.value.problems] == ["workload.model.layers.1.causal"]
    raw = tiny_gpt(None)
    raw["workload"]["model"]["layers"][2]["causal"] = True
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(raw)
    assert [(p.path, p.message) for p in info.value.problems] == [("workload.model.layers.2.causal", "unknown field")]


def test_numerics_still_refuse_causal_blocks():
    raw = tiny_gpt(True)
    raw["numerics"] = {"enabled": True}
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(raw)
    assert [p.path for p in info.value.problems] == ["numerics.enabled"]

