"""Grouped-query (and multi-query) attention and sliding windows, each count by hand from the shapes.

With ``h`` query heads of ``d_h`` and ``g`` key-value heads, the qkv matmul is ``(h + 2 g) d_h x d``:
weights, streamed bytes, gradients, MemoryX state and its FLOPs shrink with ``g``, and the attention op
keeps ``(h + 2 g) d_h + h`` elements per token (Q, K, V, softmax statistics).  The scores and context
still cost ``4 k h d_h`` (every query head meets every key it attends to).  A causal window of ``w``
keys leaves ``w (w + 1) / 2 + (s - w) w`` query-key pairs per sequence, ``k`` their mean per query.
"""

from __future__ import annotations

import pytest
from core_helpers import scenario_dict

import wss
from wss.model.machine.optimizer_costs import SCALAR_BYTES
from wss.model.plan.activation_sram import activation_elements_per_token
from wss.model.scenario.workload import ModelConfig
from wss.model.workload import StreamedKernel, WaferOp, expand_model

D, H, DH, DFF, V, S = 256, 8, 32, 512, 1000, 64
#: Adam's state per parameter: weight, gradient accumulator, m and v, fp32 (the blog's four scalars).
ADAM_SCALARS = 4


def model(**options) -> dict:
    block = {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": D, "n_heads": H, "d_ff": DFF,
             "causal": True, **options}
    layers = [{"kind": "embedding", "name": "embed", "vocab_size": V, "d_model": D}, block,
              {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": V}]
    return {"name": "gqa", "input": "tokens", "seq_len": S, "layers": layers}


def plan(**options):
    return wss.plan(scenario_dict(model=model(**options), global_batch=4, optimizer="adamw"))


def ops(seq: int = S, **options) -> list:
    return expand_model(ModelConfig.model_validate(model(**options)), 0.0, seq)


def kernel(p, name: str):
    return next(k for k in p.kernels if k.kernel.name == name)


@pytest.mark.parametrize("kv", [8, 4, 2, 1])
def test_grouped_query_attention_shrinks_the_key_value_projection(kv):
    full, gqa = plan(), plan(n_kv_heads=kv)
    q = H * DH
    rows = q + 2 * kv * DH
    b_w = 2  # fp16 weights down, fp16 gradients up (cs2-cluster defaults)
    for name in ("block.0.qkv", "block.1.qkv"):
        k = kernel(gqa, name)
        assert (k.kernel.out_features, k.kernel.in_features) == (rows, D)
        assert k.kernel.params == (H + 2 * kv) * DH * D
        assert k.stream_bytes == rows * D * b_w  # dense format: M K b_w per pass
        assert k.grad_bytes == rows * D * b_w
        assert k.state_bytes == rows * D * ADAM_SCALARS * SCALAR_BYTES
        assert k.kernel.dense_flops_per_token() == 2 * rows * D
    # Only qkv changes among the kernels; the KV part of the weights and of the optimizer's state goes with g.
    saved = 2 * 2 * (H - kv) * DH * D  # two blocks, K and V
    assert full.params - gqa.params == saved
    assert full.memoryx_state_bytes - gqa.memoryx_state_bytes == saved * ADAM_SCALARS * SCALAR_BYTES
    for a, b in zip(full.kernels, gqa.kernels, strict=True):
        if not a.kernel.name.endswith("qkv"):
            assert (a.kernel, a.stream_bytes, a.state_bytes, a.cycles) == (b.kernel, b.stream_bytes, b.state_bytes,
                                                                           b.cycles)


@pytest.mark.parametrize("kv", [4, 1])
def test_grouped_query_attention_keeps_the_score_work_and_stores_fewer_keys(kv):
    full, gqa = ops(), ops(n_kv_heads=kv)
    attn = next(op for op in gqa if op.name == "block.0.attention")
    keys = (S + 1) / 2
    assert attn.flops_per_token == 4.0 * keys * H * DH + 5.0 * H * keys  # unchanged by g
    assert attn.stored_elements_per_token == H * DH + 2 * kv * DH + H  # Q, K, V and softmax statistics
    # Per block: 2 (H - kv) DH fewer stored elements per token, in every checkpointing mode that keeps the block.
    fewer = 2 * (H - kv) * DH
    assert activation_elements_per_token(full, "none") - activation_elements_per_token(gqa, "none") == 2 * fewer
    assert activation_elements_per_token(full, "blocks") - activation_elements_per_token(gqa, "blocks") == fewer


def test_n_kv_heads_equal_to_n_heads_is_the_plain_block():
    assert ops(n_kv_heads=H) == ops()


def causal_pairs(s: int, w: int | None) -> float:
    """Query-key pairs of one sequence, counted one query at a time."""
    return float(sum(min(i, w) if w else i for i in range(1, s + 1)))


@pytest.mark.parametrize(("seq", "w"), [(64, 1), (64, 16), (64, 63), (64, 64), (2048, 512), (4096, 4096)])
def test_a_sliding_window_counts_the_pairs_it_leaves(seq, w):
    windowed = next(op for op in ops(seq, window=w) if op.name == "block.0.attention")
    causal = next(op for op in ops(seq) if op.name == "block.0.attention")
    keys = causal_pairs(seq, w) / seq
    assert keys == pytest.approx((w * (w + 1) / 2 + (seq - w) * w) / seq, rel=1e-15)
    assert windowed.flops_per_token == pytest.approx((4.0 * H * DH + 5.0 * H) * keys, rel=1e-15)
    # A window as long as the sequence is plain causal attention; a shorter one is less work.
    assert (windowed.flops_per_token == causal.flops_per_token) == (w == seq)
    assert windowed.flops_per_token <= causal.flops_per_token
    # wss stores no s x s scores (softmax statistics, recomputed in backward): the window saves no memory.
    assert windowed.stored_elements_per_token == causal.stored_elements_per_token


def test_a_window_changes_only_the_attention_ops_and_shortens_a_long_sequence_step():
    base, windowed = plan(), plan(window=8)
    changed = [a.name for a, b in zip(base.ops, windowed.ops, strict=True) if a != b]
    assert changed == ["block.0.attention", "block.1.attention"]
    assert base.sram_bytes_needed == windowed.sram_bytes_needed
    seconds = {op: s for (pos, _), s in windowed.wafer_op_seconds.items() for op in [windowed.ops[pos].name]}
    plain = {op: s for (pos, _), s in base.wafer_op_seconds.items() for op in [base.ops[pos].name]}
    assert seconds["block.0.attention"][0] < plain["block.0.attention"][0]


def test_grouped_query_attention_simulates():
    base = wss.simulate(scenario_dict(model=model(), global_batch=4, optimizer="adamw"))
    gqa = wss.simulate(scenario_dict(model=model(n_kv_heads=1), global_batch=4, optimizer="adamw"))
    assert gqa.memory.memoryx_state_bytes < base.memory.memoryx_state_bytes
    assert gqa.flops.dense_equivalent_per_step < base.flops.dense_equivalent_per_step
    assert 0 < gqa.step_time_s <= base.step_time_s


def test_the_attention_op_is_a_wafer_op_and_qkv_a_kernel():
    names = {op.name: type(op) for op in ops(n_kv_heads=2, window=16)}
    assert names["block.0.qkv"] is StreamedKernel and names["block.0.attention"] is WaferOp
