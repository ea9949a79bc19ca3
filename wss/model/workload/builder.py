"""Expand a :class:`~wss.model.scenario.ModelConfig` into the wafer's operations.

Per-token FLOP counts of the non-weight work (forward; backward is twice):

* attention scores ``Q K^T`` and context ``A V``: ``2 k h d_h`` each, where
  ``k`` is the number of keys a query attends to: ``s`` for full attention;
  for causal attention (``causal: true``) the mask leaves query ``i`` keys
  ``1..i``, ``s (s + 1) / 2`` pairs per sequence, so ``k = (s + 1) / 2`` on
  average: the exact pair count, not ``s / 2``, because each token attends
  to itself (``s = 1`` costs the same either way);
  a causal sliding window of ``w`` keys (``window``, Mistral) leaves query
  ``i`` keys ``max(1, i - w + 1)..i``, ``w (w + 1) / 2 + (s - w) w`` pairs
  (:func:`attended_keys`); grouped-query attention (``n_kv_heads = g``)
  leaves these terms as they are, since every query head still meets every
  key, and shrinks the qkv matmul to ``(h + 2 g) d_h x d`` and the stored
  Q, K, V to ``(h + 2 g) d_h`` per token;
* softmax: 5 FLOPs per score (max, subtract, exp, sum, divide), ``5 h k``;
* layer norm: 8 FLOPs per element; GELU (tanh form): 8 per element;
  ReLU/tanh: 1; residual add: 1;
* gated FFN (``ffn: swiglu``, Shazeer 2020): ``SiLU(gate) * up`` is 5 per
  element of ``d_ff`` (SiLU ``x / (1 + e^-x)``: negate, exp, add, divide;
  then the product).

Block variants, ops in forward order (the backward pass runs them reversed):

* pre-norm (default): ``ln1, qkv, attention, attn_out, residual1, ln2,
  ffn_up, gelu, ffn_down, residual2``;
* ``norm: post`` (BERT): ``qkv, attention, attn_out, residual1, ln1,
  ffn_up, gelu, ffn_down, residual2, ln2``: the same ops and counts, moved;
* ``parallel: true`` (GPT-J): ``ln1, qkv, attention, attn_out, ffn_up, gelu,
  ffn_down, residual`` with one norm, and one residual op adding both
  branches (``2 d``).  The attention branch is streamed first, always.
  qkv keeps the normalised input and ``ffn_up`` keeps nothing of its own
  (it reads the same tensor): ``2 d`` fewer stored elements per token
  than the sequential block (one norm's input, one copy of its output);
* ``ffn: swiglu``: ``ffn_gate, ffn_up, swiglu, ffn_down`` in place of
  ``ffn_up, gelu, ffn_down``; the gate keeps the FFN's input, ``ffn_up``
  reads the same copy, and the product keeps gate and up (``2 d_ff``).

A mixture of experts (``moe``) replaces the FFN by ``router, route,
expert.0.<ffn ops>, ..., expert.<E-1>.<ffn ops>, combine`` (then the shared
experts' FFN, if any, on every token): the router is a ``E x d`` matmul on
every token; ``route`` is its softmax (5 per expert) and top-k selection
(``k E`` comparisons), keeping the ``E`` probabilities; each expert is an FFN
of ``d_ff`` whose kernels stream whole but compute ``c k / E`` of the tokens
(``token_share`` ``k / E``, ``capacity_factor`` ``c``), its non-weight ops
and stored activations scaled by the same; ``combine`` weights and sums
each token's ``k`` expert outputs (``2 k d``), keeping them (``k d``).  The
router keeps the FFN's input; the experts and the shared FFN read it.

BERT's pooler (``kind: pooler``) and MLM transform (``transform: true`` on
the output head) are counted on every token: the cycle model prices a
kernel over all of a micro-batch's tokens, while the pooler really sees one
token per sequence.  For BERT-Large at 512 tokens that over-counts the
pooler's ``2 d^2 + 2 d c`` FLOPs per token, 0.3% of the model's.

These are counting conventions (declared assumptions), not measurements.
The on-wafer attention is assumed not to store the ``s x s`` score matrix
(it keeps softmax statistics, ``h`` per token, and recomputes scores in the
backward pass), so stored activations grow with ``s`` only through tokens.
"""

from __future__ import annotations

from dataclasses import replace

from wss.model.scenario.workload import (
    BLOCK_ROLES,
    EXPERT_ROLES,
    FFN_ROLES,
    BlockSparsity,
    ClassificationHead,
    DenseLayer,
    DiffusionHead,
    DiTBlock,
    EmbeddingLayer,
    ModelConfig,
    OutputHead,
    Pooler,
    TransformerBlock,
    WorkloadSparsity,
)
from wss.model.workload.conventions import ACT_FLOPS as _ACT_FLOPS
from wss.model.workload.conventions import LN_FLOPS as _LN_FLOPS
from wss.model.workload.conventions import SWIGLU_FLOPS as _SWIGLU_FLOPS
from wss.model.workload.ops import Op, StreamedKernel, WaferOp
from wss.model.workload.vision import VISION_LAYERS, modulated_block, vision_layer_ops

__all__ = ["expand_model", "kernel_density", "attended_keys"]


def expand_model(model: ModelConfig, default_sparsity: float | WorkloadSparsity, seq_len: int) -> list[Op]:
    """Operations of one forward pass, in order.

    Parameters
    ----------
    model
        The model.
    default_sparsity
        ``workload.sparsity``: the sparsity of streamed kernels whose layer gives none, one number or
        a mapping by role (see :func:`kernel_density`).
    seq_len
        Tokens per sample (1 for feature models); attention cost grows with it.
    """
    ops: list[Op] = []
    block_index = 0
    counts: dict[str, int] = {}
    for layer in model.layers:
        for _ in range(layer.repeat):
            base = layer.name or layer.kind
            n = counts.get(base, 0)
            counts[base] = n + 1
            name = f"{base}.{n}" if layer.repeat > 1 or n > 0 else base
            if isinstance(layer, DenseLayer):
                ops += _dense(layer, name, kernel_density(layer.sparsity, default_sparsity, None))
            elif isinstance(layer, EmbeddingLayer):
                ops += _embedding(layer, name, kernel_density(layer.sparsity, default_sparsity, "embedding"))
            elif isinstance(layer, TransformerBlock):
                densities = {role: kernel_density(layer.sparsity, default_sparsity, role) for role in BLOCK_ROLES}
                block = _block(layer, name, densities, seq_len, block_index)
                if isinstance(layer, DiTBlock):  # adaLN(-Zero) around the block's own ops; its linear has no role
                    adaln = kernel_density(layer.sparsity, default_sparsity, None)
                    block = modulated_block(layer, block, name, adaln, seq_len, block_index)
                ops += block
                block_index += 1
            elif isinstance(layer, OutputHead):
                table = _tied_table(ops, layer) if layer.tied else None
                density = table.density if table else kernel_density(layer.sparsity, default_sparsity, "output_head")
                transform = kernel_density(None if layer.tied else layer.sparsity, default_sparsity, None)
                ops += _head(layer, name, density, table.name if table else None, transform)
            elif isinstance(layer, Pooler):
                ops += _pooler(layer, name, kernel_density(layer.sparsity, default_sparsity, None))
            elif isinstance(layer, VISION_LAYERS):
                ops += vision_layer_ops(layer, name, kernel_density(layer.sparsity, default_sparsity, None), seq_len)
            else:  # a kind added to the scenario's Layer union but not here: never drop its work silently
                raise NotImplementedError(f"the workload builder has no rule for layer kind {layer.kind!r} "
                                          f"({type(layer).__name__}, layer {name!r})")
    if not any(isinstance(layer, (OutputHead, ClassificationHead, DiffusionHead)) for layer in model.layers):
        ops = _close_with_loss(ops)
    return ops


def kernel_density(
    layer: float | BlockSparsity | None, workload: float | WorkloadSparsity, role: str | None
) -> float:
    """Density (1 - sparsity) of a kernel with this ``role`` (None: a dense layer's kernel, which has none).

    The sparsity is the first given of: the layer's value for the role, the layer's default (a number
    is the layer's default for every role), the workload's value for the role, the workload's default, 0.
    """
    for setting in (layer, workload):
        if isinstance(setting, BlockSparsity):
            value = setting.of(role)
            if value is not None:
                return 1.0 - value
        elif setting is not None:
            return 1.0 - setting
    return 1.0


def _tied_table(ops: list[Op], layer: OutputHead) -> StreamedKernel | None:
    """The token embedding a tied head shares: its weights, its mask and so its density."""
    return next(
        (op for op in ops if isinstance(op, StreamedKernel) and op.kind == "embedding"
         and (op.out_features, op.in_features) == (layer.vocab_size, layer.d_model)),
        None,
    )


def _close_with_loss(ops: list[Op]) -> list[Op]:
    """A model without an output head: its last kernel is the output layer; add softmax + loss."""
    last = max(i for i, op in enumerate(ops) if isinstance(op, StreamedKernel))
    head = ops[last]
    assert isinstance(head, StreamedKernel)
    ops = list(ops)
    ops[last] = replace(head, is_output=True)
    ops.append(
        WaferOp(
            f"{head.layer}.softmax_loss",
            head.layer,
            5.0 * head.out_features,
            None,
            working_elements_per_token=head.out_features,
            backward_factor=0.4,
        )
    )
    return ops


def _dense(layer: DenseLayer, name: str, density: float) -> list[Op]:
    ops: list[Op] = [
        StreamedKernel(
            name=name,
            layer=name,
            kind="matmul",
            out_features=layer.out_features,
            in_features=layer.in_features,
            density=density,
            block=None,
            stored_elements_per_token=layer.in_features,
        )
    ]
    if layer.activation != "none":
        ops.append(
            WaferOp(
                name=f"{name}.{layer.activation}",
                layer=name,
                flops_per_token=_ACT_FLOPS[layer.activation] * layer.out_features,
                block=None,
                stored_elements_per_token=layer.out_features,
            )
        )
    return ops


def _embedding(layer: EmbeddingLayer, name: str, density: float) -> list[Op]:
    ops: list[Op] = [
        StreamedKernel(
            name=f"{name}.tokens",
            layer=name,
            kind="embedding",
            out_features=layer.vocab_size,
            in_features=layer.d_model,
            density=density,
            block=None,
            stored_elements_per_token=0,
        )
    ]
    if layer.max_positions:
        ops.append(
            StreamedKernel(
                name=f"{name}.positions",
                layer=name,
                kind="embedding",
                out_features=layer.max_positions,
                in_features=layer.d_model,
                density=density,
                block=None,
                stored_elements_per_token=0,
            )
        )
        ops.append(WaferOp(name=f"{name}.add", layer=name, flops_per_token=layer.d_model, block=None))
    return ops


def attended_keys(layer: TransformerBlock, s: int) -> float:
    """Mean keys a query attends to in a sequence of ``s`` tokens (see the module docstring).

    Full attention: ``s``.  Causal: query ``i`` sees keys ``1..i``, ``s (s + 1) / 2`` pairs.  A causal
    sliding window of ``w`` keys (itself and ``w - 1`` before it): query ``i`` sees ``min(i, w)`` keys,
    ``w (w + 1) / 2 + (s - w) w`` pairs (``w >= s`` is plain causal attention).
    """
    if not layer.causal:
        return s
    w = layer.window
    if w is None or w >= s:
        return (s + 1) / 2
    return (w * (w + 1) / 2 + (s - w) * w) / s


def _block(layer: TransformerBlock, name: str, densities: dict[str, float], s: int, b: int) -> list[Op]:
    """A block's ops in forward order (the variants and their order are in the module docstring)."""
    d, h, dh = layer.d_model, layer.n_heads, layer.head_width
    attn = h * dh
    kv = layer.kv_heads * dh  # key (and value) features: attn, or fewer with grouped-query attention
    keys = attended_keys(layer, s)

    def k(part: str, out_f: int, in_f: int, stored: int | None = None) -> StreamedKernel:
        return StreamedKernel(
            name=f"{name}.{part}",
            layer=name,
            kind="matmul",
            out_features=out_f,
            in_features=in_f,
            density=densities[part],
            block=b,
            stored_elements_per_token=in_f if stored is None else stored,
        )

    def norm(part: str) -> WaferOp:
        return WaferOp(f"{name}.{part}", name, _LN_FLOPS * d, b, stored_elements_per_token=d)

    # Scores and context cost the same whatever the key-value heads: every query head still meets every key
    # it attends to; grouped-query attention shrinks the qkv matmul and the stored K and V.
    attention: list[Op] = [
        k("qkv", attn + 2 * kv, d),
        WaferOp(f"{name}.attention", name, 4.0 * keys * attn + 5.0 * h * keys, b,
                stored_elements_per_token=attn + 2 * kv + h),
        k("attn_out", d, attn),
    ]
    if layer.parallel:
        # One norm feeds both branches; qkv keeps the normalised input and the FFN's first matmul(s) use that copy.
        ffn = _ffn_part(layer, name, b, densities, input_stored=False)
        return [norm("ln1"), *attention, *ffn, WaferOp(f"{name}.residual", name, 2.0 * d, b)]
    ffn = _ffn_part(layer, name, b, densities, input_stored=True)
    res1, res2 = WaferOp(f"{name}.residual1", name, float(d), b), WaferOp(f"{name}.residual2", name, float(d), b)
    if layer.norm == "post":
        return [*attention, res1, norm("ln1"), *ffn, res2, norm("ln2")]
    return [norm("ln1"), *attention, res1, norm("ln2"), *ffn, res2]


def _ffn_part(
    layer: TransformerBlock, name: str, b: int, densities: dict[str, float], input_stored: bool
) -> list[Op]:
    """The block's FFN: one dense FFN, or a mixture of experts (router, experts, shared experts, combine)."""
    moe = layer.moe
    if moe is None:
        return _ffn(layer, name, layer.ffn_width, b, densities, FFN_ROLES, input_stored=input_stored)
    d, share = layer.d_model, moe.token_share
    ops: list[Op] = [
        StreamedKernel(f"{name}.router", name, "matmul", moe.experts, d, densities["router"], b,
                       stored_elements_per_token=d if input_stored else 0),
        # Softmax over the experts (5 per logit) and top-k selection (k passes over the E probabilities);
        # keeps the probabilities for the backward pass.
        WaferOp(f"{name}.route", name, 5.0 * moe.experts + moe.top_k * moe.experts, b,
                stored_elements_per_token=moe.experts),
    ]
    for e in range(moe.experts):
        # Each expert reads its tokens from the router's input (kept once), on its capacity of slots.
        ops += _ffn(layer, f"{name}.expert.{e}", layer.ffn_width, b, densities, EXPERT_ROLES, input_stored=False,
                    share=share, capacity=moe.capacity_factor, layer_name=name)
    # The weighted sum of each token's top_k expert outputs (a multiply and an add per element); it keeps
    # them, to differentiate the weights.
    ops.append(WaferOp(f"{name}.combine", name, 2.0 * moe.top_k * d, b,
                       stored_elements_per_token=moe.top_k * d))
    if moe.shared_experts:
        ops += _ffn(layer, name, layer.dense_ffn_width, b, densities, FFN_ROLES, input_stored=False)
    return ops


def _ffn(
    layer: TransformerBlock,
    name: str,
    dff: int,
    b: int,
    densities: dict[str, float],
    roles: tuple[str, ...],
    *,
    input_stored: bool,
    share: float = 1.0,
    capacity: float = 1.0,
    layer_name: str | None = None,
) -> list[Op]:
    """An FFN's ops: up, GELU, down; or gate, up, SiLU(gate) * up, down.

    ``input_stored``: the FFN's first matmul keeps its input (false when another kernel, qkv in a
    parallel block or a mixture's router, already keeps the same tensor).  A gated FFN's up matmul
    reads the gate's input, so only the gate keeps it.  ``roles``: the sparsity roles of gate, up and
    down (the block's FFN_ROLES, or an expert's EXPERT_ROLES).  An expert computes ``share x capacity``
    of the tokens (its capacity); its stored activations and its non-weight FLOPs count those slots.
    """
    d = layer.d_model
    gate_role, up_role, down_role = roles
    computed = share * capacity
    owner = layer_name or name

    def k(role: str, part: str, out_f: int, in_f: int, stored: float) -> StreamedKernel:
        return StreamedKernel(f"{name}.{part}", owner, "matmul", out_f, in_f, densities[role], b,
                              stored_elements_per_token=stored if computed == 1.0 else stored * computed,
                              token_share=share, capacity_factor=capacity)

    def op(part: str, flops: float, stored: int) -> WaferOp:
        if computed != 1.0:
            flops, scaled = flops * computed, stored * computed
            return WaferOp(f"{name}.{part}", owner, flops, b, stored_elements_per_token=scaled)
        return WaferOp(f"{name}.{part}", owner, flops, b, stored_elements_per_token=stored)

    first = d if input_stored else 0
    if layer.ffn == "swiglu":
        return [
            k(gate_role, "ffn_gate", dff, d, first),
            k(up_role, "ffn_up", dff, d, 0),
            # keeps gate and up (both needed to differentiate the product)
            op("swiglu", _SWIGLU_FLOPS * dff, 2 * dff),
            k(down_role, "ffn_down", d, dff, dff),
        ]
    return [
        k(up_role, "ffn_up", dff, d, first),
        op("gelu", _ACT_FLOPS["gelu"] * dff, dff),
        k(down_role, "ffn_down", d, dff, dff),
    ]


def _pooler(layer: Pooler, name: str, density: float) -> list[Op]:
    """BERT's pooler (dense + tanh) and sentence head (dense + softmax + loss), counted on every token."""
    d, c = layer.d_model, layer.classes

    def k(part: str, out_f: int) -> StreamedKernel:
        return StreamedKernel(f"{name}.{part}", name, "matmul", out_f, d, density, None, stored_elements_per_token=d)

    return [
        k("dense", d),
        WaferOp(f"{name}.tanh", name, _ACT_FLOPS["tanh"] * d, None, stored_elements_per_token=d),
        k("classifier", c),
        WaferOp(f"{name}.softmax_loss", name, 5.0 * c, None, working_elements_per_token=c, backward_factor=0.4),
    ]


def _head(layer: OutputHead, name: str, density: float, tied_to: str | None, transform_density: float) -> list[Op]:
    d = layer.d_model
    transform: list[Op] = []
    if layer.transform:  # BERT's MLM transform: dense d -> d, GELU, layer norm
        transform = [
            StreamedKernel(f"{name}.transform", name, "matmul", d, d, transform_density, None, d),
            WaferOp(f"{name}.gelu", name, _ACT_FLOPS["gelu"] * d, None, stored_elements_per_token=d),
            WaferOp(f"{name}.ln", name, _LN_FLOPS * d, None, stored_elements_per_token=d),
        ]
    return [
        *transform,
        StreamedKernel(
            name=f"{name}.proj",
            layer=name,
            kind="matmul",
            out_features=layer.vocab_size,
            in_features=layer.d_model,
            density=density,
            block=None,
            stored_elements_per_token=layer.d_model,
            is_output=True,
            tied_to=tied_to,
        ),
        WaferOp(
            f"{name}.softmax_loss",
            name,
            5.0 * layer.vocab_size,
            None,
            working_elements_per_token=layer.vocab_size,
            backward_factor=0.4,  # backward of softmax + cross-entropy: p - onehot, ~2 FLOPs per logit
        ),
    ]
