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
    softmax, layer norms, activation, residuals).
``output_head``
    The final projection to the vocabulary or classes, plus softmax and loss.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from wss.model.scenario.base import Fraction, Frozen, PosInt

__all__ = [
    "DenseLayer",
    "EmbeddingLayer",
    "TransformerBlock",
    "OutputHead",
    "Layer",
    "ModelConfig",
    "WorkloadConfig",
]


class _LayerBase(Frozen):
    name: str | None = Field(None, description="Layer name used in records (default: kind and index).")
    repeat: PosInt = Field(1, description="Repeat this layer this many times in sequence.")
    sparsity: Fraction | None = Field(
        None, description="Weight sparsity of this layer's streamed kernels (default: workload.sparsity)."
    )


class DenseLayer(_LayerBase):
    """A fully connected layer: one streamed matmul, out_features x in_features."""

    kind: Literal["dense"]
    in_features: PosInt = Field(description="Input features K.")
    out_features: PosInt = Field(description="Output features M.")
    activation: Literal["relu", "gelu", "tanh", "none"] = Field(
        "relu", description="Elementwise activation after the matmul."
    )


class EmbeddingLayer(_LayerBase):
    """Token embedding (vocab_size x d_model) and optional learned positions."""

    kind: Literal["embedding"]
    vocab_size: PosInt = Field(description="Rows of the embedding table.")
    d_model: PosInt = Field(description="Embedding width.")
    max_positions: int = Field(0, ge=0, description="Rows of a learned position table (0: none).")


class TransformerBlock(_LayerBase):
    """A pre-norm transformer block (attention + FFN)."""

    kind: Literal["transformer_block"]
    d_model: PosInt = Field(description="Model width.")
    n_heads: PosInt = Field(description="Attention heads.")
    d_head: PosInt | None = Field(None, description="Width of one head (default d_model / n_heads).")
    d_ff: PosInt | None = Field(None, description="FFN hidden width (default 4 d_model).")

    @property
    def head_width(self) -> int:
        return self.d_head if self.d_head is not None else self.d_model // self.n_heads

    @property
    def ffn_width(self) -> int:
        return self.d_ff if self.d_ff is not None else 4 * self.d_model

    @model_validator(mode="after")
    def _heads_divide(self) -> TransformerBlock:
        if self.d_head is None and self.d_model % self.n_heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by n_heads {self.n_heads}; give d_head")
        return self


class OutputHead(_LayerBase):
    """Final projection d_model -> vocab (or classes), softmax and loss."""

    kind: Literal["output_head"]
    d_model: PosInt = Field(description="Input width.")
    vocab_size: PosInt = Field(description="Output classes or vocabulary size.")
    tied: bool = Field(
        False,
        description="The head's weights are the token embedding table (tied): MemoryX stores and updates "
        "them once; the head still streams them and its gradient adds into the embedding's.",
    )


Layer = Annotated[DenseLayer | EmbeddingLayer | TransformerBlock | OutputHead, Field(discriminator="kind")]


class ModelConfig(Frozen):
    """A model: its layers in forward order and what one sample looks like."""

    name: str = Field("model", description="Model name.")
    source: str | None = Field(None, description="Where the configuration comes from (paper, table).")
    input: Literal["tokens", "features"] = Field(
        "tokens", description="'tokens': a sample is seq_len token ids; 'features': a sample is one feature vector."
    )
    seq_len: PosInt | None = Field(None, description="Default sequence length for token models.")
    layers: tuple[Layer, ...] = Field(min_length=1, description="Layers in forward order.")

    @model_validator(mode="after")
    def _widths_chain(self) -> ModelConfig:
        tables = {(l.vocab_size, l.d_model) for l in self.layers if isinstance(l, EmbeddingLayer)}
        for i, layer in enumerate(self.layers):
            if isinstance(layer, OutputHead) and layer.tied and (layer.vocab_size, layer.d_model) not in tables:
                raise ValueError(f"layers.{i}: a tied output head needs an embedding layer of the same shape")
        width = None
        for i, layer in enumerate(self.layers):
            if isinstance(layer, DenseLayer):
                k_in, k_out = layer.in_features, layer.out_features
                if layer.repeat > 1 and k_in != k_out:
                    raise ValueError(f"layers.{i}: a repeated dense layer needs in_features == out_features")
            elif isinstance(layer, EmbeddingLayer):
                k_in, k_out = None, layer.d_model
            elif isinstance(layer, TransformerBlock):
                k_in, k_out = layer.d_model, layer.d_model
            else:
                k_in, k_out = layer.d_model, layer.vocab_size
            if width is not None and k_in is not None and k_in != width:
                raise ValueError(
                    f"layers.{i}: this {layer.kind} layer expects width {k_in} but the previous layer produces {width}"
                )
            width = k_out
        return self


class WorkloadConfig(Frozen):
    """What is trained."""

    model: ModelConfig = Field(description="The model (a preset name in YAML is resolved to its layers).")
    sparsity: Fraction = Field(0.0, description="Default weight sparsity of streamed kernels.")
    mask: Literal["random"] = Field(
        "random",
        description="How non-zeros are spread when numerics are off: an i.i.d. unstructured mask, "
        "so per-row counts are binomial.",
    )
