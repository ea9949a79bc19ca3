"""Vision and diffusion transformer layers (ViT, DiT): every count done by hand from the shapes.

Parameters, forward FLOPs per token (``2 M K`` per matmul, a per-sample kernel's ``2 M K`` per sample
spread over the sample's ``s`` tokens; the non-weight conventions of ``wss.model.workload.vision``),
stored activation elements, streamed bytes, optimizer state, cycles and the step's FLOPs.
"""

from __future__ import annotations

import math

import pytest
from core_helpers import scenario_dict

import wss
from wss.model.kernels.cycles import kernel_cycles
from wss.model.plan.activation_sram import activation_elements_per_token, block_input_widths
from wss.model.scenario import PRECISION_BYTES
from wss.model.scenario.workload import ModelConfig
from wss.model.workload import StreamedKernel, WaferOp, expand_model

D, H, DFF, C = 64, 4, 256, 10           # width, heads, FFN, classes
IMAGE, P, CH = 32, 8, 3                  # a 32 x 32 x 3 image in 8 x 8 patches: 16 patches
PATCHES = (IMAGE // P) ** 2
F = 32                                   # the timestep's sinusoidal features


def patch(**options) -> dict:
    return {"kind": "patch_embedding", "name": "patch", "image_size": IMAGE, "patch_size": P, "in_channels": CH,
            "d_model": D, **options}


def block(kind: str = "transformer_block", **options) -> dict:
    return {"kind": kind, "name": "block", "d_model": D, "n_heads": H, "d_ff": DFF, **options}


def vit(**head) -> dict:
    return {"name": "vit", "input": "image", "layers": [
        patch(class_token=True), block(), {"kind": "classification_head", "name": "head", "d_model": D, "classes": C,
                                           **head}]}


def dit(modulation: str = "adaln_zero", blocks: int = 1) -> dict:
    return {"name": "dit", "input": "latent", "layers": [
        patch(in_channels=4, positions="fixed"),
        {"kind": "timestep_embedding", "name": "t", "d_model": D, "frequency_dim": F},
        {"kind": "label_embedding", "name": "y", "d_model": D, "classes": C},
        block("dit_block", modulation=modulation, repeat=blocks),
        {"kind": "diffusion_head", "name": "final", "d_model": D, "patch_size": P}]}


def ops_of(model: dict) -> tuple[list, int]:
    m = ModelConfig.model_validate(model)
    s = m.patch_tokens
    assert s is not None
    return expand_model(m, 0.0, s), s


def of_layer(ops: list, layer: str) -> list:
    return [op for op in ops if op.layer == layer]


def flops(ops: list) -> float:
    return sum(op.dense_flops_per_token() if isinstance(op, StreamedKernel) else op.flops_per_token for op in ops)


def stored(ops: list) -> int:
    return sum(op.stored_elements_per_token for op in ops)


def params(ops: list) -> int:
    return sum(op.params for op in ops if isinstance(op, StreamedKernel))


def names(ops: list) -> list[str]:
    return [op.name.split(".", 1)[1] for op in ops]


# The transformer block's own forward FLOPs per token and stored elements (tests/core/test_layer_kinds.py).
def block_flops(s: int) -> float:
    return 2 * (3 * D * D + D * D) + 2 * 2 * D * DFF + 4.0 * s * D + 5.0 * H * s + 2 * 8 * D + 8 * DFF + 2 * D


BLOCK_STORED = D + D + (3 * D + H) + D + D + D + DFF + DFF


def test_patch_embedding_is_the_matmul_of_a_stride_p_convolution():
    ops, s = ops_of(vit())
    assert s == PATCHES + 1  # the class token's position
    stem = of_layer(ops, "patch")
    assert names(stem) == ["patches", "class_token", "positions", "add_positions"]
    proj, cls, pos = (op for op in stem if isinstance(op, StreamedKernel))
    assert (proj.kind, proj.out_features, proj.in_features) == ("matmul", D, P * P * CH)
    assert (cls.kind, cls.out_features, cls.in_features, cls.tokens_per_input) == ("embedding", 1, D, s)
    assert (pos.kind, pos.out_features, pos.in_features, pos.tokens_per_input) == ("embedding", s, D, 1)
    assert params(stem) == D * P * P * CH + D + s * D
    assert flops(stem) == 2 * D * P * P * CH + D  # the projection and the position add; gathers are no FLOPs
    assert stored(stem) == P * P * CH  # the patch, for the projection's weight gradient


@pytest.mark.parametrize(("positions", "tables", "add"), [("learned", 1, True), ("fixed", 0, True), ("none", 0, False)])
def test_patch_positions(positions, tables, add):
    ops, s = ops_of({"name": "m", "input": "image", "layers": [patch(positions=positions), block()]})
    stem = of_layer(ops, "patch")
    assert s == PATCHES
    assert sum(op.kind == "embedding" for op in stem if isinstance(op, StreamedKernel)) == tables
    assert any(op.name == "patch.add_positions" for op in stem) is add
    assert params(stem) == D * P * P * CH + tables * PATCHES * D


def test_classification_head_runs_once_per_sample():
    ops, s = ops_of(vit())
    head = of_layer(ops, "head")
    assert names(head) == ["ln", "proj", "softmax_loss"]
    proj = head[1]
    assert isinstance(proj, StreamedKernel) and proj.is_output and proj.tokens_per_input == s
    assert (proj.out_features, proj.in_features) == (C, D)
    # The norm on every token; d -> classes and 5 per logit once per sample.
    assert flops(head) == pytest.approx(8 * D + (2 * C * D + 5 * C) / s, rel=1e-15)
    assert stored(head) == D + math.ceil(D / s)
    assert head[2].working_elements_per_token == math.ceil(C / s)
    # Only the classifier is the output layer, and no loss is added after it.
    assert [op.name for op in ops if isinstance(op, StreamedKernel) and op.is_output] == ["head.proj"]
    assert sum("loss" in op.name for op in ops) == 1
    mean = of_layer(ops_of(vit(pool="mean", norm=False))[0], "head")
    assert names(mean) == ["pool", "proj", "softmax_loss"]
    assert flops(mean) == pytest.approx(D + (2 * C * D + 5 * C) / s, rel=1e-15)


def test_dit_conditioning_runs_once_per_sample():
    ops, s = ops_of(dit())
    assert s == PATCHES  # no class token
    t, y = of_layer(ops, "t"), of_layer(ops, "y")
    assert names(t) == ["sinusoid", "fc1", "silu", "fc2"] and names(y) == ["labels", "add"]
    assert all(op.tokens_per_input == s for op in t + y if isinstance(op, StreamedKernel))
    assert params(t) == D * F + D * D and params(y) == (C + 1) * D  # the 'no label' row of classifier-free guidance
    assert flops(t) == pytest.approx((1.5 * F + 2 * D * F + 4 * D + 2 * D * D) / s, rel=1e-15)
    assert flops(y) == pytest.approx(D / s, rel=1e-15)
    assert stored(t) == math.ceil(F / s) + 2 * math.ceil(D / s) and stored(y) == 0


@pytest.mark.parametrize(("modulation", "width", "gates"), [("adaln_zero", 6, 2), ("adaln", 4, 0)])
def test_dit_block_is_the_transformer_block_with_adaln(modulation, width, gates):
    ops, s = ops_of(dit(modulation))
    blk = of_layer(ops, "block")
    expected = ["adaln_silu", "adaln", "ln1", "modulate1", "qkv", "attention", "attn_out", "gate1", "residual1",
                "ln2", "modulate2", "ffn_up", "gelu", "ffn_down", "gate2", "residual2"]
    assert names(blk) == [n for n in expected if gates or not n.startswith("gate")]
    adaln = blk[1]
    assert isinstance(adaln, StreamedKernel) and adaln.tokens_per_input == s and adaln.block == 0
    assert (adaln.out_features, adaln.in_features) == (width * D, D)
    assert params(blk) == 4 * D * D + 2 * D * DFF + width * D * D
    # adaLN: SiLU and d -> width d once per sample; modulations 2 per element; gates 1 per element.
    assert flops(blk) == pytest.approx(block_flops(s) + (4 * D + 2 * width * D * D) / s + 2 * 2 * D + gates * D,
                                       rel=1e-15)
    assert stored(blk) == BLOCK_STORED + 2 * math.ceil(D / s) + 2 * D + gates * D
    # The block's input (what checkpointing keeps and offload sends) is its tokens', not the conditioning vector's.
    assert block_input_widths(ops) == {0: D}


def test_diffusion_head_doubles_the_channels_with_a_learned_variance():
    ops, s = ops_of(dit())
    head = of_layer(ops, "final")
    assert names(head) == ["adaln_silu", "adaln", "ln", "modulate", "proj", "mse_loss"]
    out = P * P * 4 * 2
    proj = head[4]
    assert isinstance(proj, StreamedKernel) and proj.is_output and proj.tokens_per_input == 1
    assert (proj.out_features, proj.in_features) == (out, D)
    assert params(head) == 2 * D * D + out * D
    assert flops(head) == pytest.approx((4 * D + 2 * 2 * D * D) / s + 8 * D + 2 * D + 2 * out * D + 3 * out,
                                        rel=1e-15)
    assert stored(head) == 2 * math.ceil(D / s) + 3 * D  # adaLN's input twice; norm, modulation, projection
    loss = head[5]
    assert isinstance(loss, WaferOp) and loss.working_elements_per_token == out
    assert loss.backward_factor == pytest.approx(2 / 3)
    model = dit()
    model["layers"][-1]["learn_sigma"] = False
    assert of_layer(ops_of(model)[0], "final")[4].out_features == P * P * 4


def test_a_step_counts_per_sample_work_once_per_sample():
    """The Result's FLOPs, the streamed bytes, MemoryX's state and SRAM follow the counts above."""
    batch = 4
    raw = scenario_dict(model=dit(), global_batch=batch, optimizer="adamw",
                        training={"micro_batch": batch, "activation_checkpointing": "none"})
    plan = wss.plan(raw)
    s = plan.tokens_per_sample
    ops, _ = ops_of(dit())
    n = params(ops)
    assert plan.params == n
    assert sum(k.stream_bytes for k in plan.kernels) == n * PRECISION_BYTES["fp16"]
    assert plan.memoryx_state_bytes == 16 * n  # AdamW: four fp32 scalars per weight
    # Every forward FLOP three times (forward, and twice it backward), the non-weight ops at their factors.
    dense = sum(3 * op.dense_flops_per_token() if isinstance(op, StreamedKernel)
                else op.flops_per_token * (1 + op.backward_factor) for op in ops) * batch * s
    result = wss.simulate(raw)
    assert result.flops.dense_equivalent_per_step == pytest.approx(dense, rel=1e-12)
    assert activation_elements_per_token(plan.ops, "none") == stored(ops) + P * P * 4 * 2


def test_a_per_sample_kernel_is_costed_on_one_vector_per_sample():
    batch = 512  # 8,192 tokens: several per core column, one sample per column
    plan = wss.plan(scenario_dict(model=dit(), global_batch=batch, training={"micro_batch": batch}))
    tokens = batch * plan.tokens_per_sample
    by_name = {kp.kernel.name: kp for kp in plan.kernels}
    wafer = plan.scenario.hardware.wafer
    fc2, attn_out = by_name["t.fc2"], by_name["block.attn_out"]  # both d x d: one per sample, one per token
    assert fc2.cycles[tokens] == kernel_cycles("matmul", fc2.profile, batch, wafer)
    assert attn_out.cycles[tokens] == kernel_cycles("matmul", attn_out.profile, tokens, wafer)
    assert fc2.cycles[tokens] != attn_out.cycles[tokens]


def test_image_and_latent_inputs_set_the_bytes_per_sample():
    from wss.model.machine.figures import input_bytes_per_sample

    image = wss.load_scenario(scenario_dict(model=vit()))
    assert input_bytes_per_sample(image, 0) == IMAGE * IMAGE * CH  # uint8 pixels
    latent = wss.load_scenario(scenario_dict(model=dit(), training={"activation_precision": "fp32"}))
    assert input_bytes_per_sample(latent, 0) == IMAGE * IMAGE * 4 * 4  # fp32 values


@pytest.mark.parametrize("model", [vit(), dit(blocks=3)])
def test_vision_models_simulate(model):
    raw = scenario_dict(model=model, global_batch=8, steps=2, optimizer="adamw")
    result = wss.simulate(raw)
    estimate = wss.estimate(raw)
    assert result.samples_per_s > 0
    assert estimate.tokens_per_sample == pytest.approx(result.tokens_per_s / result.samples_per_s, rel=1e-12)
    assert estimate.step_time_s == pytest.approx(result.step_time_s, rel=0.1)
