"""The ops of vision and diffusion transformers' own layers: patches, class token, conditioning, adaLN, heads.

Sources: A. Dosovitskiy et al., "An Image is Worth 16x16 Words: Transformers for Image Recognition at
Scale", 2021 (ViT: patch embedding, class token, learned positions, the head on the class token) and
W. Peebles and S. Xie, "Scalable Diffusion Models with Transformers", 2023 (DiT: the timestep and label
embeddings, adaLN-Zero blocks, the final layer with a learned variance).

A sample's tokens are its patches (and its class token): ``s`` below.  Every op is counted per token,
as the transformer's are (``wss.model.workload.builder``); work done once per sample is spread over the
sample's ``s`` tokens, so a step's totals are exact:

* per-sample kernels (the conditioning MLP and table, each block's adaLN linear, the classifier) carry
  ``tokens_per_input = s``: their cycles are priced on one input vector per sample and their FLOPs are
  ``2 M K`` per sample;
* per-sample non-weight work (SiLU of the conditioning vector, the sinusoid, the softmax over classes)
  is ``flops / s`` per token, and what it keeps for backward ``ceil(elements / s)`` per token.

Counting conventions beyond the builder's (layer norm 8 per element, GELU 8, SiLU 4, residual 1,
softmax 5 per logit): the sinusoid is 1.5 per feature (a product per frequency, a cosine or sine per
feature); adaLN's modulation ``x (1 + scale) + shift`` is 2 per element and keeps the normalised
input (the scale's gradient reads it); a gate ``alpha * branch`` is 1 per element and keeps the
branch's output; a mean pool is 1 per element; the diffusion loss is a mean squared error, 3 per
output value (subtract, square, sum; the learned variance's bound term counted the same), and its
backward ``2 (y - t)`` is 2 per value.

Biases and norm gains are not counted (as for the transformer), nor DiT's fixed sin-cos position
table (a constant, not a weight).  The patch projection is priced on every token, the class token's
position included: ``1 / s`` too much for that one kernel (0.5% of it for ViT-B/16).
"""

from __future__ import annotations

import math

from wss.model.scenario.workload import (
    ClassificationHead,
    DiffusionHead,
    DiTBlock,
    LabelEmbedding,
    PatchEmbedding,
    TimestepEmbedding,
)
from wss.model.workload.conventions import LN_FLOPS, SILU_FLOPS
from wss.model.workload.ops import Op, StreamedKernel, WaferOp

__all__ = ["VISION_LAYERS", "vision_layer_ops", "modulated_block"]

#: The layer kinds whose ops this module writes (a DiT block's are the transformer block's, modulated).
VISION_LAYERS = (PatchEmbedding, TimestepEmbedding, LabelEmbedding, ClassificationHead, DiffusionHead)
#: FLOPs of the timestep's sinusoid per feature: a product per frequency (half the features), a cosine or sine each.
SINUSOID_FLOPS = 1.5
#: adaLN's modulation ``x (1 + scale) + shift`` per element (the ``1 + scale`` is per sample).
MODULATE_FLOPS = 2.0
#: A gate ``alpha * branch`` per element (adaLN-Zero).
GATE_FLOPS = 1.0
#: A mean squared error per output value: subtract, square, add.
MSE_FLOPS = 3.0
#: Its backward, ``2 (y - t)`` per value, over its forward.
MSE_BACKWARD = 2.0 / MSE_FLOPS


def _per_sample(elements: int, s: int) -> int:
    """Elements kept once per sample, per token (rounded up: never less than what is kept)."""
    return math.ceil(elements / s)


def _matmul(name: str, layer: str, out_f: int, in_f: int, density: float, *, per_sample_of: int = 1,
            block: int | None = None, is_output: bool = False) -> StreamedKernel:
    """A streamed matmul keeping its input for backward; ``per_sample_of = s`` makes it a per-sample one."""
    return StreamedKernel(name, layer, "matmul", out_f, in_f, density, block,
                          stored_elements_per_token=_per_sample(in_f, per_sample_of), is_output=is_output,
                          tokens_per_input=per_sample_of)


def _table(name: str, layer: str, rows: int, d: int, density: float, *, per_sample_of: int = 1) -> StreamedKernel:
    """A streamed table the wafer gathers rows of (no multiply-accumulate, nothing kept for backward)."""
    return StreamedKernel(name, layer, "embedding", rows, d, density, None, stored_elements_per_token=0,
                          tokens_per_input=per_sample_of)


def vision_layer_ops(layer: object, name: str, density: float, s: int) -> list[Op]:
    """The ops of one vision or diffusion layer (a kind of :data:`VISION_LAYERS`) over samples of ``s`` tokens."""
    if isinstance(layer, PatchEmbedding):
        return _patch_embedding(layer, name, density)
    if isinstance(layer, TimestepEmbedding):
        return _timestep_embedding(layer, name, density, s)
    if isinstance(layer, LabelEmbedding):
        return _label_embedding(layer, name, density, s)
    if isinstance(layer, ClassificationHead):
        return _classification_head(layer, name, density, s)
    if isinstance(layer, DiffusionHead):
        return _diffusion_head(layer, name, density, s)
    raise NotImplementedError(f"no vision rule for layer {name!r} ({type(layer).__name__})")


def _patch_embedding(layer: PatchEmbedding, name: str, density: float) -> list[Op]:
    """The stride-p convolution as the matmul it is (``d x p^2 C`` over the patches), the class token, positions."""
    d = layer.d_model
    ops: list[Op] = [_matmul(f"{name}.patches", name, d, layer.patch_features, density)]
    if layer.class_token:  # one learned row per sample, in the position ahead of the patches
        ops.append(_table(f"{name}.class_token", name, 1, d, density, per_sample_of=layer.tokens))
    if layer.positions == "learned":
        ops.append(_table(f"{name}.positions", name, layer.tokens, d, density))
    if layer.positions != "none":  # learned or fixed sin-cos: added to every token
        ops.append(WaferOp(f"{name}.add_positions", name, float(d), None))
    return ops


def _timestep_embedding(layer: TimestepEmbedding, name: str, density: float, s: int) -> list[Op]:
    """DiT's ``t -> [cos, sin](t w) -> Linear(f, d) -> SiLU -> Linear(d, d)``, once per sample."""
    d, f = layer.d_model, layer.frequency_dim
    return [
        WaferOp(f"{name}.sinusoid", name, SINUSOID_FLOPS * f / s, None),  # the timestep has no gradient
        _matmul(f"{name}.fc1", name, d, f, density, per_sample_of=s),
        WaferOp(f"{name}.silu", name, SILU_FLOPS * d / s, None, stored_elements_per_token=_per_sample(d, s)),
        _matmul(f"{name}.fc2", name, d, d, density, per_sample_of=s),
    ]


def _label_embedding(layer: LabelEmbedding, name: str, density: float, s: int) -> list[Op]:
    """The label's row, added to the timestep's embedding: the conditioning vector ``c``, once per sample."""
    d = layer.d_model
    return [
        _table(f"{name}.labels", name, layer.rows, d, density, per_sample_of=s),
        WaferOp(f"{name}.add", name, d / s, None),
    ]


def _adaln(name: str, layer: str, d: int, width: int, density: float, s: int, block: int | None) -> list[Op]:
    """SiLU of the conditioning vector and the linear ``d -> width`` giving the shifts, scales (and gates)."""
    return [
        WaferOp(f"{name}.adaln_silu", layer, SILU_FLOPS * d / s, block, stored_elements_per_token=_per_sample(d, s)),
        _matmul(f"{name}.adaln", layer, width, d, density, per_sample_of=s, block=block),
    ]


def _modulate(name: str, layer: str, d: int, block: int | None) -> WaferOp:
    """``x (1 + scale) + shift`` on the normalised tokens, keeping them for the scale's gradient."""
    return WaferOp(name, layer, MODULATE_FLOPS * d, block, stored_elements_per_token=d)


def modulated_block(layer: DiTBlock, ops: list[Op], name: str, density: float, s: int, block: int) -> list[Op]:
    """A DiT block: the transformer block's ``ops`` (pre-norm, sequential) with adaLN(-Zero) around them.

    The block first turns the conditioning vector into its modulation (SiLU, then ``d -> 6 d``, or ``4 d``
    without gates); each norm's output is then shifted and scaled, and with adaLN-Zero each branch's
    output is gated before its residual add.  ``density``: the adaLN linear's (the block's default).
    """
    d = layer.d_model
    out = _adaln(name, name, d, layer.modulation_width, density, s, block)
    for op in ops:
        if op.name in (f"{name}.residual1", f"{name}.residual2") and layer.modulation == "adaln_zero":
            part = op.name.rsplit(".", 1)[1].replace("residual", "gate")
            out.append(WaferOp(f"{name}.{part}", name, GATE_FLOPS * d, block, stored_elements_per_token=d))
        out.append(op)
        if op.name in (f"{name}.ln1", f"{name}.ln2"):
            out.append(_modulate(f"{name}.modulate{op.name[-1]}", name, d, block))
    return out


def _classification_head(layer: ClassificationHead, name: str, density: float, s: int) -> list[Op]:
    """ViT's head: the final norm on every token, the pooled vector (class token or mean), ``d -> classes``
    and the softmax cross-entropy, once per sample."""
    d, c = layer.d_model, layer.classes
    ops: list[Op] = []
    if layer.norm:
        ops.append(WaferOp(f"{name}.ln", name, LN_FLOPS * d, None, stored_elements_per_token=d))
    if layer.pool == "mean":
        ops.append(WaferOp(f"{name}.pool", name, float(d), None))
    return [
        *ops,
        _matmul(f"{name}.proj", name, c, d, density, per_sample_of=s, is_output=True),
        WaferOp(f"{name}.softmax_loss", name, 5.0 * c / s, None, working_elements_per_token=_per_sample(c, s),
                backward_factor=0.4),  # as the output head's: p - onehot, ~2 FLOPs per logit
    ]


def _diffusion_head(layer: DiffusionHead, name: str, density: float, s: int) -> list[Op]:
    """DiT's final layer: adaLN (shift and scale, ``d -> 2 d``), the norm, ``d -> p^2 C_out`` per token, the loss."""
    d, out = layer.d_model, layer.out_features
    return [
        *_adaln(name, name, d, 2 * d, density, s, None),
        WaferOp(f"{name}.ln", name, LN_FLOPS * d, None, stored_elements_per_token=d),
        _modulate(f"{name}.modulate", name, d, None),
        _matmul(f"{name}.proj", name, out, d, density, is_output=True),
        WaferOp(f"{name}.mse_loss", name, MSE_FLOPS * out, None, working_elements_per_token=out,
                backward_factor=MSE_BACKWARD),
    ]
