"""Transformer block options (parallel, gated FFN, post-norm), BERT's pooler and MLM transform, the new presets.

Every count here is done by hand from the shapes: parameters, forward FLOPs per token (``2 M K`` per
matmul plus the non-weight convention of ``wss.model.workload.builder``: layer norm 8 per element,
GELU 8, SiLU(gate) * up 5, residual 1, softmax 5 per score) and stored activation elements.
"""

from __future__ import annotations

import pytest
from core_helpers import scenario_dict

import wss
from wss.errors import ScenarioError
from wss.model.plan.activation_sram import activation_elements_per_token
from wss.model.scenario.workload import ModelConfig
from wss.model.workload import StreamedKernel, WaferOp, expand_model

D, H, DFF, V, S = 64, 4, 256, 500, 16


def block(**options) -> dict:
    return {"kind": "transformer_block", "name": "block", "d_model": D, "n_heads": H, "d_ff": DFF, **options}


def ops_of(*layers: dict, seq: int = S) -> list:
    model = ModelConfig.model_validate({"name": "m", "input": "tokens", "seq_len": seq, "layers": list(layers)})
    ops = expand_model(model, 0.0, seq)
    return [op for op in ops if op.name != "block.softmax_loss"]  # a model without a head closes with a loss


def names(ops) -> list[str]:
    return [op.name.split(".", 1)[1] if op.name.count(".") else op.name for op in ops]


def block_flops(ops) -> float:
    """Forward FLOPs per token of the ops of one block: matmuls at 2 M K plus the non-weight ops."""
    return sum(op.dense_flops_per_token() if isinstance(op, StreamedKernel) else op.flops_per_token for op in ops)


def stored(ops) -> int:
    return sum(op.stored_elements_per_token for op in ops)


ATTENTION = 4.0 * S * D + 5.0 * H * S  # scores + context (4 s h d_h, h d_h = D) and softmax (5 h s)
ATTN_WEIGHTS = 2 * (3 * D * D + D * D)  # qkv and attn_out, 2 FLOPs per weight


def test_default_block_is_unchanged():
    ops = ops_of(block())
    assert names(ops) == ["ln1", "qkv", "attention", "attn_out", "residual1", "ln2", "ffn_up", "gelu", "ffn_down",
                          "residual2"]
    assert block_flops(ops) == ATTN_WEIGHTS + 2 * 2 * D * DFF + ATTENTION + 2 * 8 * D + 8 * DFF + 2 * D
    assert stored(ops) == D + D + (3 * D + H) + D + D + D + DFF + DFF


def test_parallel_block_has_one_norm_and_one_residual():
    seq, par = ops_of(block()), ops_of(block(parallel=True))
    assert names(par) == ["ln1", "qkv", "attention", "attn_out", "ffn_up", "gelu", "ffn_down", "residual"]
    # Same four matrices, same shapes.
    shapes = [(k.name, k.out_features, k.in_features) for k in par if isinstance(k, StreamedKernel)]
    assert shapes == [(k.name, k.out_features, k.in_features) for k in seq if isinstance(k, StreamedKernel)]
    # One 8 d norm less; the residual adds both branches (2 d) as the two residuals did.
    assert block_flops(par) == ATTN_WEIGHTS + 2 * 2 * D * DFF + ATTENTION + 8 * D + 8 * DFF + 2 * D
    assert block_flops(seq) - block_flops(par) == 8 * D
    # One norm's stored input less, and ffn_up reads qkv's stored copy of the normalised input.
    assert stored(seq) - stored(par) == 2 * D
    assert next(k for k in par if k.name == "block.ffn_up").stored_elements_per_token == 0


def test_swiglu_has_three_matrices_with_roles():
    ops = ops_of(block(ffn="swiglu"))
    assert names(ops) == ["ln1", "qkv", "attention", "attn_out", "residual1", "ln2", "ffn_gate", "ffn_up", "swiglu",
                          "ffn_down", "residual2"]
    ffn = {k.name: (k.out_features, k.in_features) for k in ops if isinstance(k, StreamedKernel)}
    assert (ffn["block.ffn_gate"], ffn["block.ffn_up"], ffn["block.ffn_down"]) == ((DFF, D), (DFF, D), (D, DFF))
    # 3 matrices of d x d_ff; SiLU(gate) * up is 5 FLOPs per element of d_ff.
    assert block_flops(ops) == ATTN_WEIGHTS + 3 * 2 * D * DFF + ATTENTION + 2 * 8 * D + 5 * DFF + 2 * D
    gate = next(op for op in ops if op.name == "block.swiglu")
    assert isinstance(gate, WaferOp) and gate.stored_elements_per_token == 2 * DFF  # gate and up outputs
    # The FFN input is kept once (by the gate), the product's output once (by ffn_down).
    assert stored(ops) == D + D + (3 * D + H) + D + D + D + 0 + 2 * DFF + DFF


def test_swiglu_gate_takes_its_own_sparsity():
    raw = scenario_dict(
        model={"name": "m", "seq_len": S, "layers": [block(ffn="swiglu")]},
        workload={"sparsity": {"ffn_gate": 0.75, "default": 0.5}},
    )
    plan = wss.plan(raw)
    density = {kp.kernel.name: kp.kernel.density for kp in plan.kernels}
    assert density == {"block.qkv": 0.5, "block.attn_out": 0.5, "block.ffn_gate": 0.25, "block.ffn_up": 0.5,
                       "block.ffn_down": 0.5}


def test_ffn_gate_role_needs_a_gated_ffn():
    model = {"name": "m", "seq_len": S, "layers": [block()]}
    with pytest.raises(ScenarioError, match=r"sparsity\.ffn_gate"):
        wss.load_scenario(scenario_dict(model=model, workload={"sparsity": {"ffn_gate": 0.5}}))
    layer = {"name": "m", "seq_len": S, "layers": [block(sparsity={"ffn_gate": 0.5})]}
    with pytest.raises(ScenarioError, match=r"sparsity\.ffn_gate"):
        wss.load_scenario(scenario_dict(model=layer))


def test_post_norm_moves_the_norms_only():
    pre, post = ops_of(block()), ops_of(block(norm="post"))
    assert names(post) == ["qkv", "attention", "attn_out", "residual1", "ln1", "ffn_up", "gelu", "ffn_down",
                           "residual2", "ln2"]
    assert sorted(pre, key=lambda op: op.name) == sorted(post, key=lambda op: op.name)
    for mode in ("none", "blocks"):
        assert activation_elements_per_token(pre, mode) == activation_elements_per_token(post, mode)


@pytest.mark.parametrize(("options", "field"), [({"parallel": True, "norm": "post"}, "parallel"),
                                                ({"ffn": "relu"}, "ffn"), ({"norm": "mid"}, "norm")])
def test_invalid_block_options_name_the_field(options, field):
    model = {"name": "m", "seq_len": S, "layers": [block(**options)]}
    with pytest.raises(ScenarioError) as err:
        wss.load_scenario(scenario_dict(model=model))
    assert field in str(err.value)


def test_bert_pooler_and_mlm_transform():
    layers = [
        {"kind": "embedding", "name": "embed", "vocab_size": V, "d_model": D},
        block(norm="post"),
        {"kind": "pooler", "name": "pooler", "d_model": D},
        {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": V, "tied": True, "transform": True},
    ]
    ops = ops_of(*layers)
    tail = [op for op in ops if op.layer in ("pooler", "head")]
    assert names(tail) == ["dense", "tanh", "classifier", "softmax_loss", "transform", "gelu", "ln", "proj",
                           "softmax_loss"]
    shapes = {k.name: (k.out_features, k.in_features) for k in tail if isinstance(k, StreamedKernel)}
    assert shapes == {"pooler.dense": (D, D), "pooler.classifier": (2, D), "head.transform": (D, D),
                      "head.proj": (V, D)}
    pooler = [op for op in tail if op.layer == "pooler"]
    assert block_flops(pooler) == 2 * D * D + D + 2 * 2 * D + 5 * 2  # dense, tanh, d -> 2, softmax + loss
    head = [op for op in tail if op.layer == "head"]
    assert block_flops(head) == 2 * D * D + 8 * D + 8 * D + 2 * V * D + 5 * V
    proj = next(k for k in tail if k.name == "head.proj")
    assert proj.is_output and proj.tied_to == "embed.tokens"
    assert not any(k.is_output for k in tail if isinstance(k, StreamedKernel) and k.name != "head.proj")
    model = {"name": "b", "seq_len": S, "layers": layers}
    assert wss.simulate(scenario_dict(model=model, global_batch=2)).step_time_s > 0


def params(model: str) -> int:
    s = wss.load_scenario(scenario_dict(model=model, global_batch=1))
    ops = expand_model(s.workload.model, 0.0, 1)
    return sum(k.params for k in ops if isinstance(k, StreamedKernel) and k.tied_to is None)


def test_preset_parameter_counts():
    d = 4096
    # GPT-J 6B: untied 50400 x 4096 embedding and head; 28 blocks of 4 d^2 (attention) + 2 x 4 d^2 (FFN 16384).
    assert params("gpt-j-6b") == 2 * 50400 * d + 28 * (4 * d * d + 2 * d * 16384) == 6_050_021_376
    # Llama-2 7B: untied 32000 x 4096 tables; 32 blocks of 4 d^2 + 3 d 11008 (SwiGLU).
    assert params("llama-2-7b") == 2 * 32000 * d + 32 * (4 * d * d + 3 * d * 11008) == 6_738_149_376
    # ESM-2 35M: tied 33 x 480 table; 12 blocks of 12 d^2; the MLM transform d^2.
    assert params("esm-2-35m") == 33 * 480 + 12 * 12 * 480 * 480 + 480 * 480 == 33_423_840
    # BERT-Large: tied 30522 x 1024 and 512 x 1024 tables; 24 blocks of 12 d^2; pooler d^2 + 2 d; transform d^2.
    b = 1024
    assert params("bert-large") == (30522 + 512) * b + 24 * 12 * b * b + b * b + 2 * b + b * b == 335_867_904


@pytest.mark.parametrize(("model", "check"), [
    ("gpt-j-6b", lambda k: k.parallel and k.ffn == "gelu" and k.causal and k.head_width == 256),
    ("llama-2-7b", lambda k: not k.parallel and k.ffn == "swiglu" and k.causal and k.ffn_width == 11008),
    ("bert-large", lambda k: k.norm == "post" and not k.causal),
])
def test_preset_block_options(model, check):
    s = wss.load_scenario(scenario_dict(model=model, global_batch=1))
    blocks = [layer for layer in s.workload.model.layers if layer.kind == "transformer_block"]
    assert len(blocks) == 1 and check(blocks[0])
    embed = s.workload.model.layers[0]
    assert embed.max_positions == (512 if model == "bert-large" else 0)  # rotary: no learned table


def test_a_layer_kind_the_builder_does_not_know_is_an_error_naming_it():
    """A kind added to the scenario's Layer union without a rule in the builder must not vanish from the work."""
    from typing import Literal

    from wss.model.scenario.workload import _LayerBase

    class Mystery(_LayerBase):
        kind: Literal["mystery"]

    layer = Mystery(kind="mystery", name="odd")
    model = ModelConfig.model_construct(name="m", input="features", seq_len=1, layers=[layer])
    with pytest.raises(NotImplementedError, match=r"layer kind 'mystery' \(Mystery, layer 'odd'\)"):
        expand_model(model, 0.0, 1)
