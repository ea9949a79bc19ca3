"""Training settings: batch, sequence, micro-batching, optimizer, precision."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from wss.model.scenario.base import WIDTH, Flag, Fraction, Frozen, Integer, Range, Real, bounded

#: The most samples in one step across all wafers.
MAX_GLOBAL_BATCH = 1_000_000
#: A micro-batch size given as a number (what the micro_batch field accepts besides 'auto').
MicroBatch = Annotated[Integer, Field(ge=1, le=MAX_GLOBAL_BATCH)]

__all__ = ["TrainingConfig", "SimulationConfig", "NumericsConfig", "Precision", "PRECISION_BYTES"]

Precision = Literal["fp16", "bf16", "fp32"]
PRECISION_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4}


class TrainingConfig(Frozen):
    """How the model is trained."""

    global_batch: Integer = bounded(
        description="Samples (sequences) per step across all wafers.", within=Range(1, MAX_GLOBAL_BATCH, "samples")
    )
    seq_len: Integer | None = bounded(
        None,
        within=WIDTH,
        description="Tokens per sample for token models (default: the model's); at most the model's learned "
        "position table (embedding max_positions). Not allowed for feature models.",
    )
    micro_batch: MicroBatch | Literal["auto"] = Field(
        "auto",
        description="Largest samples per micro-batch on one wafer; 'auto' = the split with the smallest analytic "
        "step time among those that fit SRAM (wss plan shows them); else a number from 1 to 1,000,000, at most the "
        "per-wafer batch (global_batch / wafers, rounded up). A wafer's samples run as the fewest micro-batches of "
        "at most this size, cut evenly (sizes differ by at most one: 65 at 16 runs as 13 x 5). "
        "Gradients accumulate in MemoryX over a wafer's micro-batches.",
    )
    optimizer: Literal["sgd", "momentum", "adam", "adamw", "lamb"] = Field(
        "adamw",
        description="MemoryX optimizer ('lamb': Adam's moments with a per-kernel trust ratio, You et al. 2019).",
    )
    gradient_clipping: Literal["none", "global_norm"] = Field(
        "global_norm",
        description="'global_norm': the step's gradients are scaled by one factor from their global norm "
        "(PyTorch's clip_grad_norm_; the Cerebras modelzoo's max_gradient_norm), so MemoryX sums their squares as "
        "they arrive and starts no update before the step's last gradient; 'none': each kernel is updated as its "
        "gradient arrives, overlapping the rest of the backward pass.",
    )
    weight_precision: Precision = Field("fp16", description="Precision of weights streamed to the wafers.")
    gradient_precision: Precision = Field("fp16", description="Precision of gradients streamed back.")
    activation_precision: Precision = Field("fp16", description="Precision of activations held in wafer SRAM.")
    steps: Integer = bounded(
        1,
        description="Training steps to simulate; the run as a whole has a work bound too (docs/limits.md).",
        within=Range(1, 100_000),
    )
    retain_output_layer: Flag = Field(
        False, description="Keep the output layer's weights on the wafer between its forward and backward pass."
    )
    activation_checkpointing: Literal["auto", "none", "blocks", "offload"] = Field(
        "auto",
        description="'none': keep every activation; 'blocks': keep only transformer-block inputs and recompute "
        "each block (its weights stream a third time); 'offload': as 'blocks', but the block inputs leave the "
        "wafer over its I/O during the forward pass and come back before each block's recompute, so SRAM holds "
        "one block's activations and two block inputs; 'auto': whichever gives the smaller analytic step time, "
        "weighed together with the micro-batch.",
    )


class SimulationConfig(Frozen):
    """Resolution of the simulation itself (not hardware)."""

    @model_validator(mode="before")
    @classmethod
    def _buffers_are_hardware(cls, data: Any) -> Any:
        if isinstance(data, dict) and "buffer_chunks" in data:
            raise ValueError(
                "buffer_chunks was removed: buffers are hardware, in bytes - set hardware.swarmx.port_buffer_bytes "
                "and hardware.wafer.ingress_buffer_bytes instead (docs/model.md, \"Buffers and resolution\")"
            )
        return data

    chunk_bytes: Real = bounded(
        64 * 2**20,
        description="Target size of one streamed chunk of weights or gradients, bytes.",
        within=Range(1024, 1e12, "bytes"),
    )
    max_chunks_per_kernel: Integer = bounded(
        8,
        description="Upper bound on chunks per kernel pass (bounds event count for huge kernels).",
        within=Range(1, 1024),
    )
    fold_micro_batches: Flag = Field(
        True,
        description="Simulate micro-batches 0-3 and the last, and repeat the measured period of micro-batch 3 "
        "for the identical ones in between; likewise steps 0-3 and the last of a run of many steps, repeating "
        "step 3 (not with numerics, whose every step is simulated), and the first and last 4 blocks of a run of "
        "identical blocks, repeating one block for the rest. Checked for periodicity; falls back to simulating "
        "all.",
    )
    fold_wafers: Literal["auto"] | bool = Field(
        "auto",
        description="Simulate one wafer and one tree path standing for all (true), every wafer as its own process "
        "and every SwarmX edge as its own link (false), or fold exactly when the cluster is uniform ('auto': "
        "every wafer has the same number of samples). The Result says which it did and why (wafer_folding).",
    )
    wafer_classes: Flag = Field(
        True,
        description="Unfolded, simulate one wafer per class of provably identical wafers (the same shard, "
        "slowdown and jitter draws, under identical SwarmX subtrees) and one link per class of identical edges, "
        "each counted for all its members: the same Result, per wafer too, for fewer events. false: every wafer "
        "and every edge its own process (docs/unfolded.md).",
    )

    @model_serializer(mode="wrap")
    def _omit_auto_folding(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave ``fold_wafers`` and ``wafer_classes`` out at their defaults, so scenarios (and their hashes)
        written before they existed stay the same; loading restores them."""
        data = handler(self)
        if self.fold_wafers == "auto":
            data.pop("fold_wafers", None)
        if self.wafer_classes:
            data.pop("wafer_classes", None)
        return data


class NumericsConfig(Frozen):
    """Real training alongside the timing (dense-layer models).

    The streamed weights take ``training.weight_precision`` (fp16, or bf16 emulated in float32);
    the arithmetic, the gradients summed by SwarmX and the fp32 master weights are float32, so
    ``gradient_precision`` and ``activation_precision`` shape the timing (bytes, SRAM) only.
    """

    enabled: Flag = Field(False, description="Train the model for real with the numpy sparse kernels.")
    dataset: Literal["teacher", "gaussian_mixture"] = Field("teacher", description="Generated learnable data set.")
    learning_rate: Real = bounded(
        1e-3, description="Optimizer learning rate.", within=Range(0.0, 100.0, open_low=True)
    )
    momentum: Fraction = Field(0.9, description="Momentum (momentum optimizer), in [0, 1).")
    weight_decay: Real = bounded(
        0.0,
        description="Weight decay: decoupled for AdamW and LAMB, coupled L2 (added to the gradient) for the others.",
        within=Range(0.0, 1.0),
    )
    max_gradient_norm: Real = bounded(
        1.0,
        description="With training.gradient_clipping 'global_norm': the global L2 norm the step's gradients are "
        "clipped to (1.0 in GPT-3's training, Brown et al. 2020, and in the Cerebras modelzoo's configurations).",
        within=Range(0.0, 1e6, open_low=True),
    )
    prune: Literal["random", "magnitude"] = Field("random", description="How the fixed sparsity mask is chosen.")
