"""Hardware description: wafers, MemoryX, SwarmX and input workers.

Every figure lives in a named preset under ``configs/`` with its public source
and a confidence beside it (H stated in an official document or paper, M
secondary or derived, L third-party or unverified, ASSUMPTION not published);
a scenario names a preset and overrides fields.  Units are in the field
names; per-shard and per-link figures are per unit, never aggregated.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from wss.model.scenario.base import (
    BANDWIDTH,
    BUFFER,
    CAPACITY,
    EFFICIENCY,
    IDLE_POWER,
    LATENCY,
    OVERHEAD,
    POWER,
    Flag,
    Fraction,
    Frozen,
    Integer,
    Range,
    Real,
    bounded,
)

#: Rows or columns of a wafer's core grid (a 300 mm wafer holds about a thousand of each).
GRID = Range(1, 10_000)
#: Cycles of a fixed per-hop or per-feature cost.
CYCLES = Range(0, 1e6, "cycles")

__all__ = ["WaferConfig", "MemoryXConfig", "SwarmXConfig", "InputsConfig", "InputPipelineConfig", "INPUT_KINDS",
           "RuntimeConfig", "ActivationStoreConfig",
           "HardwareConfig"]


# The power figures of the wafer, MemoryX and SwarmX configs, stated once: what ``result/energy.py`` reads.


def _power_busy(what: str, scope: str) -> Any:
    """The ``power_busy_W`` field of a part: ``what`` draws it while busy; ``scope`` says what it covers."""
    return bounded(
        None,
        within=POWER,
        description=f"Electrical power of {what} while it is busy, in watts ({scope}). "
        "None: not given, and the Result carries no energy.",
    )


def _power_idle(what: str) -> Any:
    """The ``power_idle_W`` field of a part: ``what`` draws it while idle (unset: its busy figure)."""
    return bounded(
        None,
        within=IDLE_POWER,
        description=f"Electrical power of {what} while it is idle or waiting, in watts. "
        "None: the same as power_busy_W (no source gives an idle figure).",
    )


class WaferConfig(Frozen):
    """One wafer-scale engine in its system (a CS-2 or CS-3)."""

    name: str = Field("wafer", description="Label of this wafer model, e.g. 'wse2'.")
    core_rows: Integer = bounded(description="Rows of the processing-element grid (features map to rows).", within=GRID)
    core_cols: Integer = bounded(
        description="Columns of the processing-element grid (tokens map to columns).", within=GRID
    )
    sram_per_core_bytes: Integer = bounded(description="SRAM per core in bytes.", within=Range(1, 2**30, "bytes"))
    sram_reserved_fraction: Fraction = Field(
        0.25,
        description="Fraction of SRAM kept for code, stream buffers and scratch (an assumption), "
        "not available to stored activations, in [0, 1).",
    )
    clock_Hz: Real = bounded(description="Core clock in Hz.", within=Range(1e6, 1e11, "Hz"))
    simd_width: Integer = bounded(
        description="FP16 FMAC lanes per core: an AXPY of n elements takes ceil(n / simd_width) cycles.",
        within=Range(1, 1024),
    )
    hop_latency_cycles: Real = bounded(description="Cycles per mesh hop (router pipeline included).", within=CYCLES)
    io_bandwidth_Bps: Real = bounded(description="External I/O bandwidth in bytes/s, each direction.", within=BANDWIDTH)
    ingress_buffer_bytes: Integer = bounded(
        134217728,
        description="The wafer's ingress buffer for streamed weights, bytes (part of the reserved SRAM): how far "
        "the stream can run ahead of the kernel being computed.",
        within=BUFFER,
    )
    partial_sum_ring_wavelets_per_cycle: Real = bounded(
        1.0,
        within=Range(1e-3, 1e9),
        why="the top is an idealised ring that never binds",
        description="Partial sums the column's partial-sum ring moves per cycle on each link (one 32-bit wavelet "
        "per link and direction per cycle; partial sums are fp32). Bounds a lane's kernel at out_features x "
        "tokens-per-core cycles.",
    )
    max_lanes: Integer | None = bounded(
        None,
        within=GRID,
        description="Most lanes a layer narrower than the wafer may fold into (groups of engine rows, each with "
        "its share of the tokens and its own partial-sum ring; the compiler's logs print them). None: as many as "
        "the rows and tokens allow; 1: every layer over all rows.",
    )
    partial_sum_overhead_cycles: Real = bounded(
        4.0,
        description="Cycles per output feature on every engine row for the partial-sum hand-off (blog: 4).",
        within=CYCLES,
    )
    kernel_efficiency: Real = bounded(
        1.0,
        within=EFFICIENCY,
        description="Achieved fraction of the cycle model's ideal on weight kernels: their cycles are divided by "
        "it (1.0 = the blog's AXPY schedule with nothing else in the way).",
    )
    nonweight_efficiency: Real = bounded(
        0.5,
        description="Achieved fraction of the attainable rate for on-wafer non-weight work (attention, norms, "
        "...): of peak, or of what sram_bandwidth_Bps feeds where that is less.",
        within=EFFICIENCY,
    )
    sram_bandwidth_Bps: Real | None = bounded(
        None,
        within=Range(1e9, 1e20, "B/s"),
        description="The wafer's total SRAM bandwidth, bytes/s. Non-weight work reads and writes its operands in "
        "SRAM, so it runs at most at this over 3 bytes per FLOP (an fp16 multiply-add reads two operands and "
        "writes one); unset: at peak.",
    )
    power_busy_W: Real | None = _power_busy("one CS-X system", "the whole system: wafer, power supplies, cooling, I/O")
    power_idle_W: Real | None = _power_idle("one CS-X system")

    @property
    def cores(self) -> int:
        return self.core_rows * self.core_cols

    @property
    def sram_bytes(self) -> int:
        return self.cores * self.sram_per_core_bytes

    @property
    def activation_sram_bytes(self) -> float:
        """SRAM available to stored activations."""
        return self.sram_bytes * (1.0 - self.sram_reserved_fraction)

    @property
    def peak_flops(self) -> float:
        """Dense FP16 peak: cores x simd lanes x 2 FLOP per FMAC x clock."""
        return self.cores * self.simd_width * 2.0 * self.clock_Hz


class MemoryXConfig(Frozen):
    """MemoryX: sharded weight and optimizer-state store with an optimizer coprocessor per shard."""

    name: str = Field("memoryx", description="Label of this MemoryX configuration.")
    shards: Integer = bounded(
        description="MemoryX nodes; every kernel's weights are split evenly across them.", within=Range(1, 10_000)
    )
    dram_capacity_bytes: Real = bounded(description="DRAM per shard in bytes.", within=CAPACITY)
    dram_bandwidth_Bps: Real = bounded(description="DRAM bandwidth per shard in bytes/s.", within=BANDWIDTH)
    flash_capacity_bytes: Real = bounded(0.0, description="Flash per shard in bytes.", within=CAPACITY)
    flash_read_bandwidth_Bps: Real = bounded(
        description="Flash read bandwidth per shard in bytes/s.", within=BANDWIDTH
    )
    flash_write_bandwidth_Bps: Real = bounded(
        description="Flash write bandwidth per shard in bytes/s.", within=BANDWIDTH
    )
    network_bandwidth_Bps: Real = bounded(
        description="Network bandwidth per shard toward SwarmX, bytes/s each direction.", within=BANDWIDTH
    )
    optimizer_flops: Real = bounded(
        description="Optimizer coprocessor FLOP/s per shard.", within=Range(1e3, 1e21, "FLOP/s")
    )
    prefetch_buffer_fraction: Real = bounded(
        0.25,
        within=EFFICIENCY,
        description="Fraction of DRAM kept as the staging buffer for flash prefetch when the model spills to flash.",
    )
    power_busy_W: Real | None = _power_busy("one MemoryX node (shard)", "per node, never the total")
    power_idle_W: Real | None = _power_idle("one MemoryX node (shard)")

    @property
    def dram_total_bytes(self) -> float:
        return self.shards * self.dram_capacity_bytes

    @property
    def flash_total_bytes(self) -> float:
        return self.shards * self.flash_capacity_bytes

    @property
    def capacity_bytes(self) -> float:
        return self.dram_total_bytes + self.flash_total_bytes


class SwarmXConfig(Frozen):
    """SwarmX: broadcast/reduce tree between MemoryX and the wafers."""

    name: str = Field("swarmx", description="Label of this SwarmX configuration.")
    fan_out: Integer = bounded(description="Children per SwarmX node.", within=Range(2, 1024))
    link_bandwidth_Bps: Real = bounded(
        description="Bandwidth of one tree edge, bytes/s each direction.", within=BANDWIDTH
    )
    hop_latency_s: Real = bounded(description="Latency added by one SwarmX hop, in seconds.", within=LATENCY)
    port_buffer_bytes: Integer = bounded(
        134217728,
        within=BUFFER,
        description="Buffer in front of each SwarmX link (a node's port, and the root's port toward MemoryX), "
        "bytes: how much of the stream can wait there (credit flow control).",
    )
    power_busy_W: Real | None = _power_busy("one SwarmX node", "per node, never the total")
    power_idle_W: Real | None = _power_idle("one SwarmX node")

    def levels(self, wafers: int) -> int:
        """Depth of a balanced tree of this fan-out over ``wafers`` leaves (at least one node)."""
        if wafers <= 1:
            return 1
        return max(1, math.ceil(math.log(wafers) / math.log(self.fan_out) - 1e-12))

    def nodes_per_level(self, wafers: int) -> list[int]:
        """Nodes at each level, root first: level l has ceil(N / f^(D-l+1)) nodes."""
        depth = self.levels(wafers)
        return [max(1, math.ceil(wafers / self.fan_out ** (depth - level + 1))) for level in range(1, depth + 1)]

    def edge_names(self, wafers: int) -> list[str]:
        """Every edge, root first: ``swarmx.l<level>.<child>``, where the children of level ``l`` are the
        nodes of level ``l + 1`` or, at the last level, the wafers (docs/unfolded.md)."""
        nodes = self.nodes_per_level(wafers)
        widths = [*nodes[1:], wafers]
        return [f"swarmx.l{level}.{c}" for level, width in enumerate(widths, start=1) for c in range(width)]

    def node_names(self, wafers: int) -> list[str]:
        """Every node, root first: ``swarmx.l<level>.n<index>`` (docs/unfolded.md)."""
        return [f"swarmx.l{level}.n{i}" for level, count in enumerate(self.nodes_per_level(wafers), start=1)
                for i in range(count)]

    def wafers_below(self, level: int, node: int, wafers: int) -> range:
        """The wafers under node ``node`` of level ``level`` (a child ``c`` hangs under node ``c // fan_out``)."""
        span = self.fan_out ** (self.levels(wafers) - level + 1)
        return range(node * span, min((node + 1) * span, wafers))


class InputsConfig(Frozen):
    """Input workers: stream each wafer's data shard."""

    bandwidth_Bps: Real = bounded(description="Input-worker bandwidth into one wafer, bytes/s.", within=BANDWIDTH)
    latency_s: Real = bounded(0.0, description="Latency of one input transfer, seconds.", within=LATENCY)
    samples_per_s: Real | None = bounded(
        None,
        within=Range(1e-3, 1e12, "samples/s"),
        description="Samples per second the input workers can prepare for one wafer (reading, decoding, "
        "tokenising, masking), or null for no limit beyond bandwidth_Bps.",
    )

    @model_serializer(mode="wrap")
    def _omit_unlimited(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if self.samples_per_s is None:
            data.pop("samples_per_s", None)
        return data


#: Kinds of input preparation (``hardware.input_pipeline.kind``) and the model inputs each can feed.
INPUT_KINDS = {
    "pretokenised": ("tokens",),  # token ids read as they were written (e.g. HDF5 shards): no work per sample
    "masked_tokens": ("tokens",),  # token ids masked on the fly for masked-language modelling (BERT's, ESM's MLM)
    "text_tokenise": ("tokens",),  # raw text (a sentence) tokenised on the fly, as fine-tuning loaders of text do
    "image_decode": ("image",),  # compressed images decoded and augmented (JPEG, crop, flip)
}

#: Seconds one process spends preparing one sample, or one token of a sample.
PREPARE_COST = Range(0.0, 1e3, "s")


class InputPipelineConfig(Frozen):
    """How the input workers prepare each sample before sending it: the preparation half of the input path.

    One process spends ``prepare_s_per_sample + prepare_s_per_token x tokens`` on a sample; each wafer has
    ``workers_per_wafer`` input workers, each preparing in ``max(1, num_workers)`` processes, so a wafer gets
    ``workers_per_wafer x max(1, num_workers) / cost`` samples per second (wss/model/machine/input_rate.py).
    Omitted: no kind, no cost, preparation never limits the input (the input path's bandwidth_Bps still does).
    The costs per kind live in presets under ``configs/input_pipeline``, each sourced or calibrated.
    """

    name: str = Field("input-pipeline", description="Label of this input pipeline configuration.")
    kind: Literal["pretokenised", "masked_tokens", "text_tokenise", "image_decode"] | None = Field(
        None,
        description="What preparing a sample takes: 'pretokenised' (token ids read as written), 'masked_tokens' "
        "(token ids masked on the fly, as masked-language models do), 'text_tokenise' (raw text tokenised on the "
        "fly, as fine-tuning loaders that read sentences do), 'image_decode' (compressed images decoded and "
        "augmented); null: not stated, preparation is free.",
    )
    prepare_s_per_sample: Real = bounded(
        0.0,
        within=PREPARE_COST,
        description="Seconds one preparing process spends on one sample, whatever its length (e.g. decoding an "
        "image).",
    )
    prepare_s_per_token: Real = bounded(
        0.0,
        within=PREPARE_COST,
        description="Seconds one preparing process spends on each token of a sample (e.g. masking a sequence).",
    )
    workers_per_wafer: Integer = bounded(
        1, within=Range(1, 10_000),
        description="Input workers feeding each wafer (the cluster's input-worker tasks per system).",
    )
    num_workers: Integer = bounded(
        0, within=Range(0, 10_000),
        description="Data-loader processes preparing samples in each input worker (the model zoo configuration's "
        "num_workers); 0, PyTorch DataLoader's default: the input worker's main process prepares them itself.",
    )

    @model_validator(mode="after")
    def _kind_given(self) -> InputPipelineConfig:
        if self.kind is None and (self.prepare_s_per_sample or self.prepare_s_per_token):
            raise ValueError("a preparation cost needs the kind of input it prepares (kind)")
        return self

    @property
    def is_default(self) -> bool:
        """Left out of the scenario (or given as it would be): serialised only otherwise."""
        return self == InputPipelineConfig()


class RuntimeConfig(Frozen):
    """Fixed costs of the software stack that do not scale with the work: what a real step pays
    beyond streaming and arithmetic.

    None is stated in a public document; the shipped ``configs/runtime`` presets say where their
    values come from (calibrated on published measured runs, or zero for an ideal runtime).  The software
    release is part of what a run is: the same model on the same systems ran about 1.7x faster on a later
    release (ALCF AI Testbed user guide and DABench run logs of GPT-J 6B), so there is one preset per release family
    (``cerebras-ws`` the newest, ``cerebras-ws-r1.8`` ...), and a scenario names its release by naming one.
    """

    name: str = Field("runtime", description="Label of this runtime configuration.")
    release: str | None = Field(
        None,
        description="The software release these figures describe (e.g. 'R1.8'): a label that the shipped presets "
        "set; the timing follows the fields below. Choose a release with hardware.runtime: <preset> (wss presets "
        "lists them).",
    )
    compute_efficiency: Real = bounded(
        1.0,
        within=EFFICIENCY,
        description="Achieved fraction of the newest release's rate on the wafer's work: weight kernels and "
        "non-weight ops take 1/compute_efficiency as long (an older release's compiled program on the same chip). "
        "1.0: the newest release, whose chip-level fraction is the wafer's kernel_efficiency.",
    )
    kernel_switch_s: Real = bounded(
        0.0,
        within=OVERHEAD,
        description="Wafer time per pass of a weight kernel (forward, recompute or backward) to switch the "
        "wafer to it: load its program and routes, start its pipeline. MemoryX keeps streaming meanwhile.",
    )
    kernel_pass_min_s: Real = bounded(
        0.0,
        within=OVERHEAD,
        description="Shortest time from the start of one weight kernel's pass (forward, recompute or backward) to "
        "the start of the next, seconds: the runtime readies each pass (its program and routes, its weights' "
        "stream) while the one before it runs, so a pass that begins sooner waits for it; the work between them "
        "(attention, norms, fixed costs) counts towards it. MemoryX keeps streaming meanwhile. Unlike "
        "kernel_switch_s it costs nothing where passes are longer: it binds small micro-batches of small models. "
        "Serialised only when set, so scenarios without it keep their hash.",
    )
    micro_batch_overhead_s: Real = bounded(
        0.0, description="Wafer time at the start of every micro-batch (runtime synchronisation), seconds.",
        within=OVERHEAD,
    )
    update_overhead_s: Real = bounded(
        0.0,
        within=OVERHEAD,
        description="MemoryX time per kernel update, once a step, after the update's own work, seconds: the "
        "optimizer's updates run one at a time, so a step of many kernels and little work waits for their sum "
        "(the next step's first passes need their kernels updated), while longer backward passes hide it. "
        "Gradient accumulation and the global norm's jobs do not pay it. Serialised only when set, so scenarios "
        "without it keep their hash.",
    )
    step_overhead_s: Real = bounded(
        0.0,
        within=OVERHEAD,
        description="Wafer time at the start of every step (host and runtime synchronisation, loss and metric "
        "reporting), seconds.",
    )

    @model_serializer(mode="wrap")
    def _omit_unset(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if not self.kernel_pass_min_s:
            data.pop("kernel_pass_min_s", None)
        if not self.update_overhead_s:
            data.pop("update_overhead_s", None)
        return data

    @property
    def is_ideal(self) -> bool:
        """No fixed cost at all."""
        return not (self.kernel_switch_s or self.kernel_pass_min_s or self.micro_batch_overhead_s
                    or self.step_overhead_s or self.update_overhead_s)


class ActivationStoreConfig(Frozen):
    """Where offloaded block inputs wait (``training.activation_checkpointing: offload``), and how fast.

    The cluster presets name the activation servers (``configs/activation_store/activation-servers.yaml``): each
    wafer's own store across the network, at 2 x 100 GbE (an assumption a published run checks).  Omitted on a
    hardware without a cluster preset: a store on each wafer's own hosts that keeps up with the wafer's edge and
    has room for everything (an ASSUMPTION: no public document gives the servers' rate or room; docs/model.md,
    "Activation offload").
    """

    name: str = Field("activation-store", description="Label of this activation store configuration.")
    location: Literal["host", "memoryx"] = Field(
        "host",
        description="'host': a store per wafer (e.g. the wafer's worker hosts), limited by bandwidth_Bps and "
        "capacity_bytes; 'memoryx': MemoryX keeps the block inputs of every wafer, so they cross MemoryX's "
        "network (shared with the weight stream and the gradient intake) and its DRAM, and need room in the "
        "DRAM that the model state leaves.",
    )
    bandwidth_Bps: Real | None = bounded(
        None,
        within=BANDWIDTH,
        description="location 'host' only: each wafer's store bandwidth in bytes/s, shared by block inputs "
        "going in and coming back; null: no limit beyond the wafer's edge.",
    )
    capacity_bytes: Real | None = bounded(
        None,
        within=CAPACITY,
        description="location 'host' only: bytes of block inputs each wafer's store holds; null: no limit. A "
        "micro-batch's block inputs (every block's) must fit.",
    )

    @model_validator(mode="after")
    def _host_fields(self) -> ActivationStoreConfig:
        if self.location == "memoryx":
            given = [f for f in ("bandwidth_Bps", "capacity_bytes") if getattr(self, f) is not None]
            if given:
                verb = "apply" if len(given) > 1 else "applies"
                raise ValueError(
                    f"{' and '.join(given)} {verb} to location 'host' only: with 'memoryx' the rate is MemoryX's "
                    "network and DRAM (hardware.memoryx) and the room is the DRAM the model state leaves"
                )
        return self

    @property
    def is_unlimited(self) -> bool:
        """A host store with no limit of its own: only the wafer's edge limits offload (the default)."""
        return self.location == "host" and self.bandwidth_Bps is None and self.capacity_bytes is None

    @property
    def is_default(self) -> bool:
        """Left out of the scenario (or given as it would be): serialised only otherwise."""
        return self == ActivationStoreConfig()

    @property
    def is_per_wafer(self) -> bool:
        """Is each wafer's store its own (a host store, limited or not), so that no wafer's block inputs share a
        bandwidth with another wafer's traffic (as they would on MemoryX's network)?"""
        return self.location == "host"


class HardwareConfig(Frozen):
    """The whole cluster."""

    preset: str | None = Field(None, description="Name of the cluster preset this was built from (informational).")
    wafers: Integer = bounded(
        1,
        description="Number of CS-X systems (wafers) training data-parallel; at most the largest published cluster "
        "of the wafer's system unless allow_beyond_published_limits.",
        within=Range(1, 100_000),
    )
    wafer: WaferConfig
    memoryx: MemoryXConfig
    swarmx: SwarmXConfig
    inputs: InputsConfig
    input_pipeline: InputPipelineConfig = Field(
        default_factory=InputPipelineConfig,
        description="How the input workers prepare samples: the kind, its cost per sample and per token, the "
        "workers (omitted: preparation is free). Serialised only when given, so scenarios that leave it out keep "
        "their hash.",
    )
    runtime: RuntimeConfig = Field(
        default_factory=RuntimeConfig,
        description="Fixed costs per kernel pass, micro-batch and step (omitted: none, an ideal runtime).",
    )
    activation_store: ActivationStoreConfig = Field(
        default_factory=ActivationStoreConfig,
        description="Where offloaded block inputs wait and how fast. The cluster presets name the activation "
        "servers (each wafer's own, at an assumed 2 x 100 GbE); omitted without a cluster preset: each wafer's "
        "hosts, no limit beyond the wafer's edge, room for all - an ASSUMPTION. Serialised only when it differs "
        "from that default, so scenarios that leave it out keep their hash.",
    )
    allow_beyond_published_limits: Flag = Field(
        False,
        description="What-if studies only: accept more wafers than the largest published cluster of this "
        "wafer's system (max_cluster_wafers in the wafer's preset under configs/wafer). The run's summary says "
        "so. Serialised only when true, so scenarios that leave it false keep their hash.",
    )

    @model_serializer(mode="wrap")
    def _omit_default_override(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if not self.allow_beyond_published_limits:
            data.pop("allow_beyond_published_limits", None)
        if self.activation_store.is_default:
            data.pop("activation_store", None)
        if self.input_pipeline.is_default:
            data.pop("input_pipeline", None)
        return data
