"""Build the cluster from a plan, wire its parts, run SimPy, and collect what happened.

This is the one place that knows the topology::

    input workers --------------------------------------------+
                                                              v
    MemoryX.stream -> swarmx.down.l1 -> ... -> swarmx.down.lD -> wafer
    MemoryX.receive <- memoryx.net.in <- swarmx.up.l1 <- ... <- swarmx.up.lD <- wafer
         |
         +-> optimizer coprocessor -> update-done events -> MemoryX.stream (next step)

Each part is a class owning its SimPy resources and processes
(``wss/model/components``), built from its own small settings object; the
``*_settings`` functions here derive those from the Plan (folding identical
shards, wafers and tree paths into one), :func:`build_cluster` builds and
wires the parts, and nothing starts until :func:`run_cluster` starts it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import simpy

from wss.model.components.activations import ActivationReturn, ActivationStore, ActivationStoreSettings
from wss.model.components.dram import SharedDram
from wss.model.components.inputs import InputSettings, InputWorkers
from wss.model.components.links import Link
from wss.model.components.memoryx import FlashPrefetch, KernelStore, MemoryX, MemoryXSettings
from wss.model.components.optimizer import OptimizerCoprocessor, OptimizerSettings
from wss.model.components.part import (
    Carried,
    Carrier,
    Held,
    Part,
    Powered,
    Reading,
    Reported,
    Track,
    counters_of,
    state_of,
    waits_of,
)
from wss.model.components.shared_bandwidth import SharedBandwidth
from wss.model.components.simpy_internals import FastResource
from wss.model.components.swarmx import SwarmX, SwarmXSettings
from wss.model.components.wafer import KernelWork, Wafer, WaferSettings
from wss.model.folding.fold import analyse
from wss.model.folding.layer_fold import LayerFoldMismatch, LayersFold, unfold_layers
from wss.model.folding.probe import FoldProbe
from wss.model.folding.step_fold import analyse_steps
from wss.model.machine.figures import input_bytes_per_sample, offload_chunk_bytes
from wss.model.machine.flash_tails import flash_rng, read_factors
from wss.model.machine.input_rate import preparation_samples_per_s
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.machine.swarmx_path import swarmx_path
from wss.model.plan import FOLDED_PREFIX, Plan
from wss.model.program import Pass, build_program, gradient_passes, offload_bytes_per_token, updated_kernels
from wss.model.scenario import PRECISION_BYTES
from wss.model.sim.engine import Environment, event_count
from wss.model.sim.stall import run_or_explain

__all__ = [
    "Cluster",
    "Backbone",
    "build_backbone",
    "build_cluster",
    "build_memoryx",
    "WaferSlot",
    "assemble",
    "wire",
    "drain",
    "run_cluster",
    "start_parts",
    "optimizer_settings",
    "memoryx_settings",
    "swarmx_settings",
    "input_settings",
    "wafer_settings",
]


#: The tree's type: the folded chain (:class:`SwarmX`) or the unfolded tree of real nodes (``SwarmXTree``).
TreeT = TypeVar("TreeT", bound=SwarmX)


@dataclass
class Cluster(Generic[TreeT]):
    """The wired parts of one simulation, after it ran; ``swarmx`` is the tree of the build (folded or not)."""

    env: simpy.Environment
    plan: Plan
    program: list[Pass]
    memoryx: MemoryX
    optimizer: OptimizerCoprocessor
    swarmx: TreeT
    memoryx_in: Link
    wafer: Wafer
    inputs: InputWorkers
    flash_channel: simpy.Resource
    activations: ActivationStore | None = None
    offload_in: Link | None = None  # the second channel of the wafer's leaf edge, for offloaded activations
    store_paths: StorePaths | None = None  # a limited activation store's bandwidths
    events: int = 0
    #: What folding observed of the run and proved (the runner attaches it; empty where nothing folds).
    folding: FoldProbe = field(default_factory=FoldProbe)
    #: Each simulated wafer's own parts (:func:`build_wafer`), in wafer order: the one wafer of the folded cluster.
    wafer_parts: list[WaferParts] = field(default_factory=list)

    def links(self) -> list[Link]:
        """The links that run: the tree's, MemoryX's network ports toward the root, the offload returns."""
        return [*self.swarmx.simulated_links(), self.memoryx_in, *self.returns]

    def record(self) -> None:
        """Keep every span of MemoryX, the tree, its network ports and the offload returns (for traces)."""
        self.memoryx.record()
        self.swarmx.record()
        self.memoryx_in.record()
        if self.offload_in is not None:
            self.offload_in.record()

    def parts(self) -> list[Part]:
        """Every part, in the order their processes start (SimPy runs the events due at the same time in the
        order they were scheduled, so this order is part of the answer): MemoryX and its optimizer, its network
        ports toward the root, the wafers' input workers, the tree (its links down and up), the offload returns,
        the flash prefetch, the activation stores, their bandwidths, the wafers last (each per-wafer part once per
        simulated wafer, in wafer order)."""
        own = self.wafer_parts
        return [self.memoryx, self.optimizer, self.memoryx_in, *(w.inputs for w in own), self.swarmx,
                *self.returns, FlashPrefetch(self.memoryx), *self.activation_stores(), *self.store_parts(),
                *self.simulated]

    @property
    def simulated(self) -> list[Wafer]:
        """The wafers that run, in order (one per class of identical wafers)."""
        return [w.wafer for w in self.wafer_parts]

    @property
    def returns(self) -> list[Link]:
        """The simulated wafers' offload returns (the second channels of their leaf edges; none without offload)."""
        return [w.back for w in self.wafer_parts if w.back is not None]

    def counters(self) -> dict[str, float]:
        """Every busy-time and byte counter, by name (what folding extrapolates)."""
        return counters_of(self.parts())

    def reported(self) -> list[Reported]:
        """The parts whose busy fractions the Result's ``utilisation`` lists, in its order (each reports its own
        entries, :meth:`~wss.model.components.part.Reported.utilisation`): the representative wafer, MemoryX's
        stream, its optimizer, its flash channel, the representative's input workers, MemoryX's DRAM, its network
        ports toward the root, the tree's links, and a limited activation store's bandwidths."""
        return [self.wafer, self.memoryx, self.optimizer, FlashPrefetch(self.memoryx), self.inputs, self.memoryx.dram,
                self.memoryx_in, self.swarmx, *self.store_use()]

    def carriers(self) -> list[Carrier]:
        """The parts whose bytes the Result's ``link_bytes`` lists, in its order: MemoryX's stream, the tree down
        and up, MemoryX's network ports toward the root, the input workers, the offloaded block inputs' returns."""
        shards = self.plan.scenario.hardware.memoryx.shards
        returns = [LinkClass("activations->wafer", self.offload_in)] if self.offload_in is not None else []
        return [self.memoryx, self.swarmx, LinkClass("swarmx->memoryx", self.memoryx_in, shards), self.inputs,
                *returns]

    def tracks(self) -> list[Track]:
        """What the recorded parts offer a trace (:meth:`~wss.model.components.part.Traced.tracks`), in the order to
        draw them: MemoryX's weight stream and prefetch, its network ports toward the root (its gradient stream),
        the tree's levels.  Empty unless the cluster recorded (:meth:`record`)."""
        if self.memoryx.stream_spans is None:
            return []
        return [*self.memoryx.tracks(), self.memoryx_in.track("MemoryX", "gradient stream"), *self.swarmx.tracks()]

    def powered(self) -> list[Powered]:
        """The parts whose power the Result's ``energy`` counts by what they declare (:meth:`~wss.model.components.
        part.Powered.power_draw`), in its order between the wafers' systems and the SwarmX nodes (which it counts
        itself: each wafer at its own busy fraction, the nodes a fault cut off idle): MemoryX's nodes."""
        return [self.memoryx]

    def store_use(self) -> list[StoreUse]:
        """A limited activation store's use, as a reported part (none for the default store)."""
        paths, rep = self.store_paths, self.activations
        if paths is None or rep is None or not rep.limited:
            return []
        return [StoreUse(paths, rep, self.activation_stores())]

    def store_parts(self) -> list[SharedBandwidth]:
        """The bandwidths of a limited activation store (none for the default store)."""
        return self.store_paths.parts() if self.store_paths is not None else []

    def activation_stores(self) -> list[ActivationStore]:
        """The simulated wafers' activation stores."""
        return [w.store for w in self.wafer_parts if w.store is not None]

    def state(self) -> dict[str, Held]:
        """What is queued or in flight anywhere, every part's (:func:`~wss.model.components.part.state_of`):
        the same at two fold points means the run repeats."""
        return state_of(self.parts())

    def wait_context(self) -> tuple[dict[int, str], str]:
        """Names of everything a process can wait on, and where the wafer is (for a stall's message)."""
        names = waits_of(self.parts())
        for (kernel, step), ev in self.optimizer.done.items():
            names[id(ev)] = f"the update of kernel {self.plan.kernels[kernel].kernel.name} in step {step}"
        where = (f"the wafer in pass {self.wafer.current_pass + 1} of {len(self.program)}"
                 if self.wafer.current_pass >= 0 else "before the wafer's first pass")
        return names, where

    def total(self, counter: str) -> float:
        """A counter's final value on the unfolded time axis."""
        return self.folding.unfolded(counter, self.counters()[counter])

    def totals(self) -> dict[str, float]:
        """Every counter's final value on the unfolded time axis, counted once (for reading many)."""
        return {name: self.folding.unfolded(name, value) for name, value in self.counters().items()}


def optimizer_settings(plan: Plan) -> OptimizerSettings:
    """The optimizer coprocessors of all MemoryX shards, folded: the shards' rates add up (each at the slowest
    shard's: :mod:`wss.model.machine.memoryx_rates`)."""
    rates = memoryx_rates(plan.scenario)
    return OptimizerSettings(
        flash_read_Bps=rates.flash_read_Bps,
        flash_write_Bps=rates.flash_write_Bps,
        flops_per_s=rates.optimizer_flops,
        cost=plan.optimizer,
        incoming_bytes_per_param=float(PRECISION_BYTES[plan.scenario.training.gradient_precision]),
        update_overhead_s=plan.scenario.hardware.runtime.update_overhead_s,
    )


def memoryx_settings(plan: Plan) -> MemoryXSettings:
    """MemoryX's shards folded into one stream (each holds an even slice of every kernel)."""
    hw = plan.scenario.hardware
    rates = memoryx_rates(plan.scenario)
    kernels = tuple(
        KernelStore(
            index=k.index,
            nnz=k.nnz,
            n_chunks=k.n_chunks,
            stream_bytes=k.stream_bytes,
            read_bytes=k.read_bytes,
            tier=k.tier,
            state_owner=k.state_owner,
            shares_accumulator=plan.shares_accumulator(k.index),
            state_tiers=k.state_tiers,
        )
        for k in plan.kernels
    )
    return MemoryXSettings(
        network_Bps=rates.network_Bps,
        flash_read_Bps=rates.flash_read_Bps,
        latency_s=hw.swarmx.hop_latency_s,
        staging_bytes=plan.staging_bytes,
        micro_batches=len(plan.micro_batches),
        kernels=kernels,
        global_norm=plan.scenario.training.gradient_clipping == "global_norm",
        shards=hw.memoryx.shards,
        power_busy_W=hw.memoryx.power_busy_W,
        power_idle_W=hw.memoryx.power_idle_W,
    )


def swarmx_settings(plan: Plan) -> SwarmXSettings:
    """The tree for the scenario's wafers; its edges into the wafers run at most at a wafer's I/O rate."""
    path = swarmx_path(plan.scenario.hardware)
    return SwarmXSettings(
        levels=path.depth,
        nodes_per_level=path.nodes_per_level,
        link_bandwidth_Bps=path.link_Bps,
        leaf_bandwidth_Bps=path.edge_Bps,
        hop_latency_s=path.hop_latency_s,
        port_buffer_bytes=path.port_buffer_bytes,
    )


def input_settings(plan: Plan) -> InputSettings:
    """The input workers of the busiest wafer: token ids, or feature vectors in the activation precision, at the
    rate its input pipeline prepares them."""
    s = plan.scenario
    return InputSettings(
        bandwidth_Bps=s.hardware.inputs.bandwidth_Bps,
        latency_s=s.hardware.inputs.latency_s,
        bytes_per_sample=input_bytes_per_sample(s, plan.kernels[0].kernel.in_features),
        micro_batch_samples=tuple(plan.micro_batches),
        simulated_micro_batches=tuple(plan.simulated_micro_batches),
        steps=plan.simulated_steps,
        samples_per_s=preparation_samples_per_s(s),
    )


def wafer_settings(plan: Plan) -> WaferSettings:
    """The busiest wafer (the largest shard), which sets the pace of a uniform cluster."""
    s = plan.scenario
    offload = offload_bytes_per_token(plan)
    return WaferSettings(
        clock_Hz=s.hardware.wafer.clock_Hz,
        kernels=tuple(KernelWork(k.n_chunks, k.grad_bytes, k.cycles) for k in plan.kernels),
        op_seconds=plan.wafer_op_seconds,
        loss_op=len(plan.ops) - 1,
        ingress_buffer_bytes=s.hardware.wafer.ingress_buffer_bytes,
        kernel_switch_s=s.hardware.runtime.kernel_switch_s,
        kernel_pass_min_s=s.hardware.runtime.kernel_pass_min_s,
        micro_batch_overhead_s=s.hardware.runtime.micro_batch_overhead_s,
        step_overhead_s=s.hardware.runtime.step_overhead_s,
        offload_bytes_per_token=offload,
        offload_chunk_bytes=offload_chunk_bytes(s.simulation.chunk_bytes),
        offload_buffer_bytes=max(1, math.ceil(max(offload.values(), default=0.0) * max(plan.tokens_per_micro_batch))),
    )


def activation_store_settings(plan: Plan, program: list[Pass], wafer: WaferSettings,
                              copies: float = 1.0) -> ActivationStoreSettings:
    """The block inputs to send back, one per recompute of a block's first op, in program order; a limited
    store's intake is a SwarmX port's buffer, and its bytes stand for ``copies`` wafers' on shared parts."""
    sent = {(p.step, p.micro_batch, p.op): p.index for p in program if p.phase == "forward"}
    returns = tuple(
        ActivationReturn(p.step, p.micro_batch, p.index, total, wafer.offload_chunks(total),
                         sent.get((p.step, p.micro_batch, p.op), -1))
        for p in program
        if p.phase == "recompute" and p.op in wafer.offload_bytes_per_token
        for total in (wafer.offload_bytes_per_token[p.op] * p.tokens,)
    )
    return ActivationStoreSettings(returns, intake_bytes=plan.scenario.hardware.swarmx.port_buffer_bytes,
                                   copies=copies)


@dataclass
class StorePaths:
    """The bandwidths of a limited activation store (``hardware.activation_store``), built once per run.

    ``host``: each wafer's store gets a bandwidth of its own (:meth:`for_wafer`), shared by both
    directions.  ``memoryx``: every wafer's store shares MemoryX's network ports (``net_in`` beside
    the gradient intake, ``net_out`` beside the weight stream) and its DRAM.  Unlimited: no paths.
    """

    env: simpy.Environment
    host_Bps: float | None = None
    net_in: SharedBandwidth | None = None
    net_out: SharedBandwidth | None = None
    dram: SharedBandwidth | None = None
    hosts: list[SharedBandwidth] = field(default_factory=list)

    def for_wafer(self, name: str) -> tuple[tuple[SharedBandwidth, ...], tuple[SharedBandwidth, ...]]:
        """What a byte going into one wafer's store crosses, and a byte coming back."""
        if self.host_Bps is not None:
            own = SharedBandwidth(self.env, self.host_Bps, f"{name}.store")
            self.hosts.append(own)
            return (own,), (own,)
        if self.net_in is not None and self.net_out is not None and self.dram is not None:
            return (self.net_in, self.dram), (self.net_out, self.dram)
        return (), ()

    @property
    def shared(self) -> bool:
        """Do the wafers' stores share their bandwidths (MemoryX), so each byte counts for every wafer it stands for?"""
        return self.net_in is not None

    def parts(self) -> list[SharedBandwidth]:
        """Every bandwidth the stores use, for counters, state and utilisation."""
        shared = [bw for bw in (self.net_in, self.net_out) if bw is not None]
        return [*shared, *self.hosts]


@dataclass(frozen=True)
class StoreUse:
    """What the Result reports of a limited activation store: the fraction of each bandwidth it crosses used (all
    its traffic), and ``activations.store``, the fraction of the store's bandwidth that block inputs use, both
    directions (a host store: the representative wafer's own; MemoryX: its network, for every wafer)."""

    paths: StorePaths
    rep: ActivationStore
    stores: list[ActivationStore]

    def utilisation(self, at: Reading) -> dict[str, float]:
        def moved(store: ActivationStore) -> float:
            return at.total(store.name + ".bytes_stored") + at.total(store.name + ".bytes_returned")

        if self.paths.net_in is None:
            return {"activations.store": moved(self.rep) / (self.rep.writes[0].bandwidth_Bps * at.seconds)}
        out = {k: v for bw in self.paths.parts() for k, v in bw.utilisation(at).items()}
        every = sum(moved(store) * store.settings.copies for store in self.stores)
        out["activations.store"] = every / (2 * self.paths.net_in.bandwidth_Bps * at.seconds)
        return out


@dataclass(frozen=True)
class LinkClass:
    """A link the Result reports under the name of what it joins (a link alone does not know): ``links`` of them
    whose bytes its counter holds all together (MemoryX's shards, folded), or else one per wafer that trains, its
    counter holding one's."""

    label: str
    link: Link
    links: int | None = None

    def carried(self, at: Reading) -> dict[str, Carried]:
        moved = at.total(self.link.name + ".bytes")
        if self.links is None:
            return {self.label: Carried(at.wafers, moved)}
        return {self.label: Carried(self.links, moved / self.links)}


def store_paths(env: simpy.Environment, plan: Plan, memoryx: MemoryX, memoryx_in: Link) -> StorePaths:
    """The store's bandwidths; with ``memoryx``, MemoryX's stream and gradient intake move onto the shared ports.

    Only an offloading plan with a limited store changes anything: the default keeps today's parts as they are.
    """
    store = plan.scenario.hardware.activation_store
    if plan.checkpointing != "offload" or store.is_unlimited:
        return StorePaths(env)
    if store.location == "host":
        return StorePaths(env, host_Bps=store.bandwidth_Bps) if store.bandwidth_Bps is not None else StorePaths(env)
    net = memoryx_rates(plan.scenario).network_Bps
    paths = StorePaths(env, net_in=SharedBandwidth(env, net, "memoryx.ports.in"),
                       net_out=SharedBandwidth(env, net, "memoryx.ports.out"), dram=memoryx.dram)
    memoryx.net_out = paths.net_out
    memoryx_in.shared = paths.net_in
    return paths


def folded_copies(plan: Plan) -> float:
    """Wafers the folded cluster's one wafer stands for on shared parts: every wafer's bytes over the busiest's."""
    return sum(plan.wafer_samples) / max(plan.wafer_samples)


def memoryx_in_link(env: simpy.Environment, plan: Plan) -> Link:
    """MemoryX's network ports toward the root, for the summed gradients coming back (all shards together).

    Its buffer is the root's port buffer toward MemoryX.
    """
    hw = plan.scenario.hardware
    return Link(env, "memoryx.net.in", memoryx_rates(plan.scenario).network_Bps, hw.swarmx.hop_latency_s,
                hw.swarmx.port_buffer_bytes)


def build_memoryx(
    env: simpy.Environment, plan: Plan, program: list[Pass]
) -> tuple[MemoryX, OptimizerCoprocessor, simpy.Resource]:
    """MemoryX (its shards folded), its optimizer coprocessor, and the DRAM and flash channel they share."""
    flash_channel = FastResource(env, capacity=1)  # prefetch and flash-resident updates share it
    dram = SharedDram(env, memoryx_rates(plan.scenario).dram_Bps)  # the stream, intake, staging, optimizer share it
    optimizer = OptimizerCoprocessor(env, optimizer_settings(plan), flash_channel, dram)
    memoryx = MemoryX(env, memoryx_settings(plan), program, optimizer, flash_channel, dram)
    if plan.scenario.faults.flash is not None:
        memoryx.flash_read_factor = read_factors(plan.scenario.faults.flash, flash_rng(plan.scenario.seed))
    return memoryx, optimizer, flash_channel


@dataclass
class Backbone:
    """What the folded and the unfolded build share: the environment, the program, MemoryX (its shards folded)
    with its optimizer and flash channel, MemoryX's network ports toward the root for the gradients coming back
    (wired into MemoryX's gradient inbox), and the activation store's bandwidths."""

    env: Environment
    program: list[Pass]
    memoryx: MemoryX
    optimizer: OptimizerCoprocessor
    flash_channel: simpy.Resource
    memoryx_in: Link
    paths: StorePaths


def build_backbone(plan: Plan) -> Backbone:
    """MemoryX's side of the cluster, built and wired up to the tree (which each build adds)."""
    env = Environment()  # SimPy's, with its event loop in one function (wss.model.sim.engine)
    program = build_program(plan)
    memoryx, optimizer, flash_channel = build_memoryx(env, plan, program)
    memoryx_in = memoryx_in_link(env, plan)
    memoryx_in.connect(memoryx.grad_inbox)
    paths = store_paths(env, plan, memoryx, memoryx_in)
    return Backbone(env, program, memoryx, optimizer, flash_channel, memoryx_in, paths)


@dataclass
class WaferParts:
    """One simulated wafer's own parts: its input workers and the wafer, and with activation offload its store and
    ``back``, the second channel of its leaf edge the block inputs come back on."""

    inputs: InputWorkers
    wafer: Wafer
    store: ActivationStore | None = None
    back: Link | None = None


def build_wafer(env: simpy.Environment, plan: Plan, paths: StorePaths, program: list[Pass], inputs: InputSettings,
                settings: WaferSettings, leaf_down: Link, leaf_up: Link, suffix: str = "",
                copies: float = 1.0) -> WaferParts:
    """A wafer and its own parts, wired between its leaf edges (the one place a per-wafer part is built).

    ``suffix`` names them (``wafer<suffix>``, ``inputs<suffix>``, ...: empty in the folded cluster, ``.<w>`` in the
    unfolded one); ``copies`` is how many wafers its bytes stand for on a store that the wafers share (MemoryX).
    Offloaded block inputs leave at the wafer's edge going up (into the store's intake, or nowhere for an unlimited
    store), and come back on a second channel of its leaf edge (its own buffers, the same wire as the weights).
    """
    ins = InputWorkers(env, dataclasses.replace(inputs, name=f"inputs{suffix}"))
    wafer = Wafer(env, dataclasses.replace(settings, name=f"wafer{suffix}"), program, ins.ready, ins.mb_started)
    leaf_down.connect(wafer.intake)
    wafer.connect(leaf_up.inbox)
    if not settings.offload_bytes_per_token:
        return WaferParts(ins, wafer)
    back = Link(env, f"{wafer.name}.offload.in", leaf_down.bandwidth_Bps, leaf_down.latency_s,
                plan.scenario.hardware.wafer.ingress_buffer_bytes)
    back.share_wire(leaf_down)
    back.connect(wafer.act_intake)
    writes, reads = paths.for_wafer(wafer.name)
    store_settings = activation_store_settings(plan, program, settings, copies if paths.shared else 1.0)
    store = ActivationStore(env, dataclasses.replace(store_settings, name=f"activations{suffix}"), wafer.forward_done,
                            writes, reads)
    store.connect(back.inbox)
    leaf_up.route("activation", store.intake)
    return WaferParts(ins, wafer, store, back)


@dataclass(frozen=True)
class WaferSlot:
    """One simulated wafer to build: the leaf of the tree it hangs under, what it runs, its names' suffix
    (:func:`build_wafer`) and how many wafers it stands for on MemoryX's ports."""

    leaf: int
    settings: WaferSettings
    inputs: InputSettings
    program: list[Pass]
    suffix: str = ""
    copies: float = 1.0


def wire(bb: Backbone, plan: Plan, tree: SwarmX, slots: list[WaferSlot]) -> list[WaferParts]:
    """The one build path of both clusters, once their tree is chosen: each simulated wafer's own parts under
    its leaf (:func:`build_wafer`), and MemoryX wired to the tree's root both ways."""
    own = [build_wafer(bb.env, plan, bb.paths, s.program, s.inputs, s.settings, tree.leaf_down(s.leaf),
                       tree.leaf_up(s.leaf), s.suffix, s.copies) for s in slots]
    bb.memoryx.connect(tree.root)
    tree.connect_root(bb.memoryx_in.inbox)
    return own


def build_cluster(plan: Plan, record: bool = False,
                  progress: Callable[[float], None] | None = None) -> Cluster[SwarmX]:
    """Build every part from its settings and wire them, one wafer standing for all under the folded tree;
    nothing runs yet (:func:`wss.model.sim.unfolded.build_unfolded` builds every wafer apart, the same way).

    With ``record`` the links and MemoryX keep every span (for traces).
    ``progress`` is called with the fraction of the program done.
    """
    bb = build_backbone(plan)
    tree = SwarmX(bb.env, swarmx_settings(plan))
    # On MemoryX's ports the one wafer stands for them all.
    slot = WaferSlot(0, wafer_settings(plan), input_settings(plan), bb.program, copies=folded_copies(plan))
    own = wire(bb, plan, tree, [slot])[0]
    own.wafer.progress = progress
    return assemble(Cluster, bb, plan, bb.program, tree, own, own.back, [own], record)


C = TypeVar("C", bound=Cluster)


def assemble(cls: type[C], bb: Backbone, plan: Plan, program: list[Pass], tree: SwarmX, rep: WaferParts,
             offload_in: Link | None, own: list[WaferParts], record: bool, **more: Any) -> C:
    """The cluster of either build (``cls`` and ``more``: the unfolded one's), from the backbone's shared parts,
    the tree, the representative wafer's parts and every simulated wafer's; with ``record`` it keeps its spans."""
    cluster = cls(bb.env, plan, program, bb.memoryx, bb.optimizer, tree, bb.memoryx_in, rep.wafer, rep.inputs,
                  bb.flash_channel, rep.store, offload_in, bb.paths, wafer_parts=own, **more)
    if record:
        cluster.record()
    return cluster


def run_cluster(plan: Plan, record: bool = False,
                progress: Callable[[float], None] | None = None) -> Cluster[SwarmX]:
    """Simulate every step of the plan; return the parts with their measurements.

    With ``record`` the links and MemoryX keep every span (for traces).
    ``progress`` is called with the fraction of the program done.
    """
    cluster = build_cluster(plan, record, progress)
    env, optimizer, folding = cluster.env, cluster.optimizer, cluster.folding
    folding.attach(cluster, [cluster.wafer], [cluster.wafer])
    processes = start_parts(env, cluster.parts())
    done = processes[cluster.wafer.name]
    drain(cluster, done, processes, plan.simulated_steps)
    if plan.layer_runs:
        folding.layers = LayersFold(tuple(folding.layer_folds))
        check_layer_crossings(cluster, folding.layers)
        unfold_layers(cluster, folding.layers)
    if plan.fold_copies:
        after_copies = plan.simulated_micro_batches[FOLDED_PREFIX]  # the last, or the first of an even split's tail
        folding.fold = analyse(folding.snapshots, cluster.wafer.timeline, plan.simulated_steps,
                               after_copies, plan.fold_copies)
    if plan.step_fold_copies:
        ends = [max(j.end for j in optimizer.jobs if j.kind == "update" and j.step == step)
                for step in range(plan.simulated_steps)]
        folding.step_fold = analyse_steps(folding.snapshots, cluster.wafer.timeline, ends, folding.fold,
                                          plan.step_fold_copies)
    return cluster


def drain(cluster: Cluster, done: simpy.Event, processes: dict[str, simpy.Process], steps: int) -> None:
    """Run until ``done`` (the wafers' programs), then let the last gradients drain and the last updates
    (of simulated step ``steps - 1``) finish; count the events.  A deadlock names what each process waits for."""
    run_or_explain(cluster.env, done, processes, cluster.wait_context)
    updated = updated_kernels(cluster.program)
    finals = [cluster.optimizer.done_event(k.index, steps - 1) for k in cluster.plan.kernels
              if k.owns_state and k.index in updated]
    run_or_explain(cluster.env, cluster.env.all_of(finals), processes, cluster.wait_context)
    cluster.events = event_count(cluster.env)


def start_parts(env: simpy.Environment, parts: list[Part]) -> dict[str, simpy.Process]:
    """Start every part's processes, in the parts' order; return them by name (for a stall's message)."""
    return {name: env.process(body) for part in parts for name, body in part.processes()}


def check_layer_crossings(cluster: Cluster, layers: LayersFold) -> None:
    """Raise :class:`LayerFoldMismatch` where a wait reaches across layer copies (:mod:`wss.model.folding.layer_fold`).

    A stream pass that waited for the previous step's update of its kernel, with copies between that
    update's gradient and the wait, would wait less (or not at all) in the real run; so would the wafer
    waiting for a micro-batch's input data after copies (the input arrives on its own schedule).
    """
    program, shift = cluster.program, layers.shift
    last_mb = len(cluster.plan.micro_batches) - 1
    grad = gradient_passes(program)
    for index, kernel, step in cluster.memoryx.update_waits:
        if shift(index) != shift(grad[(kernel, step, last_mb)]):
            raise LayerFoldMismatch(f"pass {index} waited for the update of kernel {kernel} in step {step} "
                                    "across folded blocks", "")
    for _, _, cause, index in cluster.wafer.timeline:
        if cause == "input" and shift(index) > 0:
            raise LayerFoldMismatch(f"the wafer waited for input data at pass {index}, after folded blocks", "")
