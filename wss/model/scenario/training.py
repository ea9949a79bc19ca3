"""Training settings: batch, sequence, micro-batching, optimizer, precision."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from wss.model.scenario.base import Frozen, PosFloat, PosInt

__all__ = ["TrainingConfig", "SimulationConfig", "NumericsConfig", "Precision", "PRECISION_BYTES"]

Precision = Literal["fp16", "bf16", "fp32"]
PRECISION_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4}


class TrainingConfig(Frozen):
    """How the model is trained."""

    global_batch: PosInt = Field(description="Samples (sequences) per step across all wafers.")
    seq_len: PosInt | None = Field(
        None,
        description="Tokens per sample for token models (default: the model's); at most the model's learned "
        "position table (embedding max_positions). Not allowed for feature models.",
    )
    micro_batch: PosInt | Literal["auto"] = Field(
        "auto",
        description="Largest samples per micro-batch on one wafer; 'auto' = the split with the smallest analytic "
        "step time among those that fit SRAM (wss plan shows them). At most the per-wafer batch (global_batch / "
        "wafers, rounded up). A wafer's samples run as the fewest micro-batches of at most this size, cut evenly "
        "(sizes differ by at most one: 65 at 16 runs as 13 x 5). "
        "Gradients accumulate in MemoryX over a wafer's micro-batches.",
    )
    optimizer: Literal["sgd", "momentum", "adam", "adamw", "lamb"] = Field(
        "adamw",
        description="MemoryX optimizer ('lamb': Adam's moments with a per-kernel trust ratio, You et al. 2019).",
    )
    weight_precision: Precision = Field("fp16", description="Precision of weights streamed to the wafers.")
    gradient_precision: Precision = Field("fp16", description="Precision of gradients streamed back.")
    activation_precision: Precision = Field("fp16", description="Precision of activations held in wafer SRAM.")
    steps: PosInt = Field(1, description="Training steps to simulate.")
    retain_output_layer: bool = Field(
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

    chunk_bytes: PosFloat = Field(
        64 * 2**20, description="Target size of one streamed chunk of weights or gradients, bytes."
    )
    max_chunks_per_kernel: PosInt = Field(
        8, description="Upper bound on chunks per kernel pass (bounds event count for huge kernels)."
    )
    fold_micro_batches: bool = Field(
        True,
        description="Simulate micro-batches 0-3 and the last, and repeat the measured period of micro-batch 3 "
        "for the identical ones in between; likewise steps 0-3 and the last of a run of many steps, repeating "
        "step 3 (not with numerics, whose every step is simulated). Checked for periodicity; falls back to "
        "simulating all.",
    )


class NumericsConfig(Frozen):
    """Real training alongside the timing (dense-layer models).

    The streamed weights take ``training.weight_precision`` (fp16, or bf16 emulated in float32);
    the arithmetic, the gradients summed by SwarmX and the fp32 master weights are float32, so
    ``gradient_precision`` and ``activation_precision`` shape the timing (bytes, SRAM) only.
    """

    enabled: bool = Field(False, description="Train the model for real with the numpy sparse kernels.")
    dataset: Literal["teacher", "gaussian_mixture"] = Field("teacher", description="Generated learnable data set.")
    learning_rate: PosFloat = Field(1e-3, description="Optimizer learning rate.")
    momentum: float = Field(0.9, ge=0, lt=1, description="Momentum (momentum optimizer).")
    weight_decay: float = Field(
        0.0,
        ge=0,
        description="Weight decay: decoupled for AdamW and LAMB, coupled L2 (added to the gradient) for the others.",
    )
    prune: Literal["random", "magnitude"] = Field("random", description="How the fixed sparsity mask is chosen.")
