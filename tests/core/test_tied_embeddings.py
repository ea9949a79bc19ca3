"""Tied output heads share the embedding's weights: stored, counted and updated once."""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS

import wss
from wss.errors import ScenarioError


def tiny_gpt(tied: bool, steps: int = 2) -> dict:
    return {
        "hardware": {"preset": "cs2-cluster", "wafers": 2},
        "workload": {
            "model": {
                "name": "tiny",
                "input": "tokens",
                "seq_len": 64,
                "layers": [
                    {"kind": "embedding", "name": "embed", "vocab_size": 1000, "d_model": 128},
                    {"kind": "transformer_block", "name": "block", "repeat": 2, "d_model": 128, "n_heads": 4},
                    {"kind": "output_head", "name": "head", "d_model": 128, "vocab_size": 1000, "tied": tied},
                ],
            }
        },
        "training": {"global_batch": 8, "optimizer": "adamw", "steps": steps},
    }


def test_gpt3_175b_parameters_match_table_2_1():
    plan = wss.plan(wss.load_scenario(SCENARIOS / "gpt3_175b.yaml"))
    L, d, V, n_ctx = 96, 12288, 50257, 2048
    assert plan.params == 12 * L * d * d + V * d + n_ctx * d  # embeddings counted once
    assert abs(plan.params / 175.0e9 - 1) < 0.005  # "175B" is a rounded name: the count is 174.6e9


def test_tied_head_is_stored_once_but_still_streamed():
    untied, tied = wss.plan(tiny_gpt(False)), wss.plan(tiny_gpt(True))
    head = [k for k in tied.kernels if k.kernel.is_output][0]
    table = [k for k in tied.kernels if k.kernel.name == "embed.tokens"][0]
    assert head.state_owner == table.index and not head.owns_state and table.owns_state
    assert head.state_bytes == 0
    assert untied.memoryx_state_bytes - tied.memoryx_state_bytes == pytest.approx(1000 * 128 * 16, rel=1e-12)
    assert untied.params - tied.params == 1000 * 128
    assert head.stream_bytes == [k for k in untied.kernels if k.kernel.is_output][0].stream_bytes


@pytest.mark.parametrize("clipping", ["none", "global_norm"])
def test_tied_head_gradient_accumulates_into_the_embedding_update(clipping):
    raw = tiny_gpt(True)
    raw["training"]["gradient_clipping"] = clipping
    result = wss.simulate(raw)
    for step in range(2):
        jobs = [r for r in result.records if r.where == "memoryx" and r.step == step]
        head = [r for r in jobs if r.name == "head.proj"]
        table = [r for r in jobs if r.name == "embed.tokens"]
        assert [r.phase for r in head] == ["accumulate"]
        assert head[0].end_s <= table[0].start_s  # the head's gradient is in the buffer the update reads
        if clipping == "none":
            assert [r.phase for r in table] == ["update"]
            # w, m, v and the accumulated gradient in fp32, and the incoming summed gradient in fp16
            assert table[0].bytes_in == 1000 * 128 * (4 * 4 + 2)
        else:  # the norm job adds the incoming gradient into the shared accumulator; the update reads that
            assert [r.phase for r in table] == ["norm", "update"]
            assert table[0].bytes_in == 1000 * 128 * (4 + 2) and table[1].bytes_in == 1000 * 128 * 4 * 4


def test_tied_head_forward_waits_for_the_shared_update():
    result = wss.simulate(tiny_gpt(True))
    update0 = next(r for r in result.records if r.name == "embed.tokens" and r.phase == "update" and r.step == 0)
    head_fwd1 = next(
        r for r in result.records if r.name == "head.proj" and r.phase == "forward" and r.step == 1
    )
    assert head_fwd1.start_s >= update0.end_s


def test_tied_head_needs_a_matching_embedding():
    bad = tiny_gpt(True)
    bad["workload"]["model"]["layers"][2]["vocab_size"] = 999
    with pytest.raises(ScenarioError, match="tied output head"):
        wss.load_scenario(bad)


def test_choosing_a_preset_on_a_resolved_scenario_replaces_the_part():
    base = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml")
    moved = wss.load_scenario(base, {"hardware.memoryx.preset": "memoryx-2.4pb"})
    assert moved.hardware.memoryx.name == "memoryx-2.4pb"
    assert moved.hardware.memoryx.flash_capacity_bytes > 0
    other = wss.load_scenario(base, {"workload.model": "gpt3-1.3b"})
    assert other.workload.model.name == "gpt3-1.3b"
