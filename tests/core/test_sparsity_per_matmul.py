"""Sparsity by matmul role: each kernel's density, bytes, MemoryX state and FLOPs follow its own role.

``workload.sparsity`` and a transformer block's ``sparsity`` take one number or a mapping by role
(qkv, attn_out, ffn_up, ffn_down; the workload's also embedding and output_head) with a ``default``.
The closed forms are the plan's byte conventions (docs/model.md, "Work per kernel").
"""

from __future__ import annotations

import math

import pytest
from core_helpers import SCENARIOS, dense_model, scenario_dict

import wss
from wss.errors import ScenarioError
from wss.model.numerics.bridge import numerics_spec
from wss.model.plan import CONTROL_BYTES, INDEX_BYTES, STORED_INDEX_BYTES
from wss.model.scenario.workload import BLOCK_ROLES, WORKLOAD_ROLES

D, HEADS, VOCAB, SEQ = 128, 4, 1000, 64
B_W = B_G = 2  # fp16 weights and gradients (the training defaults)
ADAMW_STATE = 16  # bytes per non-zero: weight, gradient buffer, two moments (fp32)
SHAPES = {"qkv": (3 * D, D), "attn_out": (D, D), "ffn_up": (4 * D, D), "ffn_down": (D, 4 * D)}
SPARSE_FFN = {"qkv": 0.0, "attn_out": 0.0, "ffn_up": 0.9, "ffn_down": 0.9}


def tiny_gpt(sparsity=None, blocks: list[dict] | None = None, tied: bool = False) -> dict:
    """An embedding, two transformer blocks (or ``blocks``) and an output head, on one wafer."""
    block = {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": D, "n_heads": HEADS}
    layers = [
        {"kind": "embedding", "name": "embed", "vocab_size": VOCAB, "d_model": D},
        *(blocks if blocks is not None else [block]),
        {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": VOCAB, "tied": tied},
    ]
    model = {"name": "tiny-gpt", "input": "tokens", "seq_len": SEQ, "layers": layers}
    workload = {"model": model} if sparsity is None else {"model": model, "sparsity": sparsity}
    return scenario_dict(model=None, global_batch=4, optimizer="adamw", workload=workload)


def by_name(plan) -> dict:
    return {k.kernel.name: k for k in plan.kernels}


def role_of(name: str) -> str:
    return name.rsplit(".", 1)[1]


def stream_bytes(m: int, k: int, nnz: int) -> float:
    return float(min(m * k * B_W, nnz * (B_W + INDEX_BYTES) + m * CONTROL_BYTES))


# ---------------------------------------------------------------------------- per kernel


def test_each_role_sets_its_kernels_density_nnz_bytes_and_state():
    roles = {"qkv": 0.0, "attn_out": 0.5, "ffn_up": 0.9, "ffn_down": 0.75}
    plan = wss.plan(tiny_gpt(roles))
    blocks = [k for k in plan.kernels if k.kernel.block is not None]
    assert len(blocks) == 8
    for kp in blocks:
        k, role = kp.kernel, role_of(kp.kernel.name)
        m, n = SHAPES[role]
        assert (k.out_features, k.in_features) == (m, n)
        assert k.density == 1.0 - roles[role]
        nnz = kp.profile.nnz
        if roles[role] == 0.0:
            assert nnz == m * n
        else:  # an exact draw of an i.i.d. mask: within 6 standard deviations of its mean
            p = k.density
            assert abs(nnz - m * n * p) <= 6 * math.sqrt(m * n * p * (1 - p))
        assert kp.stream_bytes == stream_bytes(m, n, nnz)
        assert kp.grad_bytes == nnz * B_G
        mask = 0 if nnz == m * n else min(math.ceil(m * n / 8), nnz * STORED_INDEX_BYTES)
        assert kp.state_bytes == nnz * ADAMW_STATE + mask
    # Kernels without a block role take the mapping's default: none given, so dense.
    others = [k for k in plan.kernels if k.kernel.block is None]
    assert [k.kernel.name for k in others] == ["embed.tokens", "head.proj"]
    assert all(k.kernel.density == 1.0 and k.profile.nnz == k.kernel.params for k in others)


def test_sparse_ffn_dense_attention_streams_the_sum_of_its_roles():
    """Attention streams dense bytes; each FFN kernel streams what it does when the whole model is 90% sparse."""
    mixed = wss.plan(tiny_gpt(SPARSE_FFN))
    uniform = by_name(wss.plan(tiny_gpt(0.9)))
    per_block = 0.0
    for kp in mixed.kernels:
        if kp.kernel.name.startswith("block.0."):
            role = role_of(kp.kernel.name)
            m, n = SHAPES[role]
            if role in ("qkv", "attn_out"):
                expected = float(m * n * B_W)  # dense: every weight, no index
            else:  # the same (shape, density, seed) gives the same mask as in the uniform model
                same = uniform[kp.kernel.name]
                assert kp.profile.nnz == same.profile.nnz
                expected = same.stream_bytes
                assert expected == stream_bytes(m, n, same.profile.nnz) < m * n * B_W
            assert kp.stream_bytes == expected
            per_block += expected
    block_bytes = sum(k.stream_bytes for k in mixed.kernels if k.kernel.block is not None)
    assert block_bytes == 2 * per_block  # two identical blocks
    hand = 2 * (3 * D * D * B_W + D * D * B_W) + sum(
        uniform[f"block.{b}.{r}"].stream_bytes for b in (0, 1) for r in ("ffn_up", "ffn_down")
    )
    assert block_bytes == hand


def test_flops_follow_each_kernels_non_zeros():
    """Executed FLOPs drop by 6 x tokens x the non-zeros each role removes; dense-equivalent FLOPs do not move."""
    dense_s, mixed_s = tiny_gpt(), tiny_gpt(SPARSE_FFN)
    dense, mixed = wss.simulate(dense_s), wss.simulate(mixed_s)
    plan = wss.plan(mixed_s)
    assert plan.checkpointing == "none"
    tokens = 4 * SEQ
    removed = sum(k.kernel.params - k.profile.nnz for k in plan.kernels)
    assert removed > 0
    saved = dense.flops.executed_per_step - mixed.flops.executed_per_step
    assert saved == pytest.approx(6 * tokens * removed, rel=1e-12)
    assert mixed.flops.dense_equivalent_per_step == dense.flops.dense_equivalent_per_step
    assert mixed.step_time_s < dense.step_time_s


# ---------------------------------------------------------------------------- fall-backs


def test_a_kernel_takes_layer_role_then_layer_default_then_workload_role_then_workload_default():
    def block(name: str, sparsity=None) -> dict:
        layer = {"kind": "transformer_block", "name": name, "d_model": D, "n_heads": HEADS}
        return layer if sparsity is None else {**layer, "sparsity": sparsity}

    blocks = [
        block("a", {"qkv": 0.25, "default": 0.125}), block("b", {"attn_out": 0.375}), block("c", 0.625), block("d")
    ]
    plan = wss.plan(tiny_gpt({"default": 0.5, "ffn_up": 0.875}, blocks=blocks))
    sparsity = {k.kernel.name: 1.0 - k.kernel.density for k in plan.kernels}
    assert sparsity == {
        "embed.tokens": 0.5,
        "a.qkv": 0.25, "a.attn_out": 0.125, "a.ffn_up": 0.125, "a.ffn_down": 0.125,
        "b.qkv": 0.5, "b.attn_out": 0.375, "b.ffn_up": 0.875, "b.ffn_down": 0.5,
        "c.qkv": 0.625, "c.attn_out": 0.625, "c.ffn_up": 0.625, "c.ffn_down": 0.625,
        "d.qkv": 0.5, "d.attn_out": 0.5, "d.ffn_up": 0.875, "d.ffn_down": 0.5,
        "head.proj": 0.5,
    }


def test_one_number_is_the_same_as_a_mapping_with_only_a_default():
    number, mapping = wss.plan(tiny_gpt(0.75)), wss.plan(tiny_gpt({"default": 0.75}))
    for a, b in zip(number.kernels, mapping.kernels):
        assert a.kernel == b.kernel and a.profile.nnz == b.profile.nnz
        assert (a.stream_bytes, a.grad_bytes, a.state_bytes) == (b.stream_bytes, b.grad_bytes, b.state_bytes)
    assert wss.simulate(tiny_gpt(0.75)).step_time_s == wss.simulate(tiny_gpt({"default": 0.75})).step_time_s


def test_untied_head_and_embedding_roles():
    kernels = by_name(wss.plan(tiny_gpt({"embedding": 0.5, "output_head": 0.75})))
    assert kernels["embed.tokens"].kernel.density == 0.5
    assert kernels["head.proj"].kernel.density == 0.25
    assert all(k.kernel.density == 1.0 for name, k in kernels.items() if name.startswith("block."))


def test_a_tied_head_takes_its_tables_sparsity_and_mask():
    """A tied head streams the embedding table's weights: the same mask, so the same non-zeros and bytes."""
    for sparsity, blocks in ((0.75, None), ({"embedding": 0.75}, None), (None, "layer")):
        raw = tiny_gpt(sparsity, tied=True)
        if blocks == "layer":
            raw["workload"]["model"]["layers"][0]["sparsity"] = 0.75
        kernels = by_name(wss.plan(raw))
        table, head = kernels["embed.tokens"], kernels["head.proj"]
        assert head.kernel.tied_to == "embed.tokens"
        assert head.kernel.density == table.kernel.density == 0.25
        assert head.profile.nnz == table.profile.nnz and head.stream_bytes == table.stream_bytes
        assert head.state_bytes == 0 and table.state_bytes == table.profile.nnz * ADAMW_STATE + min(
            math.ceil(VOCAB * D / 8), table.profile.nnz * STORED_INDEX_BYTES
        )


# ---------------------------------------------------------------------------- errors


def problem(raw, overrides=None):
    with pytest.raises(ScenarioError) as info:
        wss.load_scenario(raw, overrides)
    assert len(info.value.problems) == 1
    return info.value.problems[0]


def test_an_unknown_role_names_the_field_and_the_known_roles():
    p = problem(tiny_gpt({"ffnup": 0.9}))
    assert p.path == "workload.sparsity.ffnup"
    assert "unknown role" in p.message and all(role in p.message for role in (*WORKLOAD_ROLES, "default"))

    raw = tiny_gpt()
    raw["workload"]["model"]["layers"][1]["sparsity"] = {"ffn_up": 0.9, "lm_head": 0.5}
    p = problem(raw)
    assert p.path == "workload.model.layers.1.sparsity.lm_head"
    assert "unknown role" in p.message and all(role in p.message for role in (*BLOCK_ROLES, "default"))
    assert "output_head" not in p.message  # not a block role

    p = problem(tiny_gpt({"ffnup": 0.9, "qvk": 0.1}))
    assert p.path == "workload.sparsity" and "'ffnup', 'qvk'" in p.message


def test_a_role_value_is_checked_like_any_sparsity():
    p = problem(tiny_gpt({"ffn_up": 1.0}))
    assert p.path == "workload.sparsity.ffn_up" and "less than 1" in p.message


def test_layers_other_than_blocks_take_one_number():
    raw = tiny_gpt()
    raw["workload"]["model"]["layers"][0]["sparsity"] = {"default": 0.5}
    p = problem(raw)
    assert p.path == "workload.model.layers.0.sparsity.default"
    assert "an embedding layer's sparsity is one number" in p.message


def test_a_role_the_model_lacks_is_an_error():
    p = problem(scenario_dict(model=dense_model(256, 256), workload={"sparsity": {"ffn_up": 0.9}}))
    assert p.path == "workload.sparsity.ffn_up" and "no transformer_block layer" in p.message
    p = problem(tiny_gpt({"output_head": 0.5}, tied=True))
    assert p.path == "workload.sparsity.output_head" and "set 'embedding'" in p.message


def test_a_tied_head_cannot_set_its_own_sparsity():
    raw = tiny_gpt(tied=True)
    raw["workload"]["model"]["layers"][-1]["sparsity"] = 0.5
    p = problem(raw)
    assert p.path == "workload.model.layers.2.sparsity" and "embedding" in p.message


# ---------------------------------------------------------------------------- overrides


def test_set_a_role_on_a_scenario_with_one_number():
    """--set workload.sparsity.ffn_up=0.5 turns 'sparsity: 0.9' into {default: 0.9, ffn_up: 0.5}."""
    path = SCENARIOS / "gpt3_6.7b_sparse.yaml"
    s = wss.load_scenario(path, ["workload.sparsity.ffn_up=0.5"])
    assert (s.workload.sparsity.default, s.workload.sparsity.ffn_up, s.workload.sparsity.qkv) == (0.9, 0.5, None)
    again = wss.load_scenario(s, {"workload.sparsity.qkv": 0.0})  # a resolved Scenario takes it too
    roles = again.workload.sparsity
    assert (roles.default, roles.ffn_up, roles.qkv) == (0.9, 0.5, 0.0)
    layer = wss.load_scenario(path, ["workload.model.layers.1.sparsity.ffn_down=0.25"]).workload.model.layers[1]
    assert layer.sparsity.ffn_down == 0.25 and layer.sparsity.default is None
    assert wss.load_scenario(s.model_dump(mode="json")) == s  # the mapping round-trips


def test_set_an_unknown_role_says_it_came_from_set():
    p = problem(SCENARIOS / "gpt3_175b.yaml", ["workload.sparsity.ffnup=0.5"])
    assert p.path == "workload.sparsity.ffnup" and "[from --set workload.sparsity.ffnup]" in p.message


# ---------------------------------------------------------------------------- numerics


def test_numerics_take_a_mapping_with_a_default_as_its_number():
    number = wss.load_scenario(SCENARIOS / "fc_mnist_numerics.yaml")
    mapping = wss.load_scenario(SCENARIOS / "fc_mnist_numerics.yaml", {"workload.sparsity": {"default": 0.5}})
    assert numerics_spec(mapping) == numerics_spec(number)


def test_numerics_still_refuse_transformer_blocks_with_roles():
    raw = tiny_gpt(SPARSE_FFN)
    raw["numerics"] = {"enabled": True}
    p = problem(raw)
    assert p.path == "numerics.enabled" and "dense layers only" in p.message
