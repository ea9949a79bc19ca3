"""Workload description: a model as a list of layers.

Layer kinds
-----------
``dense``
    One streamed matmul (a fully connected layer) with its own weight sparsity
    and activation function.
``embedding``
    Token (and optional position) embedding table, streamed like any other
    kernel; the wafer gathers rows.
``transformer_block``
    Expands into its streamed matmuls (QKV, attention output, FFN up, FFN
    down) and its on-wafer non-weight work (attention scores and context,
    softmax, layer norms, activation, residuals).  ``causal: true`` counts
    only the query-key pairs a causal mask leaves: ``s (s + 1) / 2`` per
    sequence instead of ``s^2`` (default false: full attention).
    ``ffn: swiglu`` gates the FFN (Llama): three matmuls, gate and up
    ``d -> d_ff`` and down ``d_ff -> d``, with ``SiLU(gate) * up`` between.
    ``parallel: true`` runs attention and the FFN side by side on one
    normalised input and sums their outputs (GPT-J): one layer norm.
    ``norm: post`` puts each norm after its residual add (BERT).
    ``n_kv_heads`` gives grouped-query attention fewer key and value heads
    than query heads (1: multi-query); ``window`` bounds each query's keys
    to a sliding window (Mistral); ``moe`` replaces the FFN by a mixture of
    experts behind a router (Mixtral).
``pooler``
    BERT's pooler and next-sentence head: a dense ``d -> d`` with tanh on
    the [CLS] token, then ``d -> classes``, softmax and loss.  A side branch:
    the width after it is its input's.
``output_head``
    The final projection to the vocabulary or classes, plus softmax and loss.
    ``transform: true`` puts BERT's MLM transform before it (a dense
    ``d -> d``, GELU and a layer norm).

Vision and diffusion transformers (ViT: Dosovitskiy et al., "An Image is
Worth 16x16 Words", 2021; DiT: Peebles & Xie, "Scalable Diffusion Models
with Transformers", 2023) read an image or a latent (``input: image`` or
``latent``); a sample's tokens are its patches (and a class token):

``patch_embedding``
    A convolution whose stride is its kernel, cutting the ``H x W x C``
    input into ``p x p`` patches and projecting each to ``d_model``: the
    matmul ``d_model x p^2 C`` over the patches.  Optionally a learned class
    token (one more position) and learned or fixed (sin-cos) positions.
``timestep_embedding``, ``label_embedding``
    DiT's conditioning, once per sample: the diffusion timestep's sinusoidal
    features through an MLP (``f -> d``, SiLU, ``d -> d``), plus a class
    label's embedding row (with a "no label" row for classifier-free
    guidance).  Side branches: the width after them is their input's.
``dit_block``
    A transformer block (every ``transformer_block`` field) with adaLN(-Zero)
    conditioning: a linear ``d -> 6 d`` (``4 d`` for plain adaLN) of the
    conditioning vector per block sets each norm's shift and scale and each
    branch's gate.
``classification_head``
    ViT's head: a layer norm, the class token (or the mean of the tokens),
    then ``d -> classes``, softmax and loss, once per sample.
``diffusion_head``
    DiT's final layer: adaLN (a linear ``d -> 2 d``), then ``d -> p^2 C_out``
    per token, twice the channels with a learned variance (``learn_sigma``),
    and the mean-squared-error loss.

Sparsity
--------
``workload.sparsity`` and a layer's ``sparsity`` take one number, the
fraction of zero weights of every streamed kernel they cover.  A transformer
block's ``sparsity`` and ``workload.sparsity`` also take a mapping by matmul
role (:data:`BLOCK_ROLES`; the workload's also ``embedding`` and
``output_head``, :data:`WORKLOAD_ROLES`), plus ``default`` for the roles not
given.  A kernel takes, in order, its layer's value for its role, its
layer's default, the workload's value for its role, the workload's default,
and 0.  A tied output head shares its embedding table's weights and mask,
so it takes the table's sparsity and cannot set its own.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from wss.model.scenario.base import WIDTH, Flag, Fraction, Frozen, Integer, Range, Real, bounded

#: The most layers a model may have, repeats included: planning and simulating cost grow with them.
MAX_LAYERS = 10_000

__all__ = [
    "BLOCK_ROLES",
    "WORKLOAD_ROLES",
    "PATCH_INPUTS",
    "BlockSparsity",
    "WorkloadSparsity",
    "DenseLayer",
    "EmbeddingLayer",
    "MixtureOfExperts",
    "TransformerBlock",
    "OutputHead",
    "Pooler",
    "PatchEmbedding",
    "TimestepEmbedding",
    "LabelEmbedding",
    "DiTBlock",
    "ClassificationHead",
    "DiffusionHead",
    "Layer",
    "ModelConfig",
    "WorkloadConfig",
]


#: The streamed matmuls of a transformer block, by role: the last part of their kernel names
#: (``block.3.qkv``, ``block.3.attn_out``, ``block.3.ffn_up``, ``block.3.ffn_down``).
#: A gated (SwiGLU) FFN adds ``block.3.ffn_gate``.  A mixture of experts adds its router
#: (``block.3.router``) and each expert's matmuls (``block.3.expert.5.ffn_up``: roles ``expert_gate``,
#: ``expert_up``, ``expert_down``); its shared experts, if any, are the block's ``ffn_*`` kernels.
BLOCK_ROLES = ("qkv", "attn_out", "ffn_gate", "ffn_up", "ffn_down", "router", "expert_gate", "expert_up",
               "expert_down")
#: The roles of an FFN's matmuls, and of an expert's.
FFN_ROLES = ("ffn_gate", "ffn_up", "ffn_down")
EXPERT_ROLES = ("expert_gate", "expert_up", "expert_down")
#: The roles ``workload.sparsity`` also takes: every embedding table, and every untied output head.
WORKLOAD_ROLES = (*BLOCK_ROLES, "embedding", "output_head")


def _role(description: str) -> Any:
    return Field(None, description=f"Weight sparsity of {description} (default: this mapping's default), in [0, 1).")


class BlockSparsity(Frozen):
    """Weight sparsity of a transformer block's streamed matmuls by role; a role not given takes ``default``."""

    default: Fraction | None = Field(
        None, description="Sparsity of the roles not given (default: the workload's sparsity for each role), in [0, 1)."
    )
    qkv: Fraction | None = _role(
        "the query, key and value projection (d_model -> (n_heads + 2 n_kv_heads) d_head)"
    )
    attn_out: Fraction | None = _role("the attention output projection (n_heads d_head -> d_model)")
    ffn_gate: Fraction | None = _role("a gated (SwiGLU) FFN's gate matmul (d_model -> d_ff)")
    ffn_up: Fraction | None = _role("the FFN's first matmul (d_model -> d_ff)")
    ffn_down: Fraction | None = _role("the FFN's second matmul (d_ff -> d_model)")
    router: Fraction | None = _role("a mixture of experts' router (d_model -> experts)")
    expert_gate: Fraction | None = _role("each expert's gate matmul, with ffn: swiglu (d_model -> d_ff)")
    expert_up: Fraction | None = _role("each expert's first matmul (d_model -> d_ff)")
    expert_down: Fraction | None = _role("each expert's second matmul (d_ff -> d_model)")

    def of(self, role: str | None) -> float | None:
        """The sparsity this mapping gives ``role`` (None: a kernel with no role), else its default."""
        value = getattr(self, role) if role in type(self).model_fields else None
        return value if value is not None else self.default


class WorkloadSparsity(BlockSparsity):
    """Default weight sparsity by role, for every layer that does not set its own."""

    default: Fraction | None = Field(
        None, description="Sparsity of every streamed kernel whose role is not given (default 0: dense), in [0, 1)."
    )
    embedding: Fraction | None = _role("every embedding table (tokens and learned positions)")
    output_head: Fraction | None = _role(
        "every untied output head (a tied head shares its embedding table's weights: set 'embedding')"
    )


def _check_roles(data: Any, roles: tuple[str, ...], owner: str) -> Any:
    """Reject a ``sparsity`` mapping whose keys are not roles, naming them and the roles known.

    A model-level check (before validation), so that an error can name the bad key's own path
    (``sparsity.ffnup``): that is also what a ``--set`` of the key is matched against.
    """
    value = data.get("sparsity") if isinstance(data, dict) else None
    if not isinstance(value, dict):
        return data
    if not roles:
        where = f"sparsity.{next(iter(value))}" if len(value) == 1 else "sparsity"
        raise ValueError(
            f"{where}: {owner} is one number; roles ({', '.join(WORKLOAD_ROLES)}) apply to "
            "transformer_block layers and to workload.sparsity"
        )
    known = (*roles, "default")
    unknown = [str(key) for key in value if key not in known]
    if len(unknown) == 1:
        raise ValueError(f"sparsity.{unknown[0]}: unknown role; {owner} takes {', '.join(known)}")
    if unknown:
        listed = ", ".join(repr(k) for k in unknown)
        raise ValueError(f"sparsity: unknown roles {listed}; {owner} takes {', '.join(known)}")
    return data


class _LayerBase(Frozen):
    #: The sparsity roles of this kind of layer (none: ``sparsity`` is one number).
    _roles: ClassVar[tuple[str, ...]] = ()

    name: str | None = Field(None, description="Layer name used in records (default: kind and index).")
    repeat: Integer = bounded(
        1,
        description="Repeat this layer this many times in sequence; a model has at most 10,000 layers in all.",
        within=Range(1, MAX_LAYERS),
    )
    sparsity: Fraction | BlockSparsity | None = Field(
        None, description="Weight sparsity of this layer's streamed kernels (default: workload.sparsity), in [0, 1)."
    )

    @model_validator(mode="before")
    @classmethod
    def _sparsity_roles(cls, data: Any) -> Any:
        kind = str(typing.get_args(cls.model_fields["kind"].annotation)[0])
        return _check_roles(data, cls._roles, f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} layer's sparsity")


class DenseLayer(_LayerBase):
    """A fully connected layer: one streamed matmul, out_features x in_features."""

    kind: Literal["dense"]
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of this layer's kernel (default: workload.sparsity's default), in [0, 1)."
    )
    in_features: Integer = bounded(description="Input features K.", within=WIDTH)
    out_features: Integer = bounded(description="Output features M.", within=WIDTH)
    activation: Literal["relu", "gelu", "tanh", "none"] = Field(
        "relu", description="Elementwise activation after the matmul."
    )


class EmbeddingLayer(_LayerBase):
    """Token embedding (vocab_size x d_model) and optional learned positions."""

    kind: Literal["embedding"]
    sparsity: Fraction | None = Field(
        None,
        description="Weight sparsity of this layer's tables (default: workload.sparsity's embedding role, "
        "else its default), in [0, 1).",
    )
    vocab_size: Integer = bounded(description="Rows of the embedding table.", within=WIDTH)
    d_model: Integer = bounded(description="Embedding width.", within=WIDTH)
    max_positions: Integer = bounded(
        0, description="Rows of a learned position table (0: none).", within=Range(0, WIDTH.high)
    )


#: A transformer block's variants that are serialised only when set (the block's resolved form is otherwise the one
#: it had before they existed).
_OPTIONAL_VARIANTS = ("n_kv_heads", "window", "moe")


class MixtureOfExperts(Frozen):
    """A mixture-of-experts FFN: a router picks ``top_k`` of ``experts`` FFNs per token (Shazeer et al. 2017).

    On a weight-streaming cluster every wafer trains on its own shard of the batch, whose tokens route
    to every expert, so every expert's weights stream to every wafer in every pass; each expert computes
    only its capacity of the tokens (docs/model.md, "Mixture of experts").
    """

    experts: Integer = bounded(description="Routed experts, each an FFN of the block's d_ff and ffn kind.",
                               within=Range(1, 100_000))
    top_k: Integer = bounded(description="Experts each token is routed to (at most experts).",
                             within=Range(1, 100_000))
    capacity_factor: Real = bounded(
        1.0,
        description="Token slots each expert computes per micro-batch, as a multiple of its mean load "
        "tokens x top_k / experts (GShard's expert capacity): tokens over it are dropped, empty slots are "
        "computed as padding. A router's load imbalance is declared here: a dropless router needs the busiest "
        "expert's load over the mean. At most experts / top_k (an expert computes every token).",
        within=Range(0.01, 100_000),
    )
    shared_experts: Integer = bounded(
        0,
        description="Experts every token goes through besides its routed ones (DeepSeekMoE), each of the "
        "block's d_ff: one FFN of shared_experts x d_ff, with the ffn_* sparsity roles.",
        within=Range(0, 100_000),
    )

    @property
    def token_share(self) -> float:
        """The mean fraction of a micro-batch's tokens routed to one expert: ``top_k / experts``."""
        return self.top_k / self.experts

    @model_validator(mode="after")
    def _routing(self) -> MixtureOfExperts:
        if self.top_k > self.experts:
            raise ValueError(f"top_k: {self.top_k} experts per token exceed the block's {self.experts} experts")
        if self.capacity_factor * self.top_k > self.experts:
            raise ValueError(
                f"capacity_factor: {self.capacity_factor:g} x top_k {self.top_k} / experts {self.experts} is over "
                f"1: an expert cannot compute more than every token (at most {self.experts / self.top_k:g})"
            )
        return self


class TransformerBlock(_LayerBase):
    """A transformer block (attention + FFN): pre-norm by default, optionally post-norm, parallel or gated."""

    _roles: ClassVar[tuple[str, ...]] = BLOCK_ROLES

    kind: Literal["transformer_block"]
    sparsity: Fraction | BlockSparsity | None = Field(
        None,
        description="Weight sparsity of the block's four matmuls: one number for all, or a mapping by role "
        f"({', '.join(BLOCK_ROLES)}) with an optional default for the roles not given (default: workload.sparsity); "
        "each in [0, 1).",
    )
    d_model: Integer = bounded(description="Model width.", within=WIDTH)
    n_heads: Integer = bounded(description="Attention heads.", within=Range(1, 100_000))
    d_head: Integer | None = bounded(None, description="Width of one head (default d_model / n_heads).", within=WIDTH)
    d_ff: Integer | None = bounded(None, description="FFN hidden width (default 4 d_model).", within=WIDTH)
    causal: Flag = Field(
        False,
        description="Causal (decoder) attention: each token attends to itself and the tokens before it, so the "
        "attention scores, softmax and context count s (s + 1) / 2 query-key pairs per sequence instead of s^2. "
        "Weights and bytes do not change.",
    )
    ffn: Literal["gelu", "swiglu"] = Field(
        "gelu",
        description="'gelu': two matmuls (up d_model -> d_ff, down d_ff -> d_model) with GELU between; 'swiglu': "
        "three (gate and up d_model -> d_ff, down d_ff -> d_model) with SiLU(gate) * up between (Shazeer 2020; "
        "Llama). The gate's sparsity role is ffn_gate.",
    )
    parallel: Flag = Field(
        False,
        description="Parallel attention and FFN (GPT-J, GPT-NeoX): both read the same normalised input and their "
        "outputs are added to the residual together, so the block has one layer norm instead of two. Same weights.",
    )
    n_kv_heads: Integer | None = bounded(
        None,
        description="Key and value heads (default n_heads). Fewer is grouped-query attention (Ainslie et al. "
        "2023; Llama 3, Mistral), each key-value head shared by n_heads / n_kv_heads query heads; 1 is "
        "multi-query attention (Shazeer 2019). The qkv matmul is d_model -> (n_heads + 2 n_kv_heads) d_head; "
        "a divisor of n_heads.",
        within=Range(1, 100_000),
    )
    window: Integer | None = bounded(
        None,
        description="Sliding-window attention (Mistral): each query attends to itself and at most window - 1 "
        "tokens before it, so a sequence of s tokens counts w (w + 1) / 2 + (s - w) w query-key pairs instead "
        "of s (s + 1) / 2. Causal blocks only; at most the sequence length (default: no window).",
        within=WIDTH,
    )
    moe: MixtureOfExperts | None = Field(
        None,
        description="Replace the FFN by a mixture of experts (Mixtral): a router d_model -> experts, softmax "
        "and top_k, then each token's top_k experts (each an FFN of d_ff and this block's ffn kind) and "
        "their weighted sum. Default: one dense FFN.",
    )
    norm: Literal["pre", "post"] = Field(
        "pre",
        description="'pre': each layer norm before its sub-layer (GPT); 'post': after the residual add (BERT, "
        "the original Transformer). Moves the norms only: same FLOPs and stored activations.",
    )

    @model_serializer(mode="wrap")
    def _omit_unset_variants(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave out the attention and FFN variants a block does not use, so that blocks written before
        they existed keep their resolved form (and the hash a baseline records)."""
        data = handler(self)
        for field in _OPTIONAL_VARIANTS:
            if getattr(self, field) is None:
                data.pop(field, None)
        return data

    @property
    def head_width(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def ffn_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @property
    def kv_heads(self) -> int:
        """Key and value heads: ``n_kv_heads``, else one per query head."""
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def dense_ffn_width(self) -> int:
        """The width of the FFN every token goes through: d_ff, or a mixture's shared experts' (0: none)."""
        return self.ffn_width if self.moe is None else self.moe.shared_experts * self.ffn_width

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerBlock:
        if self.d_head is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}; give d_head")
        if self.parallel and self.norm == "post":
            raise ValueError(
                "parallel: a parallel block normalises the input both branches share (pre-norm); norm: post is "
                "not supported with it"
            )
        if self.n_kv_heads is not None and (self.n_kv_heads > self.n_heads or self.n_heads % self.n_kv_heads):
            more = "exceeds" if self.n_kv_heads > self.n_heads else "does not divide"
            raise ValueError(
                f"n_kv_heads: {self.n_kv_heads} {more} n_heads {self.n_heads}; each key-value head serves a whole "
                "group of query heads (n_kv_heads is a divisor of n_heads)"
            )
        if self.window is not None and not self.causal:
            raise ValueError("window: a sliding window is modelled on causal attention only (Mistral); set causal: "
                             "true or drop the window")
        if isinstance(self.sparsity, BlockSparsity) and self.sparsity.ffn_gate is not None and self.ffn != "swiglu":
            raise ValueError("sparsity.ffn_gate: this block's FFN has no gate (ffn: gelu); the gate is ffn: swiglu's")
        if isinstance(self.sparsity, BlockSparsity):
            for role in BLOCK_ROLES:
                if getattr(self.sparsity, role) is not None and role not in self.roles():
                    owner = _ROLE_OWNERS[role].removeprefix("transformer_block layer ")
                    raise ValueError(f"sparsity.{role}: this block has no kernel of this role (it needs a block "
                                     f"{owner})")
        return self

    def roles(self) -> tuple[str, ...]:
        """The sparsity roles of this block's kernels (a gate only with ffn: swiglu; experts only with moe)."""
        gated = self.ffn == "swiglu"
        present = ["qkv", "attn_out"]
        if self.dense_ffn_width:
            present += [r for r in FFN_ROLES if gated or r != "ffn_gate"]
        if self.moe is not None:
            present += ["router", *(r for r in EXPERT_ROLES if gated or r != "expert_gate")]
        return tuple(present)


class Pooler(_LayerBase):
    """BERT's pooler and next-sentence head: dense d_model -> d_model + tanh on [CLS], then d_model -> classes.

    A side branch off the last block: the layer after it reads the same width it did.
    """

    kind: Literal["pooler"]
    sparsity: Fraction | None = Field(
        None,
        description="Weight sparsity of the pooler's two kernels (default: workload.sparsity's default), in [0, 1).",
    )
    d_model: Integer = bounded(description="Input width (the pooled [CLS] vector).", within=WIDTH)
    classes: Integer = bounded(
        2, description="Classes of the sentence-level head (next-sentence prediction: 2).", within=WIDTH
    )


class OutputHead(_LayerBase):
    """Final projection d_model -> vocab (or classes), softmax and loss."""

    kind: Literal["output_head"]
    sparsity: Fraction | None = Field(
        None,
        description="Weight sparsity of the projection (default: workload.sparsity's output_head role, else its "
        "default), in [0, 1).  Not for a tied head: it streams its embedding table's weights and mask, and takes "
        "its sparsity.",
    )
    d_model: Integer = bounded(description="Input width.", within=WIDTH)
    vocab_size: Integer = bounded(description="Output classes or vocabulary size.", within=WIDTH)
    tied: Flag = Field(
        False,
        description="The head's weights are the token embedding table (tied): MemoryX stores and updates "
        "them once; the head still streams them and its gradient adds into the embedding's.",
    )
    transform: Flag = Field(
        False,
        description="BERT's MLM transform before the projection: a dense d_model -> d_model, GELU and a layer "
        "norm. Its kernel is not tied; it takes this layer's sparsity, else workload.sparsity's default.",
    )


class _OncePerModel(_LayerBase):
    """A layer a model has once (a stem, a head, its conditioning): ``repeat`` stays 1."""

    @model_validator(mode="after")
    def _once(self) -> _OncePerModel:
        if self.repeat != 1:
            kind = typing.get_args(type(self).model_fields["kind"].annotation)[0]
            raise ValueError(f"repeat: a {kind} layer is not repeated (got {self.repeat})")
        return self


class PatchEmbedding(_OncePerModel):
    """ViT's and DiT's stem: p x p patches of the input, each projected to d_model (a stride-p convolution)."""

    kind: Literal["patch_embedding"]
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of the projection and tables (default: workload.sparsity's default), "
        "in [0, 1).",
    )
    image_size: Integer = bounded(
        description="Side of the square input, in pixels (input: image) or latent elements (input: latent).",
        within=WIDTH,
    )
    patch_size: Integer = bounded(description="Side of a patch: the convolution's kernel and stride.", within=WIDTH)
    in_channels: Integer = bounded(3, description="Channels of the input (3: RGB; 4: a VAE latent).", within=WIDTH)
    d_model: Integer = bounded(description="Width of a patch's embedding.", within=WIDTH)
    class_token: Flag = Field(
        False, description="A learned class token (d_model weights) ahead of the patches: one more position (ViT)."
    )
    positions: Literal["learned", "fixed", "none"] = Field(
        "learned",
        description="'learned': a table of one row per position (ViT); 'fixed': sin-cos positions added, no "
        "weights (DiT); 'none'.",
    )

    @property
    def patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2

    @property
    def tokens(self) -> int:
        """Positions per sample: the patches and the class token."""
        return self.patches + int(self.class_token)

    @property
    def patch_features(self) -> int:
        """Values in one patch, ``p^2 C``: the projection's input width."""
        return self.patch_size * self.patch_size * self.in_channels

    @model_validator(mode="after")
    def _patches_tile(self) -> PatchEmbedding:
        if self.image_size % self.patch_size:
            raise ValueError(
                f"patch_size: {self.patch_size} does not divide image_size {self.image_size} (patches tile the input)"
            )
        return self


class TimestepEmbedding(_OncePerModel):
    """DiT's timestep embedding, once per sample: sinusoidal features of t, then Linear(f, d), SiLU, Linear(d, d)."""

    kind: Literal["timestep_embedding"]
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of the MLP's two kernels (default: workload.sparsity's default), in [0, 1)."
    )
    d_model: Integer = bounded(description="Width of the conditioning vector (the blocks' d_model).", within=WIDTH)
    frequency_dim: Integer = bounded(
        256, description="Sinusoidal features of the timestep (DiT: 256); even.", within=Range(2, WIDTH.high)
    )

    @model_validator(mode="after")
    def _even(self) -> TimestepEmbedding:
        if self.frequency_dim % 2:
            raise ValueError(f"frequency_dim: {self.frequency_dim} is odd; the features are cosine and sine pairs")
        return self


class LabelEmbedding(_OncePerModel):
    """DiT's class-label embedding, once per sample, added to the timestep's: the conditioning vector."""

    kind: Literal["label_embedding"]
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of the table (default: workload.sparsity's default), in [0, 1)."
    )
    d_model: Integer = bounded(description="Width of the conditioning vector (the blocks' d_model).", within=WIDTH)
    classes: Integer = bounded(description="Class labels (ImageNet: 1000).", within=WIDTH)
    null_class: Flag = Field(
        True, description="One more row, the 'no label' of classifier-free guidance (DiT: classes + 1 rows)."
    )

    @property
    def rows(self) -> int:
        return self.classes + int(self.null_class)


class DiTBlock(TransformerBlock):
    """A transformer block with adaLN(-Zero) conditioning (DiT): every transformer_block field, plus the modulation.

    A subclass, so the block's attention and FFN (and every option of them) are the transformer block's own.
    """

    kind: Literal["dit_block"]  # type: ignore[assignment]  # a subclass with its own tag in the Layer union
    modulation: Literal["adaln_zero", "adaln"] = Field(
        "adaln_zero",
        description="'adaln_zero': a linear d_model -> 6 d_model of the conditioning vector per block gives each "
        "norm's shift and scale and each branch's gate (DiT's best); 'adaln': d_model -> 4 d_model, no gates.",
    )

    @property
    def modulation_width(self) -> int:
        """Outputs of the block's modulation linear: shift and scale per norm, and a gate per branch with -Zero."""
        return (6 if self.modulation == "adaln_zero" else 4) * self.d_model

    @model_validator(mode="after")
    def _sequential_pre_norm(self) -> DiTBlock:
        if self.parallel:
            raise ValueError("parallel: a dit_block modulates each branch's own norm (sequential blocks only)")
        if self.norm != "pre":
            raise ValueError("norm: a dit_block modulates the norm before each branch (norm: pre)")
        return self


class ClassificationHead(_OncePerModel):
    """ViT's head: a layer norm, the class token (or the mean of the tokens), d_model -> classes, softmax and loss."""

    kind: Literal["classification_head"]
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of the projection (default: workload.sparsity's default), in [0, 1)."
    )
    d_model: Integer = bounded(description="Input width.", within=WIDTH)
    classes: Integer = bounded(description="Classes (ImageNet-1k: 1000).", within=WIDTH)
    pool: Literal["class_token", "mean"] = Field(
        "class_token", description="What the projection reads: the class token, or the mean of every token."
    )
    norm: Flag = Field(True, description="A layer norm on every token before pooling (ViT's final norm).")


class DiffusionHead(_OncePerModel):
    """DiT's final layer: adaLN (d_model -> 2 d_model), then d_model -> p^2 C_out per token, and the loss."""

    kind: Literal["diffusion_head"]
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of the two kernels (default: workload.sparsity's default), in [0, 1)."
    )
    d_model: Integer = bounded(description="Input width.", within=WIDTH)
    patch_size: Integer = bounded(description="Side of a patch (the patch embedding's).", within=WIDTH)
    out_channels: Integer = bounded(4, description="Channels predicted per position (the latent's: 4).", within=WIDTH)
    learn_sigma: Flag = Field(
        True, description="Predict the variance too (DiT): twice out_channels, the noise and the variance."
    )

    @property
    def out_features(self) -> int:
        return self.patch_size * self.patch_size * self.out_channels * (2 if self.learn_sigma else 1)


Layer = Annotated[
    DenseLayer | EmbeddingLayer | TransformerBlock | Pooler | OutputHead | PatchEmbedding | TimestepEmbedding
    | LabelEmbedding | DiTBlock | ClassificationHead | DiffusionHead,
    Field(discriminator="kind"),
]
#: The layers of DiT's conditioning vector (computed once per sample, read by every adaLN).
_CONDITIONING = (TimestepEmbedding, LabelEmbedding)
#: Inputs whose sample is an array cut into patches: its tokens follow the model's patch embedding.
PATCH_INPUTS = ("image", "latent")


class ModelConfig(Frozen):
    """A model: its layers in forward order and what one sample looks like."""

    name: str = Field("model", description="Model name.")
    source: str | None = Field(None, description="Where the configuration comes from (paper, table).")
    input: Literal["tokens", "features", "image", "latent"] = Field(
        "tokens",
        description="'tokens': a sample is seq_len token ids; 'features': a sample is one feature vector; 'image': "
        "an H x W x C uint8 image and 'latent': an H x W x C latent in the activation precision, each cut into "
        "patches by the model's first layer (a patch_embedding), which sets the tokens per sample.",
    )
    seq_len: Integer | None = bounded(None, description="Default sequence length for token models.", within=WIDTH)
    layers: tuple[Layer, ...] = Field(min_length=1, description="Layers in forward order.")

    @model_validator(mode="after")
    def _widths_chain(self) -> ModelConfig:
        tables = {(l.vocab_size, l.d_model) for l in self.layers if isinstance(l, EmbeddingLayer)}
        for i, layer in enumerate(self.layers):
            if isinstance(layer, OutputHead) and layer.tied and (layer.vocab_size, layer.d_model) not in tables:
                raise ValueError(f"layers.{i}: a tied output head needs an embedding layer of the same shape")
            if isinstance(layer, OutputHead) and layer.tied and layer.sparsity is not None:
                raise ValueError(
                    f"layers.{i}.sparsity: a tied output head streams its embedding table's weights and mask, so it "
                    "takes the table's sparsity; set it on the embedding layer (or workload.sparsity.embedding)"
                )
        width = None
        for i, layer in enumerate(self.layers):
            if isinstance(layer, DenseLayer):
                k_in, k_out = layer.in_features, layer.out_features
                if layer.repeat > 1 and k_in != k_out:
                    raise ValueError(f"layers.{i}: a repeated dense layer needs in_features == out_features")
            elif isinstance(layer, EmbeddingLayer):
                k_in, k_out = None, layer.d_model
            elif isinstance(layer, (TransformerBlock, Pooler, *_CONDITIONING)):
                k_in, k_out = layer.d_model, layer.d_model  # a block, or a side branch that leaves the width as it was
            elif isinstance(layer, PatchEmbedding):
                k_in, k_out = None, layer.d_model
            elif isinstance(layer, ClassificationHead):
                k_in, k_out = layer.d_model, layer.classes
            elif isinstance(layer, DiffusionHead):
                k_in, k_out = layer.d_model, layer.out_features
            else:
                k_in, k_out = layer.d_model, layer.vocab_size
            if width is not None and k_in is not None and k_in != width:
                raise ValueError(
                    f"layers.{i}: this {layer.kind} layer expects width {k_in} but the previous layer produces {width}"
                )
            width = k_out
        return self

    @model_validator(mode="after")
    def _patched_input(self) -> ModelConfig:
        """An image or latent model starts with its one patch embedding, which sets its tokens; DiT's adaLN layers
        read a conditioning vector made before them; heads read what the stem made."""
        stems = [i for i, layer in enumerate(self.layers) if isinstance(layer, PatchEmbedding)]
        patched = self.input in PATCH_INPUTS
        if patched and stems != [0]:
            where = f"layers.{stems[0]}: " if stems else "layers.0: "
            raise ValueError(f"{where}{_an(self.input)} model starts with one patch_embedding layer (it cuts the "
                             f"{self.input} into patches); {len(stems)} found, {'not first' if stems else 'none'}")
        if not patched and stems:
            raise ValueError(f"layers.{stems[0]}: a patch_embedding layer reads an image or a latent; set input: "
                             f"image or latent (this model's input is {self.input})")
        if patched and self.seq_len is not None:
            raise ValueError(f"seq_len: {_an(self.input)} model's tokens per sample follow its patch embedding "
                             f"({self.patch_tokens}); seq_len applies only to token models")
        stem = self.layers[0] if patched else None
        for i, layer in enumerate(self.layers):
            if isinstance(layer, (DiTBlock, DiffusionHead)) and not any(
                    isinstance(c, _CONDITIONING) for c in self.layers[:i]):
                raise ValueError(f"layers.{i}: a {layer.kind} layer's adaLN reads a conditioning vector: put a "
                                 "timestep_embedding or label_embedding layer before it")
            if isinstance(layer, DiffusionHead) and (not isinstance(stem, PatchEmbedding)
                                                     or stem.patch_size != layer.patch_size):
                stem_p = stem.patch_size if isinstance(stem, PatchEmbedding) else None
                raise ValueError(f"layers.{i}.patch_size: a diffusion_head predicts each patch of the model's patch "
                                 f"embedding (patch_size {stem_p}), got {layer.patch_size}")
            if isinstance(layer, ClassificationHead) and layer.pool == "class_token" and not (
                    isinstance(stem, PatchEmbedding) and stem.class_token):
                raise ValueError(f"layers.{i}.pool: pooling the class token needs a patch_embedding with "
                                 "class_token: true (or pool: mean)")
        return self

    @property
    def patch_tokens(self) -> int | None:
        """Tokens per sample of an image or latent model (its patches and class token), else None."""
        stem = self.layers[0]
        return stem.tokens if isinstance(stem, PatchEmbedding) else None


class WorkloadConfig(Frozen):
    """What is trained."""

    model: ModelConfig = Field(description="The model (a preset name in YAML is resolved to its layers).")
    sparsity: Fraction | WorkloadSparsity = Field(
        0.0,
        description="Weight sparsity of the streamed kernels of layers that do not set their own: one number for "
        f"all, or a mapping by role ({', '.join(WORKLOAD_ROLES)}) with a default for the rest (default 0); "
        "each in [0, 1).",
    )
    mask: Literal["random"] = Field(
        "random",
        description="How non-zeros are spread when numerics are off: an i.i.d. unstructured mask, "
        "so per-row counts are binomial.",
    )

    @model_validator(mode="before")
    @classmethod
    def _sparsity_roles(cls, data: Any) -> Any:
        return _check_roles(data, WORKLOAD_ROLES, "workload.sparsity")

    @model_validator(mode="after")
    def _roles_in_model(self) -> WorkloadConfig:
        """A role of workload.sparsity must name kernels of the model: a setting that changes nothing is a mistake."""
        if not isinstance(self.sparsity, WorkloadSparsity):
            return self
        layers = self.model.layers
        present = {role for layer in layers if isinstance(layer, TransformerBlock) for role in layer.roles()}
        if any(isinstance(layer, EmbeddingLayer) for layer in layers):
            present.add("embedding")
        if any(isinstance(layer, OutputHead) and not layer.tied for layer in layers):
            present.add("output_head")
        for role in WORKLOAD_ROLES:
            if getattr(self.sparsity, role) is not None and role not in present:
                raise ValueError(f"sparsity.{role}: model {self.model.name!r} has no {_ROLE_OWNERS[role]}")
        return self


def _an(word: str) -> str:
    """The word with its indefinite article ('an image', 'a latent')."""
    return f"{'an' if word[0] in 'aeiou' else 'a'} {word}"


_ROLE_OWNERS = {
    **dict.fromkeys(BLOCK_ROLES, "transformer_block layer"),
    "ffn_gate": "transformer_block layer with a gated FFN (ffn: swiglu)",
    **dict.fromkeys(FFN_ROLES[1:], "transformer_block layer with a dense FFN (no moe, or moe.shared_experts)"),
    "router": "transformer_block layer with a mixture of experts (moe)",
    "expert_up": "transformer_block layer with a mixture of experts (moe)",
    "expert_down": "transformer_block layer with a mixture of experts (moe)",
    "expert_gate": "transformer_block layer with a mixture of experts of gated FFNs (moe, ffn: swiglu)",
    "embedding": "embedding layer",
    "output_head": "untied output_head layer (a tied head takes its embedding table's sparsity: set 'embedding')",
}
