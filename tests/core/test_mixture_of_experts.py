"""A mixture-of-experts FFN: what streams, what each expert computes, what MemoryX holds, counted by hand.

A block with ``moe: {experts: E, top_k: k, capacity_factor: c}`` has a router (``E x d``), then E FFNs of
``d_ff`` each and their weighted sum.  Every wafer's shard routes tokens to every expert, so every
expert's weights stream in every pass and MemoryX holds and updates every expert; each expert computes
``ceil(c k / E x T)`` of a micro-batch's ``T`` tokens (its capacity), and the model's FLOPs count the
``k / E`` routed to it.
"""

from __future__ import annotations

import math

import pytest
from core_helpers import SCENARIOS, scenario_dict

import wss
from wss.model.kernels.cycles import kernel_cycles
from wss.model.machine.optimizer_costs import SCALAR_BYTES
from wss.model.plan.activation_sram import activation_elements_per_token
from wss.model.scenario.workload import ModelConfig
from wss.model.workload import StreamedKernel, WaferOp, expand_model

D, H, DFF, V, S = 128, 4, 256, 500, 32
E, K = 8, 2


def model(moe: dict | None = None, ffn: str = "swiglu", d_ff: int = DFF) -> dict:
    block = {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": D, "n_heads": H, "d_ff": d_ff,
             "ffn": ffn, "causal": True}
    if moe is not None:
        block["moe"] = moe
    layers = [{"kind": "embedding", "name": "embed", "vocab_size": V, "d_model": D}, block,
              {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": V}]
    return {"name": "moe", "input": "tokens", "seq_len": S, "layers": layers}


def ops(moe: dict | None = None, **options) -> list:
    return expand_model(ModelConfig.model_validate(model(moe, **options)), 0.0, S)


def block0(op_list: list) -> list:
    return [op for op in op_list if op.layer == "block.0"]


def short(op) -> str:
    return op.name.removeprefix("block.0.")


MOE = {"experts": E, "top_k": K}


def test_a_moe_block_expands_into_router_experts_and_combine():
    got = block0(ops(MOE))
    experts = [f"expert.{e}.{part}" for e in range(E) for part in ("ffn_gate", "ffn_up", "swiglu", "ffn_down")]
    assert [short(op) for op in got] == ["ln1", "qkv", "attention", "attn_out", "residual1", "ln2", "router", "route",
                                         *experts, "combine", "residual2"]
    kernels = {short(k): k for k in got if isinstance(k, StreamedKernel)}
    assert (kernels["router"].out_features, kernels["router"].in_features) == (E, D)
    assert kernels["router"].token_share == 1.0
    for e in range(E):
        gate, up, down = (kernels[f"expert.{e}.{p}"] for p in ("ffn_gate", "ffn_up", "ffn_down"))
        assert [(k.out_features, k.in_features) for k in (gate, up, down)] == [(DFF, D), (DFF, D), (D, DFF)]
        assert {k.token_share for k in (gate, up, down)} == {K / E}


def test_a_moe_blocks_flops_and_stored_activations_by_hand():
    moe, dense = block0(ops(MOE)), block0(ops(None))
    share = K / E

    def flops(op_list: list) -> float:
        return sum(op.dense_flops_per_token() if isinstance(op, StreamedKernel) else op.flops_per_token
                   for op in op_list)

    def stored(op_list: list) -> float:
        return sum(op.stored_elements_per_token for op in op_list)

    dense_ffn = 2 * 3 * D * DFF + 5 * DFF  # three matmuls and SiLU(gate) * up
    # Router matmul 2 E d; softmax 5 E and top-k k E; each token's k experts; their weighted sum 2 k d.
    assert flops(moe) == pytest.approx(flops(dense) - dense_ffn + 2 * E * D + 5 * E + K * E + K * dense_ffn
                                       + 2 * K * D, rel=1e-12)
    # The dense block keeps the FFN's input d, gate and up 2 d_ff and down's input d_ff.  The MoE block keeps
    # the router's input d, the probabilities E, each expert's 3 d_ff on its share of the tokens, and k outputs.
    assert stored(moe) == pytest.approx(stored(dense) - (D + 3 * DFF) + D + E + E * share * 3 * DFF + K * D,
                                        rel=1e-12)


def test_capacity_factor_pads_the_computed_work_not_the_models_flops():
    plain, padded = block0(ops(MOE)), block0(ops({**MOE, "capacity_factor": 1.5}))
    for a, b in zip(plain, padded, strict=True):
        if isinstance(a, StreamedKernel):
            assert a.dense_flops_per_token() == b.dense_flops_per_token()  # the routed tokens' FLOPs
            if a.token_share < 1:
                assert b.computed_share == pytest.approx(1.5 * a.computed_share) and b.computed_tokens(1000) == 375
        elif "expert" in a.name:
            assert b.flops_per_token == pytest.approx(1.5 * a.flops_per_token)
            assert b.stored_elements_per_token == pytest.approx(1.5 * a.stored_elements_per_token)


def plan_of(moe: dict | None = MOE, **training):
    return wss.plan(scenario_dict(model=model(moe), global_batch=8, optimizer="adamw", training=training))


def test_every_expert_streams_and_lives_in_memoryx_and_computes_its_capacity():
    p = plan_of({**MOE, "capacity_factor": 1.25})
    experts = [k for k in p.kernels if ".expert." in k.kernel.name]
    assert len(experts) == 2 * E * 3
    b_w = 2  # fp16 weights, dense format: every expert's whole matrix streams in every pass
    total = sum(k.kernel.params for k in p.kernels if k.owns_state)
    assert sum(k.stream_bytes for k in p.kernels) == pytest.approx(b_w * sum(k.kernel.params for k in p.kernels))
    assert p.memoryx_state_bytes == total * 4 * SCALAR_BYTES  # Adam's four fp32 scalars, every expert
    for k in experts:
        assert k.stream_bytes == k.kernel.params * b_w and k.grad_bytes == k.kernel.params * b_w
        for tokens, cycles in k.cycles.items():
            routed = math.ceil(1.25 * K / E * tokens)
            assert cycles == kernel_cycles("matmul", k.profile, routed, p.scenario.hardware.wafer)


def test_an_expert_is_cheaper_on_the_wafer_than_the_same_matrix_on_every_token():
    p = plan_of(None, seq_len=4096)  # enough tokens that a core's share shrinks with the expert's
    m = plan_of(seq_len=4096)
    ffn = next(k for k in p.kernels if k.kernel.name == "block.0.ffn_up")
    expert = next(k for k in m.kernels if k.kernel.name == "block.0.expert.0.ffn_up")
    assert (ffn.kernel.out_features, ffn.kernel.in_features) == (expert.kernel.out_features, expert.kernel.in_features)
    for t in ffn.cycles:
        assert expert.cycles[t].forward < ffn.cycles[t].forward


def test_shared_experts_are_one_ffn_every_token_uses():
    got = block0(ops({**MOE, "shared_experts": 2}))
    shared = {short(k): k for k in got if isinstance(k, StreamedKernel) and ".expert." not in k.name}
    assert (shared["ffn_up"].out_features, shared["ffn_up"].token_share) == (2 * DFF, 1.0)
    assert shared["ffn_gate"].stored_elements_per_token == 0  # reads the router's input, kept once
    assert [short(op) for op in got][-6:] == ["combine", "ffn_gate", "ffn_up", "swiglu", "ffn_down", "residual2"]


def test_expert_sparsity_roles_reach_only_the_experts():
    raw = scenario_dict(model=model({**MOE, "shared_experts": 1}), global_batch=8,
                        workload={"sparsity": {"expert_up": 0.5, "router": 0.25, "default": 0.0}})
    density = {kp.kernel.name: kp.kernel.density for kp in wss.plan(raw).kernels}
    assert density["block.0.expert.3.ffn_up"] == 0.5 and density["block.0.expert.3.ffn_down"] == 1.0
    assert density["block.0.router"] == 0.75 and density["block.0.ffn_up"] == 1.0


def test_an_expert_role_on_a_dense_block_is_an_error():
    with pytest.raises(wss.ScenarioError, match=r"sparsity\.expert_up"):
        wss.load_scenario(scenario_dict(model=model(None), workload={"sparsity": {"expert_up": 0.5}}))


def test_gelu_experts_have_no_gate():
    got = block0(ops(MOE, ffn="gelu"))
    assert [short(op) for op in got if short(op).startswith("expert.0.")] == ["expert.0.ffn_up", "expert.0.gelu",
                                                                          "expert.0.ffn_down"]


def test_checkpointed_moe_block_keeps_its_input_only():
    got = ops(MOE)
    blocks = activation_elements_per_token(got, "blocks")
    none = activation_elements_per_token(got, "none")
    assert blocks < none


def test_a_moe_block_simulates_and_its_optimizer_updates_every_expert():
    r = wss.simulate(scenario_dict(model=model(MOE), global_batch=8, optimizer="adamw"))
    updated = {rec.name for rec in r.records if rec.where == "memoryx" and rec.phase == "update"}
    assert {f"block.1.expert.{e}.ffn_down" for e in range(E)} <= updated


def mixtral_step(*overrides: str) -> float:
    return wss.simulate(wss.load_scenario(SCENARIOS / "mixtral_8x7b_4xcs3.yaml", list(overrides))).step_time_s


def test_mixtral_lies_between_a_dense_model_of_its_active_and_one_of_its_total_parameters():
    """Mixtral streams every expert (a dense model of 46.7 B) but computes two of eight per token (12.9 B)."""
    moe = mixtral_step()
    # The same model with one FFN of 2 x 14336 (active: the top-2 experts' weights) or 8 x 14336 (total).
    active = mixtral_step("workload.model.layers.1.moe=null", "workload.model.layers.1.d_ff=28672")
    total = mixtral_step("workload.model.layers.1.moe=null", "workload.model.layers.1.d_ff=114688")
    print(f"mixtral-8x7b on 4 CS-3: dense active {active:.3f} s < MoE {moe:.3f} s < dense total {total:.3f} s")
    assert active < moe < total


def test_the_wafer_op_of_an_expert_counts_its_slots():
    op = next(o for o in block0(ops(MOE)) if short(o) == "expert.0.swiglu")
    assert isinstance(op, WaferOp)
    assert op.flops_per_token == pytest.approx(5 * DFF * K / E) and op.stored_elements_per_token == 2 * DFF * K / E


def test_the_work_bound_counts_every_experts_kernels():
    """A run's work bound (docs/limits.md) counts 3 + 3 (E + 1) streamed kernels for a MoE block, not a dense 5."""
    experts, repeat = 1000, 10
    raw = scenario_dict(model=model({"experts": experts, "top_k": 2}), global_batch=8, steps=100)
    raw["workload"]["model"]["layers"][1]["repeat"] = repeat
    with pytest.raises(wss.ScenarioError) as err:
        wss.load_scenario(raw)
    kernels = repeat * (3 + 3 * (experts + 1)) + 2 + 2  # the blocks, the embedding and the head
    assert f"{kernels:,} streamed kernels" in str(err.value)
