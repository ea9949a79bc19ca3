"""Activation SRAM at the peak of the schedule (wss/model/plan/activation_sram.py): what a micro-batch keeps, and
that the configurations published runs used are admitted while one that cannot fit is still refused."""

from __future__ import annotations

import pytest
import yaml
from core_helpers import REPO, scenario_dict

import wss
from wss.errors import InfeasibleError
from wss.model.plan import make_plan
from wss.model.plan.activation_sram import activation_peak, block_input_widths
from wss.model.workload import WaferOp, expand_model

VALIDATION = REPO / "scenarios" / "validation"

D, FF, HEADS, BLOCKS, VOCAB, SEQ = 64, 256, 4, 3, 2000, 32
MODEL = {"name": "tiny-gpt", "input": "tokens", "seq_len": SEQ, "layers": [
    {"kind": "embedding", "name": "embed", "vocab_size": VOCAB, "d_model": D, "max_positions": SEQ},
    {"kind": "transformer_block", "name": "block", "repeat": BLOCKS, "d_model": D, "n_heads": HEADS, "d_ff": FF},
    {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": VOCAB},
]}
#: One GPT block's stored elements per token: 2 norm inputs, qkv, attn_out and ffn_up inputs (5 d), Q, K, V and
#: the softmax statistics (3 d + heads), GELU's input and ffn_down's input (2 d_ff).
BLOCK = 5 * D + 3 * D + HEADS + 2 * FF


def _case(name: str, **settings: object) -> wss.Scenario:
    raw = yaml.safe_load((VALIDATION / f"measured_{name}.yaml").read_text())["scenario"]
    return wss.load_scenario(raw, {f"training.{k}": v for k, v in settings.items()})


def _ops() -> list:
    return expand_model(wss.load_scenario(scenario_dict(model=MODEL)).workload.model, 0.0, SEQ)


def test_a_block_keeps_the_inputs_of_its_matmuls_and_what_attention_norms_and_gelu_need():
    ops = _ops()
    assert sum(op.stored_elements_per_token for op in ops if op.block == 0) == BLOCK
    assert block_input_widths(ops) == dict.fromkeys(range(BLOCKS), D)


def test_without_checkpointing_the_peak_is_every_stored_activation_and_the_logits_at_the_loss():
    peak = activation_peak(_ops(), "none")
    assert peak.elements_per_token == BLOCKS * BLOCK + D + VOCAB  # the head keeps its input; the loss its logits
    assert peak.where == "the forward pass of head.softmax_loss"


def test_block_checkpointing_never_holds_the_logits_and_a_recomputed_block_at_once():
    """At the loss: every block input, the head's input and the logits.  In the last block's recompute: every
    block input and that block's stored activations; the head's input and the logits are gone by then."""
    at_loss = BLOCKS * D + D + VOCAB
    in_recompute = BLOCKS * D + BLOCK
    assert at_loss > in_recompute  # this shape peaks at the loss
    assert activation_peak(_ops(), "blocks").elements_per_token == at_loss
    wide = [op if not isinstance(op, WaferOp) or not op.working_elements_per_token
            else WaferOp(op.name, op.layer, op.flops_per_token, op.block, 0, 10) for op in _ops()]
    peak = activation_peak(wide, "blocks")  # a small vocabulary: the recompute of the last block is the peak
    assert peak.elements_per_token == in_recompute
    # the last block's forward pass holds as much as its recompute (the first on a tie is named)
    assert peak.where == f"the forward pass of block.{BLOCKS - 1}.ffn_down"


def test_offload_holds_two_block_inputs_in_a_block_and_one_at_the_loss():
    """In a block: its own input and the one before it (leaving, or arriving for its recompute); at the loss
    only the last block's, beside the head's input and the logits."""
    assert activation_peak(_ops(), "offload").elements_per_token == D + D + VOCAB
    wide = [op if not isinstance(op, WaferOp) or not op.working_elements_per_token
            else WaferOp(op.name, op.layer, op.flops_per_token, op.block, 0, 10) for op in _ops()]
    assert activation_peak(wide, "offload").elements_per_token == 2 * D + BLOCK


def test_fp32_activations_need_twice_the_sram_of_mixed_precision():
    raw = scenario_dict(model=MODEL, global_batch=8, training={"micro_batch": 8, "activation_checkpointing": "none"})
    half = make_plan(wss.load_scenario(raw))
    full = make_plan(wss.load_scenario(raw, {"training.activation_precision": "fp32"}))
    assert half.sram_bytes_needed == (BLOCKS * BLOCK + D + VOCAB) * 8 * SEQ * 2
    assert full.sram_bytes_needed == 2 * half.sram_bytes_needed


def test_gpt2_small_runs_its_published_micro_batch_of_112_on_one_cs2():
    """M1 and M7 (ALCF logs, 2024): GPT-2 small, 2048 tokens, 112 per step on one CS-2, 'gradient accumulation
    disabled'.  With block checkpointing the peak is at the loss, the logits of 112 x 2048 tokens beside the
    block inputs, and fits; without checkpointing it cannot (every block's activations at once)."""
    plan = make_plan(_case("m1_gpt2_small", micro_batch=112))
    assert plan.micro_batches == [112]
    assert plan.sram_bytes_needed <= plan.sram_bytes_available
    with pytest.raises(InfeasibleError) as err:
        make_plan(_case("m1_gpt2_small", micro_batch=112, activation_checkpointing="none"))
    assert err.value.problems[0].path == "training.micro_batch"


@pytest.mark.parametrize("case", ["m4_esm2_35m_cs2", "m5_esm2_35m_cs3"])
def test_esm2_runs_its_published_micro_batch_of_64(case: str):
    """M4 and M5 (ALCF logs): ESM-2 35M chose 32 micro-batches of 64."""
    plan = make_plan(_case(case, micro_batch=64))
    assert plan.micro_batches == [64] * 32


def test_a_micro_batch_that_cannot_fit_is_refused_naming_the_field_and_the_peak():
    with pytest.raises(InfeasibleError) as err:
        make_plan(_case("m1_gpt2_small", global_batch=400, micro_batch=400))
    problem = err.value.problems[0]
    assert problem.path == "training.micro_batch"
    # Reported in the mode that needs least (offload), at the point of its schedule that needs most.
    assert "checkpointing 'offload', at its peak in the forward pass of head.softmax_loss" in problem.message
    assert "at most 131 fit" in problem.message
