"""The Llama 3, Mistral and Mixtral presets against their published parameter counts, and the block's new checks.

Each published total is the one in the model's release (config.json and model card, or the paper's table,
cited in configs/models/llama3_mistral.yaml).  wss counts the streamed kernels: without the norm gains
(about 0.003%), so each count must lie within 0.5% of the published one, rounded as published.
"""

from __future__ import annotations

import pytest
from core_helpers import assert_clear_scenario_error, scenario_dict

import wss
from wss.cli import main
from wss.model.workload import StreamedKernel, expand_model

#: Published totals (billions of parameters), as the releases round them.
PUBLISHED = {
    "llama-3-8b": 8.03e9,
    "llama-3-70b": 70.6e9,
    "llama-3.2-1b": 1.24e9,
    "mistral-7b": 7.24e9,
    "mixtral-8x7b": 46.7e9,
}


def kernels(model: str) -> list[StreamedKernel]:
    s = wss.load_scenario(scenario_dict(model=model, global_batch=1, training={"seq_len": 8192}))
    return [k for k in expand_model(s.workload.model, 0.0, 1) if isinstance(k, StreamedKernel)]


def total_params(model: str) -> int:
    return sum(k.params for k in kernels(model) if k.tied_to is None)


def active_params(model: str) -> float:
    """Parameters a token uses: an expert's count once per token routed to it (top_k / experts of them)."""
    return sum(k.params * k.token_share for k in kernels(model) if k.tied_to is None)


@pytest.mark.parametrize("model", sorted(PUBLISHED))
def test_preset_parameter_count_matches_the_published_total(model):
    counted, published = total_params(model), PUBLISHED[model]
    print(f"{model}: wss counts {counted:,} parameters, published {published:.3g}")
    assert counted == pytest.approx(published, rel=5e-3)


def test_mixtral_active_parameters_match_the_published_figure():
    counted, published = active_params("mixtral-8x7b"), 12.9e9
    print(f"mixtral-8x7b: wss counts {counted:,.0f} active parameters per token, published {published:.3g}")
    assert counted == pytest.approx(published, rel=5e-3)
    # By hand: embedding and head, and per block attention, router and 2 of 8 SwiGLU experts.
    d, dff = 4096, 14336
    block = (32 + 16) * 128 * d + d * d + 8 * d + 2 * 3 * d * dff
    assert counted == 2 * 32000 * d + 32 * block


def test_exact_counts_by_hand():
    d = 4096
    llama_block = (32 + 2 * 8) * 128 * d + d * d + 3 * d * 14336
    assert total_params("llama-3-8b") == 2 * 128256 * d + 32 * llama_block == 8_029_995_008
    assert total_params("mistral-7b") == 2 * 32000 * d + 32 * llama_block == 7_241_465_856
    e = 2048
    assert total_params("llama-3.2-1b") == 128256 * e + 16 * ((32 + 16) * 64 * e + e * e + 3 * e * 8192)
    f = 8192
    assert total_params("llama-3-70b") == 2 * 128256 * f + 80 * ((64 + 16) * 128 * f + f * f + 3 * f * 28672)


@pytest.mark.parametrize(("model", "kv", "window", "tied"), [
    ("llama-3-8b", 8, None, False), ("llama-3-70b", 8, None, False), ("llama-3.2-1b", 8, None, True),
    ("mistral-7b", 8, 4096, False), ("mixtral-8x7b", 8, None, False),
])
def test_preset_attention(model, kv, window, tied):
    s = wss.load_scenario(scenario_dict(model=model, global_batch=1, training={"seq_len": 8192}))
    block = next(layer for layer in s.workload.model.layers if layer.kind == "transformer_block")
    assert (block.kv_heads, block.window, block.causal, block.ffn) == (kv, window, True, "swiglu")
    assert s.workload.model.layers[-1].tied is tied


# --- the block's checks, one line each through wss validate ---------------------------------------------------

def block_model(seq: int = 64, **options) -> dict:
    block = {"kind": "transformer_block", "d_model": 256, "n_heads": 8, "causal": True, **options}
    return {"name": "m", "input": "tokens", "seq_len": seq,
            "layers": [{"kind": "embedding", "vocab_size": 100, "d_model": 256}, block,
                       {"kind": "output_head", "d_model": 256, "vocab_size": 100}]}


@pytest.mark.parametrize(("options", "field", "words"), [
    ({"n_kv_heads": 16}, "n_kv_heads", "16 exceeds n_heads 8"),
    ({"n_kv_heads": 3}, "n_kv_heads", "3 does not divide n_heads 8"),
    ({"moe": {"experts": 4, "top_k": 5}}, "moe.top_k", "5 experts per token exceed the block's 4 experts"),
    ({"moe": {"experts": 4, "top_k": 2, "capacity_factor": 3}}, "moe.capacity_factor", "cannot compute more"),
    ({"window": 128}, "window", "a window of 128 tokens is longer than the sequence, 64 tokens"),
    ({"window": 16, "causal": False}, "window", "causal attention only"),
])
def test_a_bad_attention_or_expert_setting_is_one_line_naming_file_and_field(options, field, words, tmp_path,
                                                                             capsys):
    raw = scenario_dict(model=block_model(**options), global_batch=1)
    assert_clear_scenario_error(raw, f"workload.model.layers.1.{field}", words, tmp_path, capsys)
    assert main(["validate", str(tmp_path / "s.yaml")]) == 2
    line = capsys.readouterr().err.strip()
    assert str(tmp_path / "s.yaml") in line and "Traceback" not in line


def test_a_window_as_long_as_the_sequence_is_accepted():
    wss.load_scenario(scenario_dict(model=block_model(window=64), global_batch=1))
