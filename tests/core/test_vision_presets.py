"""The vision presets' parameter counts against the published totals, and their shapes by hand."""

from __future__ import annotations

import pytest
from core_helpers import scenario_dict

import wss
from wss.model.workload import StreamedKernel, expand_model


def weights(model: str) -> tuple[int, int]:
    """The preset's weights (every streamed kernel) and its tokens per sample."""
    s = wss.load_scenario(scenario_dict(model=model, global_batch=1))
    ops = expand_model(s.workload.model, 0.0, s.seq_len)
    return sum(k.params for k in ops if isinstance(k, StreamedKernel)), s.seq_len


def dit_weights(d: int, layers: int, patch: int = 2, channels: int = 4, classes: int = 1000) -> int:
    """DiT's weights: patchify, the timestep MLP (256 features), the label table with its 'no label' row, blocks
    of attention (4 d^2), a 4 d MLP (8 d^2) and adaLN-Zero (6 d^2), and the final layer (adaLN 2 d^2 and
    d -> p^2 x 2 C)."""
    return (d * patch * patch * channels + (256 * d + d * d) + (classes + 1) * d + layers * 18 * d * d
            + 2 * d * d + d * patch * patch * 2 * channels)


# (preset, published total, its source, tokens per sample)
PUBLISHED = [
    ("vit-base-16", 86.6e6, "ViT-B/16, 'An Image is Worth 16x16 Words' (2021) and its released code", 197),
    ("dit-xl-2", 675e6, "DiT-XL/2, 'Scalable Diffusion Models with Transformers' (2023)", 256),
]


@pytest.mark.parametrize(("model", "published", "source", "tokens"), PUBLISHED, ids=[p[0] for p in PUBLISHED])
def test_preset_parameters_match_the_published_total(model, published, source, tokens):
    count, s = weights(model)
    print(f"{model}: wss {count:,} weights, published {published:,.0f} ({source}): {count / published - 1:+.3%}")
    assert s == tokens
    assert abs(count / published - 1) <= 0.005


def test_dit_xl_2_is_the_dit_formula():
    assert weights("dit-xl-2")[0] == dit_weights(1152, 28) == 674_345_088


def test_dit_2b_has_the_modelzoo_shape():
    """No exact total is published for the modelzoo's DiT-2B: its shape is checked by the formula that gives
    DiT-XL/2's published total (the test above), at d 2048 and 30 layers."""
    count, s = weights("dit-2b")
    print(f"dit-2b: wss {count:,} weights; no published total (the name says 2B)")
    assert s == 256 and count == dit_weights(2048, 30) == 2_280_179_712
    model = wss.load_scenario(scenario_dict(model="dit-2b", global_batch=1)).workload.model
    block = next(layer for layer in model.layers if layer.kind == "dit_block")
    assert (block.repeat, block.d_model, block.n_heads, block.ffn_width, block.modulation) == (
        30, 2048, 16, 8192, "adaln_zero")


def test_the_presets_are_listed():
    assert {"vit-base-16", "dit-xl-2", "dit-2b"} <= set(wss.list_presets()["model"])


def test_dit_xl_2_forward_flops_match_the_paper():
    """DiT gives DiT-XL/2 118.6 Gflops a forward pass, counting a multiply-add as one: its matmuls and the
    attention's two products.  Counting adaLN's d -> 6 d on every token instead of once per sample would add
    28 x 6 d^2 x 255 = 57 G multiply-adds."""
    s = wss.load_scenario(scenario_dict(model="dit-xl-2", global_batch=1))
    ops = expand_model(s.workload.model, 0.0, s.seq_len)
    matmuls = sum(k.dense_flops_per_token() for k in ops if isinstance(k, StreamedKernel))
    block = next(layer for layer in s.workload.model.layers if layer.kind == "dit_block")
    products = block.repeat * 4 * s.seq_len * block.n_heads * block.head_width  # Q K^T and A V, 2 FLOPs each
    macs = (matmuls + products) * s.seq_len / 2
    print(f"dit-xl-2: {macs / 1e9:.2f} G multiply-adds a forward pass, published 118.6")
    assert macs == pytest.approx(118.6e9, rel=0.005)
