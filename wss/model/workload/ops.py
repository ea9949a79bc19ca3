"""The operations a wafer executes, in forward order.

A model expands into two kinds of operation:

* :class:`StreamedKernel` - a weight matrix streamed from MemoryX (a matmul,
  an embedding table).  These are the "kernels" of the weight-streaming docs.
* :class:`WaferOp` - on-wafer work with no weights (attention scores and
  context, softmax, norms, activations, residuals, the loss).

Both carry per-token figures so the same description serves any batch size.
"""

from __future__ import annotations

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
    stored_elements_per_token: int
    is_output: bool = False
    tied_to: str | None = None
    tokens_per_input: int = 1

    @property
    def params(self) -> int:
        return self.out_features * self.in_features

    @property
    def nnz(self) -> int:
        """Expected non-zeros (exact for dense; the i.i.d. mask's mean otherwise)."""
        if self.density >= 1.0:
            return self.params
        return round(self.params * self.density)

    def dense_flops_per_token(self) -> float:
        """Forward multiply-accumulate FLOPs per token if the kernel were dense (a per-sample kernel's
        FLOPs per sample spread over the sample's tokens)."""
        return 0.0 if self.kind == "embedding" else 2.0 * self.params / self.tokens_per_input

    def inputs(self, tokens: int) -> int:
        """Input vectors the kernel multiplies for ``tokens`` tokens (``tokens`` unless it runs once per sample)."""
        return tokens if self.tokens_per_input == 1 else -(-tokens // self.tokens_per_input)


@dataclass(frozen=True)
class WaferOp:
    """Non-weight work on the wafer.

    Attributes
    ----------
    flops_per_token
        Forward FLOPs per token; backward costs ``backward_factor`` times it.
    stored_elements_per_token
        Activation elements kept in SRAM for the backward pass.
    working_elements_per_token
        Transient elements alive only while this op runs (e.g. logits).
    """

    name: str
    layer: str
    flops_per_token: float
    block: int | None
    stored_elements_per_token: int = 0
    working_elements_per_token: int = 0
    backward_factor: float = 2.0


Op = StreamedKernel | WaferOp
