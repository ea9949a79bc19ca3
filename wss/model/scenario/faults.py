"""Faults: what makes one wafer or one SwarmX edge unlike the others.

Stragglers and degraded links turn a uniform cluster into one where no single wafer stands for the
rest, so a scenario with them runs unfolded (docs/unfolded.md):

* a **straggler**: one wafer computes ``slowdown`` times slower (thermal throttling, a core region
  remapped around a defect): its kernel cycles and on-wafer ops take that much longer;
* a **degraded link**: one SwarmX edge, named as in ``wss validate``'s list (``swarmx.l<level>.<child>``),
  runs both directions at ``bandwidth_factor`` of its bandwidth;
* **jitter**: every wafer's compute in every step takes a random factor of its time (seeded);
* a **SwarmX node down** (``nodes``): it forwards nothing, so the wafers below it are cut off, and the
  global batch is split over the wafers still reachable.

Slow flash reads (``flash``) and a slow MemoryX shard (``shards``) slow MemoryX, which the wafers share:
they do not set a wafer apart.  Every shard holds an even slice of every kernel, so a chunk is ready when
its slowest shard is: the stream runs at the slowest shard's rate times the number of shards.

Failures do not change a step (docs/faults.md): they cost time between steps, so a scenario with only
``failures`` and ``events`` still folds.

* **failures**: wafers fail at random (an MTBF per wafer); the job checkpoints its MemoryX state to
  storage every so many steps and, after a failure, restarts from the last checkpoint;
* **events**: scripted failures at given steps, charged to the run's timeline.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from wss.errors import FieldProblem
from wss.model.scenario.base import BANDWIDTH, FAULT_FACTOR, FAULT_FACTOR_WHY, Frozen, Integer, Range, Real, bounded
from wss.model.scenario.hardware import SwarmXConfig
from wss.model.scenario.validation_errors import did_you_mean

__all__ = ["Straggler", "LinkFault", "NodeFault", "ShardFault", "SHARD_RATES", "JitterConfig", "FlashConfig",
           "StorageConfig", "FailuresConfig", "FailureEvent", "FaultsConfig", "fault_problems", "describe_edges",
           "DEFAULT_STORAGE", "cut_off_wafers"]

#: The storage preset (configs/storage) that checkpoints go to when ``faults.failures.storage`` is not given.
DEFAULT_STORAGE = "parallel-fs"


class Straggler(Frozen):
    """One wafer slower than the others."""

    wafer: Integer = bounded(description="Index of the wafer, 0 to hardware.wafers - 1.", within=Range(0, 1e6))
    slowdown: Real = bounded(description="Factor on the wafer's compute time (1.5: 50% slower).",
                             within=FAULT_FACTOR, why="below 1e-3 a wafer would be a thousand times faster than "
                             "its preset, a typo; nearer 0 its compute would take no time at all")


class LinkFault(Frozen):
    """One SwarmX edge below its bandwidth, both directions."""

    edge: str = Field(description="Edge name, swarmx.l<level>.<child> (wss validate lists them).")
    bandwidth_factor: Real = bounded(description="Factor on the edge's bandwidth (0.5: half rate).",
                                     within=FAULT_FACTOR, why=FAULT_FACTOR_WHY)


class NodeFault(Frozen):
    """One SwarmX node out of service (a failed switch, a node fenced off for repair)."""

    node: str = Field(description="Node name, swarmx.l<level>.n<index> (wss validate lists them); not the root "
                      "(swarmx.l1.n0), which every wafer hangs under.")
    kind: Literal["down"] = Field(
        "down", description="'down': the node forwards nothing, so the wafers below it are cut off; the job runs "
        "on the others, with the global batch split over them.")


#: The rates of a MemoryX shard a fault can lower: ``<rate>_factor`` in :class:`ShardFault`.
SHARD_RATES = ("dram", "flash", "network", "optimizer")


def _shard_factor(what: str) -> Any:
    return bounded(1.0, description=f"Factor on this shard's {what} (0.5: half rate; 1: unchanged).",
                   within=FAULT_FACTOR, why=FAULT_FACTOR_WHY)


class ShardFault(Frozen):
    """One MemoryX shard below its rates: a failed DIMM channel, retired flash dies, a port at a lower speed,
    a throttled optimizer core.  Every shard holds an even slice of every kernel, so the whole stream waits
    for it."""

    shard: Integer = bounded(description="Index of the shard, 0 to hardware.memoryx.shards - 1.",
                             within=Range(0, 1e6))
    dram_factor: Real = _shard_factor("DRAM bandwidth")
    flash_factor: Real = _shard_factor("flash read and write bandwidth")
    network_factor: Real = _shard_factor("network bandwidth, both directions")
    optimizer_factor: Real = _shard_factor("optimizer FLOP/s")

    def factors(self) -> dict[str, float]:
        """Rate -> factor, for the rates of :data:`SHARD_RATES`."""
        return {rate: float(getattr(self, f"{rate}_factor")) for rate in SHARD_RATES}


class JitterConfig(Frozen):
    """Random compute noise: each wafer's compute in each step takes a factor drawn from ``distribution``."""

    distribution: Literal["lognormal"] = Field(
        "lognormal", description="'lognormal': the factor is exp(N(-sigma^2 / 2, sigma^2)), of mean 1.")
    sigma: Real = bounded(description="Standard deviation of the factor's logarithm (0.05: about 5%).",
                          within=Range(0.0, 1.0, open_low=True))


class FlashConfig(Frozen):
    """A tail of slow flash reads in MemoryX's prefetch (seeded)."""

    tail_probability: Real = bounded(description="Fraction of flash reads that are slow (0.01: 1%).",
                                     within=Range(0.0, 1.0))
    tail_factor: Real = bounded(description="Factor on a slow read's time (10: ten times as long).",
                                within=Range(1.0, 1e3))


class StorageConfig(Frozen):
    """Where checkpoints go: a file system the MemoryX nodes write to (presets under configs/storage)."""

    name: str = Field("storage", description="Label of this storage configuration.")
    write_bandwidth_Bps: Real = bounded(
        description="Aggregate write bandwidth the training job gets from the storage, bytes/s.", within=BANDWIDTH)


class FailuresConfig(Frozen):
    """Random wafer failures, periodic checkpoints and restarts: what they cost in goodput (docs/faults.md)."""

    mtbf_hours_per_wafer: Real | None = bounded(
        None,
        description="Mean time between failures of one wafer's system, hours; a failure of any wafer that trains "
        "stops the job (cluster MTBF = this / the wafers that train: hardware.wafers less those a SwarmX node "
        "that is down cuts off). None: no random failures (only scripted events).",
        within=Range(0.0, 1e9, "h", open_low=True),
    )
    checkpoint_every_steps: Annotated[Integer, Field(ge=1, le=10**9)] | Literal["auto"] = Field(
        "auto",
        description="Steps between checkpoints of the MemoryX state; 'auto' = the interval with the highest "
        "expected goodput (needs mtbf_hours_per_wafer). Range: 1 to 1,000,000,000 or 'auto'.",
    )
    restart_s: Real = bounded(
        description="Seconds from a failure to training again (replace or fence the wafer, reload the last "
        "checkpoint, restart the job), not counting the steps lost since that checkpoint.",
        within=Range(0.0, 1e7, "s"))
    storage: StorageConfig = Field(
        description="Checkpoint storage: a preset name under configs/storage or its fields "
        f"(default: {DEFAULT_STORAGE}).")
    train_steps: Integer | None = bounded(
        None, description="Steps of the whole training run, for its expected time to train (or train_tokens).",
        within=Range(1, 1e12))
    train_tokens: Real | None = bounded(
        None, description="Tokens (samples for feature models) of the whole training run: train_steps is this "
        "over the tokens of one step, rounded up.", within=Range(0.0, 1e18, open_low=True))


class FailureEvent(Frozen):
    """A scripted failure: a wafer fails at the end of a step, before that step's checkpoint."""

    at_step: Integer = bounded(description="The step (0 to training.steps - 1) whose end the failure interrupts.",
                               within=Range(0, 1e6))
    wafer: Integer = bounded(description="Index of the failing wafer, 0 to hardware.wafers - 1.",
                             within=Range(0, 1e6))
    kind: Literal["fail"] = Field("fail", description="What happens: 'fail' (the job restarts from its last "
                                  "checkpoint).")


class FaultsConfig(Frozen):
    """What differs between wafers and edges, and what goes wrong over a run; empty by default (a uniform
    cluster that never fails)."""

    stragglers: list[Straggler] = Field(default_factory=list, description="Wafers that compute slower.")
    links: list[LinkFault] = Field(default_factory=list, description="SwarmX edges at part of their bandwidth.")
    nodes: list[NodeFault] = Field(
        default_factory=list, description="SwarmX nodes down: the wafers below them are cut off (docs/faults.md).")
    shards: list[ShardFault] = Field(
        default_factory=list, description="MemoryX shards below their rates; the stream goes at the slowest's.")
    jitter: JitterConfig | None = Field(
        None, description="Per wafer, per step compute noise, seeded from the scenario's seed.")
    flash: FlashConfig | None = Field(None, description="Slow flash reads in MemoryX's prefetch, seeded.")
    failures: FailuresConfig | None = Field(
        None, description="Random failures, checkpoints and restarts: goodput and time to train (docs/faults.md).")
    events: list[FailureEvent] = Field(
        default_factory=list, description="Scripted failures in the simulated steps (need failures).")

    @property
    def any(self) -> bool:
        """Does the scenario give any fault at all?"""
        return bool(self.sets_wafers_apart or self.flash is not None or self.failures is not None or self.events
                    or self.shards)

    @property
    def sets_wafers_apart(self) -> bool:
        """Does a fault make one wafer or edge unlike the others (so the run must unfold)?"""
        return bool(self.stragglers or self.links or self.jitter is not None or self.nodes)

    def slowdowns(self) -> dict[int, float]:
        """Wafer -> factor on its compute time (several entries for one wafer multiply)."""
        out: dict[int, float] = {}
        for s in self.stragglers:
            out[s.wafer] = out.get(s.wafer, 1.0) * s.slowdown
        return out

    def bandwidth_factors(self) -> dict[str, float]:
        """Edge name -> factor on its bandwidth (several entries for one edge multiply)."""
        out: dict[str, float] = {}
        for f in self.links:
            out[f.edge] = out.get(f.edge, 1.0) * f.bandwidth_factor
        return out

    def shard_factors(self) -> dict[int, dict[str, float]]:
        """Shard -> rate -> factor (several entries for one shard multiply)."""
        out: dict[int, dict[str, float]] = {}
        for f in self.shards:
            mine = out.setdefault(f.shard, dict.fromkeys(SHARD_RATES, 1.0))
            for rate, x in f.factors().items():
                mine[rate] *= x
        return out

    def slowest_shard(self) -> dict[str, float]:
        """Rate -> the smallest factor over all shards (1 for a rate no fault lowers; a shard faster than the
        others does not make the stream faster, the others still hold their slices)."""
        return {rate: min([1.0, *(f[rate] for f in self.shard_factors().values())]) for rate in SHARD_RATES}

    def describe(self, apart_only: bool = False) -> str:
        """'wafer 3 1.5x slower, edge swarmx.l2.5 at 0.5x bandwidth'; with ``apart_only``, only the faults that
        set a wafer apart (why the run unfolds)."""
        parts = [f"wafer {w} {s:g}x slower" for w, s in sorted(self.slowdowns().items())]
        parts += [f"edge {e} at {f:g}x bandwidth" for e, f in sorted(self.bandwidth_factors().items())]
        parts += [f"node {n} {kind}" for n, kind in sorted({(f.node, f.kind) for f in self.nodes})]
        if self.jitter is not None:
            parts.append(f"compute jitter {self.jitter.distribution} sigma {self.jitter.sigma:g}")
        if apart_only:
            return ", ".join(parts)
        if self.flash is not None:
            parts.append(f"{self.flash.tail_probability:g} of flash reads {self.flash.tail_factor:g}x slower")
        for shard, factors in sorted(self.shard_factors().items()):
            rates = ", ".join(f"{rate} {x:g}x" for rate, x in factors.items() if x != 1.0) or "unchanged"
            parts.append(f"MemoryX shard {shard} at {rates}")
        if self.failures is not None and self.failures.mtbf_hours_per_wafer is not None:
            parts.append(f"wafer MTBF {self.failures.mtbf_hours_per_wafer:g} h")
        parts += [f"wafer {e.wafer} fails at step {e.at_step}" for e in self.events]
        return ", ".join(parts)

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler) -> dict:
        data = handler(self)
        return {k: v for k, v in data.items() if v}


def _failure_problems(faults: FaultsConfig, wafers: int, steps: int) -> list[FieldProblem]:
    """Scripted failures out of range or without a checkpoint policy; 'auto' without an MTBF; two run lengths."""
    problems = []
    f = faults.failures
    first_at: dict[int, int] = {}
    for i, e in enumerate(faults.events):
        if e.at_step in first_at:  # the first failure already stopped the job at that step's end
            problems.append(FieldProblem(f"faults.events.{i}.at_step", f"event {first_at[e.at_step]} already "
                                         f"fails the job at the end of step {e.at_step}; one failure per step"))
        first_at.setdefault(e.at_step, i)
        if e.wafer >= wafers:
            problems.append(FieldProblem(f"faults.events.{i}.wafer", f"wafer {e.wafer} is out of range: "
                                         f"hardware.wafers is {wafers} (wafers 0 to {wafers - 1})"))
        if e.at_step >= steps:
            problems.append(FieldProblem(f"faults.events.{i}.at_step", f"step {e.at_step} is out of range: "
                                         f"training.steps is {steps} (steps 0 to {steps - 1})"))
    if faults.events and f is None:
        problems.append(FieldProblem("faults.events", "scripted failures need faults.failures (restart_s and "
                                     "checkpoint_every_steps say what a failure costs)"))
    if f is not None and f.checkpoint_every_steps == "auto" and f.mtbf_hours_per_wafer is None:
        problems.append(FieldProblem("faults.failures.checkpoint_every_steps", "auto chooses the interval from "
                                     "the failure rate: set faults.failures.mtbf_hours_per_wafer, or a number"))
    if f is not None and f.train_steps is not None and f.train_tokens is not None:
        problems.append(FieldProblem("faults.failures.train_tokens", "give train_steps or train_tokens, not both"))
    return problems


def describe_edges(edges: list[str]) -> str:
    """Edge or node names compactly, one range per level: 'swarmx.l1.0-2, swarmx.l2.0-11' (nodes:
    'swarmx.l1.n0, swarmx.l2.n0-2')."""
    levels: dict[str, list[int]] = {}
    for e in edges:
        prefix = e.rstrip("0123456789")
        levels.setdefault(prefix, []).append(int(e[len(prefix):]))
    return ", ".join(f"{p}{c[0]}" if len(c) == 1 else f"{p}{c[0]}-{c[-1]}" for p, c in levels.items())


def cut_off_wafers(faults: FaultsConfig, swarmx: SwarmXConfig, wafers: int) -> list[int]:
    """The wafers below a node that is down, in order (unknown node names are left to :func:`node_problems`)."""
    known = set(swarmx.node_names(wafers))
    out: set[int] = set()
    for f in faults.nodes:
        if f.node in known:  # swarmx.l<level>.n<index>
            level, index = f.node.removeprefix("swarmx.l").split(".n")
            out.update(swarmx.wafers_below(int(level), int(index), wafers))
    return sorted(out)


def _node_problems(faults: FaultsConfig, swarmx: SwarmXConfig, wafers: int) -> list[FieldProblem]:
    """Unknown node names (with the closest one), the root, and nodes that leave no wafer to train."""
    problems = []
    names = swarmx.node_names(wafers)
    root = names[0]
    for i, f in enumerate(faults.nodes):
        if f.node == root:
            problems.append(FieldProblem(f"faults.nodes.{i}.node", f"{root} is the root: every wafer hangs under "
                                         "it, so no step can run (a cluster outage, not a fault wss simulates)"))
        elif f.node not in names:
            problems.append(FieldProblem(f"faults.nodes.{i}.node",
                                         f"unknown node {f.node!r}{did_you_mean(f.node, names)} "
                                         f"(the nodes of this tree: {describe_edges(names)})"))
    if not problems and faults.nodes and len(cut_off_wafers(faults, swarmx, wafers)) == wafers:
        problems.append(FieldProblem("faults.nodes", f"every one of the {wafers} wafers is below a node that is "
                                     "down: no step can run"))
    return problems


def _cut_off_event_problems(faults: FaultsConfig, swarmx: SwarmXConfig, wafers: int) -> list[FieldProblem]:
    """Scripted failures of wafers a node that is down cuts off: such a wafer is not in the job, so its
    failure stops nothing (docs/faults.md)."""
    cut = set(cut_off_wafers(faults, swarmx, wafers))
    return [FieldProblem(f"faults.events.{i}.wafer", f"wafer {e.wafer} is cut off by a SwarmX node that is down "
                         "(faults.nodes): it does not train, so its failure does not stop the job")
            for i, e in enumerate(faults.events) if e.wafer in cut]


def _shard_problems(faults: FaultsConfig, shards: int) -> list[FieldProblem]:
    """Shard indexes out of range, and shard faults that change nothing."""
    problems = []
    for i, f in enumerate(faults.shards):
        if f.shard >= shards:
            problems.append(FieldProblem(f"faults.shards.{i}.shard", f"shard {f.shard} is out of range: "
                                         f"hardware.memoryx.shards is {shards} (shards 0 to {shards - 1})"))
        if all(x == 1.0 for x in f.factors().values()):
            problems.append(FieldProblem(f"faults.shards.{i}", "changes nothing: give at least one of "
                                         + ", ".join(f"{rate}_factor" for rate in SHARD_RATES)))
    return problems


def fault_problems(faults: FaultsConfig, wafers: int, edges: list[str], fold_wafers: object,
                   steps: int = 1, shards: int = 1, swarmx: SwarmXConfig | None = None) -> list[FieldProblem]:
    """Wafer indexes out of range, unknown edges (with the closest name), faults on a folded run, and
    failure settings that do not fit together."""
    problems = []
    for i, s in enumerate(faults.stragglers):
        if s.wafer >= wafers:
            problems.append(FieldProblem(f"faults.stragglers.{i}.wafer",
                                         f"wafer {s.wafer} is out of range: hardware.wafers is {wafers} "
                                         f"(wafers 0 to {wafers - 1})"))
    known = set(edges)
    for i, f in enumerate(faults.links):
        if f.edge not in known:
            problems.append(FieldProblem(f"faults.links.{i}.edge",
                                         f"unknown edge {f.edge!r}{did_you_mean(f.edge, edges)} "
                                         f"(the edges of this tree: {describe_edges(edges)})"))
    problems += _failure_problems(faults, wafers, steps)
    problems += _shard_problems(faults, shards)
    if swarmx is not None:
        problems += _node_problems(faults, swarmx, wafers)
        problems += _cut_off_event_problems(faults, swarmx, wafers)
    if faults.sets_wafers_apart and fold_wafers is True:
        problems.append(FieldProblem("simulation.fold_wafers",
                                     "true cannot show faults (one wafer and one tree path stand for all): "
                                     "set it to auto or false"))
    return problems
