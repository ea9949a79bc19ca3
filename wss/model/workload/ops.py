"""The operations a wafer executes, in forward order.

A model expands into two kinds of operation:

* :class:`StreamedKernel` - a weight matrix streamed from MemoryX (a matmul,
  an embedding table).  These are the "kernels" of the weight-streaming docs.
* :class:`WaferOp` - on-wafer work with no weights (attention scores and
  context, softmax, norms, activations, residuals, the loss).

Both carry per-token figures so the same description serves any batch size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

__all__ = ["StreamedKernel", "WaferOp", "Op"]


@dataclass(frozen=True)
class StreamedKernel:
    """A weight matrix ``out_features x in_features`` streamed through the wafer.

    Attributes
    ----------
    name
        Dotted scope name, e.g. ``block.12.ffn_up``.
    kind
        ``"matmul"`` (one AXPY per non-zero per token column) or
        ``"embedding"`` (a row gather: no multiply-accumulate).
    density
        Fraction of non-zero weights (1 - sparsity).
    block
        Index of the transformer block the kernel belongs to (for activation
        checkpointing), or ``None``.
    stored_elements_per_token
        Activation elements this kernel keeps in SRAM for its backward pass
        (its input).
    is_output
        True for the output head (the layer ``retain_output_layer`` keeps).
    tied_to
        Name of the kernel whose weights this one shares (a tied output head
        names the token embedding), or ``None``.
    token_share
        The mean fraction of a micro-batch's tokens this kernel computes: 1,
        except for an expert of a mixture of experts (``top_k / experts``).
        Its stored activations are already scaled by what it computes.
    capacity_factor
        An expert's token slots over its mean load: the tokens it computes per
        micro-batch are ``ceil(capacity_factor x token_share x tokens)``.
    tokens_per_input
        Tokens that share one input vector: 1 for a kernel applied to every
        token; a sample's tokens for one applied once per sample (DiT's
        conditioning and adaLN, ViT's classifier on the class token), which
        multiplies ``tokens / tokens_per_input`` vectors (:meth:`inputs`).
    """

    name: str
    layer: str
    kind: Literal["matmul", "embedding"]
    out_features: int
    in_features: int
    density: float
    block: int | None
    stored_elements_per_token: float
    is_output: bool = False
    tied_to: str | None = None
    token_share: float = 1.0
    capacity_factor: float = 1.0
    tokens_per_input: int = 1

    @property
    def params(self) -> int:
        return self.out_features * self.in_features

    @property
    def computed_share(self) -> float:
        """The fraction of the tokens the wafer computes this kernel on: padded expert slots included."""
        return self.token_share * self.capacity_factor

    def computed_tokens(self, tokens: int) -> int:
        """Input vectors this kernel multiplies in a micro-batch of ``tokens`` tokens: all of them; one per sample
        for a kernel applied once per sample; an expert's capacity (at least 1) for an expert."""
        if self.tokens_per_input != 1:
            tokens = -(-tokens // self.tokens_per_input)
        if self.computed_share >= 1.0:
            return tokens
        return max(1, math.ceil(self.computed_share * tokens))

    @property
    def nnz(self) -> int:
        """Expected non-zeros (exact for dense; the i.i.d. mask's mean otherwise)."""
        if self.density >= 1.0:
            return self.params
        return round(self.params * self.density)

    def executed_flops(self, tokens: float, nnz: int | None = None) -> float:
        """Forward multiply-accumulate FLOPs the wafer executes on ``tokens`` tokens: 2 per non-zero (``nnz``, the
        plan's count, or the expected :attr:`nnz`) per input it multiplies.  An expert executes its capacity of
        slots (padding included); a per-sample kernel multiplies one input per sample."""
        e = 2.0 * (self.nnz if nnz is None else nnz) * tokens
        e = e if self.computed_share == 1.0 else e * self.computed_share
        return e if self.tokens_per_input == 1 else e / self.tokens_per_input

    def dense_flops_per_token(self) -> float:
        """Forward multiply-accumulate FLOPs per token of the model if the kernel were dense.

        An expert counts the tokens routed to it (``token_share``), not its padded capacity: the
        model's FLOPs, whatever the capacity factor; a per-sample kernel's FLOPs per sample are spread
        over the sample's tokens.
        """
        if self.kind == "embedding":
            return 0.0
        flops = 2.0 * self.params
        flops = flops if self.token_share == 1.0 else flops * self.token_share
        return flops if self.tokens_per_input == 1 else flops / self.tokens_per_input


@dataclass(frozen=True)
class WaferOp:
    """Non-weight work on the wafer.

    Attributes
    ----------
    flops_per_token
        Forward FLOPs per token; backward costs ``backward_factor`` times it.
        An expert's op counts the slots it computes, spread over every token.
    stored_elements_per_token
        Activation elements kept in SRAM for the backward pass.
    working_elements_per_token
        Transient elements alive only while this op runs (e.g. logits).
    """

    name: str
    layer: str
    flops_per_token: float
    block: int | None
    stored_elements_per_token: float = 0
    working_elements_per_token: int = 0
    backward_factor: float = 2.0


Op = StreamedKernel | WaferOp
