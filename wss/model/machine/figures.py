"""Figures of the machine that more than one part of wss needs: each is stated here once.

The SimPy parts take them through their settings, the planner prices its choices with them and the
analytic level predicts the step with them, so all three read one definition of each figure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from wss.model.scenario import PRECISION_BYTES, Scenario
from wss.model.scenario.workload import PatchEmbedding

__all__ = ["TOKEN_ID_BYTES", "PIXEL_BYTES", "MIN_CHUNKS_BUFFERED", "OFFLOAD_CHUNK_DIVISOR", "chunks_buffered",
           "offload_chunk_bytes", "offload_chunks", "input_bytes_per_sample",
           "block_input_bytes_per_token"]

#: Bytes of one token id on the input path: an int32.
TOKEN_ID_BYTES = 4
#: Bytes of one pixel channel of an image on the input path: uint8, as a decoded JPEG or PNG holds it.
PIXEL_BYTES = 1

#: Chunks a buffer admits whatever their size.  A chunk is a unit of the simulation (as large as
#: an eighth of a kernel: ``simulation.max_chunks_per_kernel``), while the hardware moves packets,
#: so a port keeps receiving while it sends: two chunks in a buffer (one arriving, one leaving) is
#: that continuous flow at the chunk's grain.  Smaller chunks fill the buffer by its bytes.
MIN_CHUNKS_BUFFERED = 2


#: Offloaded activations travel in chunks this many times smaller than the weights'.  They share the
#: wafer's edge with the weight stream, taking turns chunk by chunk, where the hardware interleaves
#: packets: finer chunks let a waiting weight chunk through sooner, and the step then no longer
#: depends on ``simulation.chunk_bytes`` (tests/core/test_buffers.py).
OFFLOAD_CHUNK_DIVISOR = 8


def offload_chunk_bytes(chunk_bytes: float) -> float:
    """Bytes of one chunk of an offloaded block input, for the weights' ``simulation.chunk_bytes``."""
    return chunk_bytes / OFFLOAD_CHUNK_DIVISOR


def offload_chunks(total_bytes: float, chunk_bytes: float) -> int:
    """Chunks one offloaded block input of ``total_bytes`` travels in (at least one)."""
    return max(1, math.ceil(total_bytes / offload_chunk_bytes(chunk_bytes)))


def chunks_buffered(capacity_bytes: int, chunk_bytes: float) -> int:
    """Chunks of ``chunk_bytes`` a buffer of ``capacity_bytes`` (a link's :class:`ByteStore`) holds."""
    return max(MIN_CHUNKS_BUFFERED, capacity_bytes // max(1, math.ceil(chunk_bytes)))


def input_bytes_per_sample(scenario: Scenario, first_in_features: int) -> float:
    """Bytes of one sample's input on the input path, by the model's input kind: its token ids; a feature
    model's first kernel's ``first_in_features`` values in the activation precision; an image's ``H x W x C``
    pixels of one byte (uint8, as the input workers feed the decoded image); a latent's ``H x W x C`` values in
    the activation precision (``H``, ``W`` and ``C`` are the patch embedding's)."""
    model = scenario.workload.model
    if model.input == "tokens":
        return float(scenario.seq_len * TOKEN_ID_BYTES)
    act_b = PRECISION_BYTES[scenario.training.activation_precision]
    stem = model.layers[0]
    if isinstance(stem, PatchEmbedding):
        values = stem.image_size * stem.image_size * stem.in_channels
        return float(values * (PIXEL_BYTES if model.input == "image" else act_b))
    return float(first_in_features * act_b)


def block_input_bytes_per_token(scenario: Scenario, widths: Mapping[int, int]) -> dict[int, float]:
    """Each block's input, bytes per token (block -> bytes), from its width in features per token: what
    activation offload sends out of the wafer and reads back, in the activation precision."""
    act_b = PRECISION_BYTES[scenario.training.activation_precision]
    return {block: float(width * act_b) for block, width in widths.items()}
