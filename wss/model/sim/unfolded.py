"""The unfolded cluster: every wafer its own process, every SwarmX edge its own link.

:mod:`wss.model.sim.cluster` folds identical wafers and tree paths into one chain,
exact when the cluster is uniform.  Here the same parts are built, but each
wafer (with its own input workers and, with activation offload, its own
activation store) is a separate SimPy process on its own shard, and the tree
is a :class:`~wss.model.components.swarmx_tree.SwarmXTree` of real nodes::

    MemoryX.stream -> root broadcast -> ... -> leaf edge w -> wafer w  (for every wafer w)
    MemoryX.receive <- memoryx.net.in <- root reduction <- ... <- leaf edge w <- wafer w

MemoryX and the optimizer stay folded over the shards (one stream at their
aggregate rate into the root), as in the folded cluster.

A wafer's shard is cut into as many micro-batches as the busiest wafer's
(:attr:`Plan.micro_batches`), as evenly as it goes, so every wafer runs the same
passes in lock-step; a smaller shard makes smaller micro-batches, and the
wafer waits for the others.  Faults (``faults:``) slow one wafer's compute or
one edge's bandwidth.

Wafers that are provably identical (the same shard, slowdown and jitter draws,
under identical subtrees: :func:`~wss.model.components.swarmx_tree.stand_ins`)
have identical timelines, so with ``simulation.wafer_classes`` (the default)
only one per class is simulated and each tree node counts it for all its
members; every wafer still gets its own record, copied from its class's.

One wafer stands for the rest in the Result's breakdown
and records: the busiest (the first with the most work: its shard times its
slowdown); the others are summarised per wafer
(:class:`~wss.model.result.results.WaferRecord`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections import Counter
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field
from typing import Any

import simpy

from wss.model.components.part import counters_of
from wss.model.components.swarmx_tree import LinkGroup, SwarmXTree
from wss.model.components.wafer import KernelWork, Wafer, WaferSettings
from wss.model.folding.drift import drift_world, drifting_wafers, less_work
from wss.model.folding.fold import Fold, analyse, seconds_by_cause
from wss.model.folding.layer_fold import (
    LayerFold,
    LayerFoldMismatch,
    LayersFold,
    WaferCopies,
    unfold_jobs,
    unfold_snapshots,
    unfold_wafer,
    wafer_copies,
)
from wss.model.kernels.cycles import KernelCycles
from wss.model.machine.jitter import compute_factors, jitter_rng
from wss.model.machine.release_rates import release_wafer
from wss.model.plan import FOLDED_PREFIX, Plan
from wss.model.plan.kernels import cycles_by_tokens, wafer_op_seconds
from wss.model.plan.micro_batching import split_under
from wss.model.program import Pass, updated_kernels
from wss.model.scenario.fold_rules import stand_ins
from wss.model.scenario.shards import reachable_wafers
from wss.model.sim.cluster import (
    Cluster,
    WaferSlot,
    assemble,
    build_backbone,
    check_layer_crossings,
    drain,
    input_settings,
    start_parts,
    swarmx_settings,
    wafer_settings,
    wire,
)

__all__ = ["UnfoldedCluster", "build_unfolded", "run_unfolded", "wafer_micro_batches", "representative_wafer",
           "wafer_kinds"]


@dataclass
class UnfoldedCluster(Cluster[SwarmXTree]):
    """The wired parts of an unfolded run; ``wafer``, ``inputs`` and ``activations`` are the representative
    wafer's, ``swarmx`` is the tree (its levels viewed as link classes).

    ``wafers`` has one entry per wafer: while the run lasts, a wafer stood for by another is that one's
    object; after it, a copy under its own name (:meth:`name_members`).  ``wafer_parts`` are the simulated
    wafers' only.
    """

    wafers: list[Wafer] = field(default_factory=list)
    #: Each wafer's stand-in: the wafer simulated in its place (itself when it is simulated).
    stand_in: list[int] = field(default_factory=list)
    #: At the start of the run and as each step's last update ends: every part's busy seconds so far (each
    #: wafer's compute, then each tree link's transfers; :meth:`busy_parts` names them).
    step_busy: list[list[float]] = field(default_factory=list)

    def busy_parts(self) -> list[str]:
        """What each entry of :attr:`step_busy` measures: ``wafer.<w>``, then every tree link."""
        return [f"wafer.{w}" for w in range(len(self.wafers))] + self.tree.link_names()

    @property
    def reachable(self) -> int:
        """Wafers that train (not cut off by a SwarmX node that is down)."""
        return sum(1 for s in self.stand_in if s >= 0)

    def name_members(self) -> None:
        """After the run: every wafer and edge stood for by another becomes a copy of its stand-in under its
        own name (the same timeline, counters and spans), for per-wafer records, traces and figures."""
        for w, s in enumerate(self.stand_in):
            if s not in (w, -1):
                self.wafers[w] = copy.copy(self.wafers[s])
                self.wafers[w].name = f"wafer.{w}"
        self.tree.name_members()

    def mark_busy(self) -> None:
        """Append every part's busy seconds so far to :attr:`step_busy`."""
        self.step_busy.append([w.compute_s for w in self.wafers] + [link.busy_s for link in self.tree.links()])

    @property
    def tree(self) -> SwarmXTree:
        """The tree of real nodes (``swarmx``, typed as this build's)."""
        return self.swarmx

    def groups(self) -> list[LinkGroup]:
        """The level views (and the offload returns' view): what a Result reports per link class."""
        extra = [self.offload_in] if isinstance(self.offload_in, LinkGroup) else []
        return [*self.tree.down, *self.tree.up, *extra]  # type: ignore[list-item]

    def counters(self) -> dict[str, float]:
        """Every simulated part's counters (each simulated wafer's compute as ``wafer.<w>.compute``: a wafer
        stood for by another counts as its stand-in, so it has none of its own); the representative wafer's under
        the folded cluster's names (``wafer.compute``, ``inputs``); each level's (and the offload returns') as its
        busiest edge's.  Its cost grows with the simulated parts, not with the wafers: folding counts the cluster
        at every snapshot."""
        c = counters_of(self.parts())
        c["wafer.compute"] = self.wafer.compute_s
        c["inputs"], c["inputs.bytes"] = self.inputs.busy_s, self.inputs.bytes
        c.update(counters_of(self.groups()))
        return c

    def total(self, counter: str) -> float:
        """A counter's final value on the unfolded time axis; a level's (or the offload returns') its busiest
        member's, each member's unfolded first (:meth:`_viewed`)."""
        members = self._viewed().get(counter)
        if members is None:
            return super().total(counter)
        c = self.counters()
        return max(self.folding.unfolded(m, c[m]) for m in members if m in c)

    def totals(self) -> dict[str, float]:
        out = super().totals()
        for view, members in self._viewed().items():
            out[view] = max(out[m] for m in members if m in out)
        return out

    def _viewed(self) -> dict[str, list[str]]:
        """Each level view's counter -> the same counter of each of its simulated members.

        A view's figure is its busiest member's, a maximum, which the folds' copies do not add to as they add to
        a counter: the member that leads while the copied blocks run need not be the one that ends busiest.  In
        an uneven slot whose forward passes run every block, a wafer with fewer samples is ahead by then and
        leads the offload returns through the copied backward passes, while a wafer with more ends with more
        bytes (Cerebras-GPT 13B on 17 wafers: 601.8 GB of ``activations->wafer`` instead of 613.2 GB).  So each
        member is unfolded on its own, and the maximum taken after (over the members simulated: those with
        counters)."""
        return {group.name + suffix: [m.name + suffix for m in group.members]
                for group in self.groups() for suffix in ("", ".bytes")}

    def wait_context(self) -> tuple[dict[int, str], str]:
        """The folded cluster's names, each wafer's and its input workers' naming the wafer."""
        names, where = super().wait_context()
        for wafer, inputs in ((w.wafer, w.inputs) for w in self.wafer_parts):
            names[id(wafer.intake)] = f"the intake of {wafer.name}"
            names[id(wafer.act_intake)] = f"the intake of offloaded activations of {wafer.name}"
            for (step, mb), ev in wafer.forward_done.items():
                names[id(ev)] = f"the forward pass of step {step}, micro-batch {mb} on {wafer.name}"
            for (step, mb), ev in inputs.ready.items():
                names[id(ev)] = f"the input data of step {step}, micro-batch {mb} for {wafer.name}"
            for (step, mb), ev in inputs.mb_started.items():
                names[id(ev)] = f"{wafer.name} to start step {step}, micro-batch {mb}"
        return names, where

    def copy_breakdown(self, wafer: int, step: int) -> dict[str, float]:
        """A wafer's seconds by cause in one folded copy of ``step``'s repeated micro-batch."""
        fold, marks = self.folding.fold, self.folding.marks
        assert fold is not None
        a = marks[(step, fold.copied_micro_batch)][wafer]
        b = marks[(step, fold.last_micro_batch)][wafer]
        return seconds_by_cause(self.wafers[wafer].timeline[a:b])


def representative_wafer(plan: Plan) -> int:
    """The wafer standing for the rest in the Result: the first with the most work (its shard times its
    straggler slowdown), and among those the one whose tree path has the slowest degraded edge."""
    s = plan.scenario
    slow, factor = s.faults.slowdowns(), s.faults.bandwidth_factors()
    depth, fan_out = plan.tree_levels, s.hardware.swarmx.fan_out

    def path_factor(w: int) -> float:
        return min(factor.get(f"swarmx.l{level}.{w // fan_out ** (depth - level)}", 1.0)
                   for level in range(1, depth + 1))

    keys = [(samples * slow.get(w, 1.0), -path_factor(w)) for w, samples in enumerate(plan.wafer_samples)]
    return keys.index(max(keys))


def _slowed(settings: WaferSettings, slowdown: float) -> WaferSettings:
    """A straggler's settings: every cycle and every on-wafer op takes ``slowdown`` times as long."""
    if slowdown == 1.0:
        return settings
    return dataclasses.replace(settings, clock_Hz=settings.clock_Hz / slowdown,
                              op_seconds={k: (f * slowdown, b * slowdown) for k, (f, b) in settings.op_seconds.items()})


def _jitter(plan: Plan) -> list[tuple[float, ...]]:
    """Each wafer's factors on its compute, step by step (``faults.jitter``; none: empty)."""
    s = plan.scenario
    wafers, steps = s.hardware.wafers, s.training.steps
    if s.faults.jitter is None:
        return [()] * wafers
    drawn = compute_factors(s.faults.jitter, jitter_rng(s.seed), wafers, steps)
    return [tuple(float(x) for x in row) for row in drawn]


def wafer_kinds(plan: Plan, classes: bool = True) -> list[Hashable | None]:
    """What sets each wafer apart from the others: its micro-batch sizes, its slowdown and its jitter draws
    (without ``classes``, the wafer itself); ``None`` for a wafer cut off by a node that is down.

    Wafers of one kind, under identical subtrees of the tree, have identical timelines (the rest of a
    wafer's inputs, its settings and its program, follow from these).  Failures are not part of it:
    they cost time between steps and change no step.
    """
    slowdowns = plan.scenario.faults.slowdowns()
    reachable = set(reachable_wafers(plan.scenario))
    kinds = [(tuple(mbs), slowdowns.get(w, 1.0), factors) if classes else w
             for w, (mbs, factors) in enumerate(zip(wafer_micro_batches(plan), _jitter(plan)))]
    return [k if w in reachable else None for w, k in enumerate(kinds)]


def wafer_micro_batches(plan: Plan) -> list[list[int]]:
    """Each wafer's micro-batch sizes: its shard cut into the busiest wafer's number of micro-batches, lined
    up under the busiest wafer's (:func:`~wss.model.plan.micro_batching.split_under`), which then paces the
    lock-step cluster as it does folded."""
    busiest = max(plan.wafer_samples)
    return [list(plan.micro_batches) if s == busiest else split_under(s, plan.micro_batches)
            for s in plan.wafer_samples]


def _all_token_counts(plan: Plan, sizes: list[list[int]]) -> WaferSettings:
    """The wafer's settings with cycles and op seconds for every wafer's micro-batch sizes."""
    base = wafer_settings(plan)
    have = {m * plan.tokens_per_sample for m in plan.micro_batches}
    missing = sorted({m * plan.tokens_per_sample for mbs in sizes for m in mbs} - have)
    if not missing:
        return base
    wafer = release_wafer(plan.scenario.hardware)
    nonzero = [t for t in missing if t > 0]
    extra = cycles_by_tokens([k.kernel for k in plan.kernels], [k.profile for k in plan.kernels], nonzero, wafer)
    idle = {0: KernelCycles(0.0, 0.0, 0, 0, 0)} if 0 in missing else {}  # an empty micro-batch computes nothing
    kernels = tuple(KernelWork(k.n_chunks, k.grad_bytes, {**k.cycles, **more, **idle})
                    for k, more in zip(base.kernels, extra))
    op_seconds = {**base.op_seconds, **wafer_op_seconds(wafer, plan.ops, missing)}
    return dataclasses.replace(base, kernels=kernels, op_seconds=op_seconds)


def _programs(plan: Plan, program: list[Pass], sizes: list[list[int]]) -> dict[tuple[int, ...], list[Pass]]:
    """The program of each distinct micro-batch split: the same passes, each with its micro-batch's tokens."""
    out = {tuple(plan.micro_batches): program}
    for mbs in sizes:
        if tuple(mbs) not in out:
            out[tuple(mbs)] = [dataclasses.replace(p, tokens=mbs[p.micro_batch] * plan.tokens_per_sample)
                               for p in program]
    return out


def build_unfolded(plan: Plan, record: bool = False,
                   progress: Callable[[float], None] | None = None) -> UnfoldedCluster:
    """Build every part, one wafer and one set of input workers per simulated wafer under the tree of real nodes,
    by the folded cluster's build path (:func:`~wss.model.sim.cluster.wire`); nothing runs yet."""
    bb = build_backbone(plan)
    hw, faults = plan.scenario.hardware, plan.scenario.faults
    rep = representative_wafer(plan)
    kinds = wafer_kinds(plan, plan.scenario.simulation.wafer_classes)
    sizes = wafer_micro_batches(plan)
    classes = stand_ins(hw.swarmx.nodes_per_level(hw.wafers), hw.wafers, hw.swarmx.fan_out, kinds,
                        faults.bandwidth_factors(), swarmx_settings(plan).name, _beside_the_busiest(plan, sizes, rep))
    tree = SwarmXTree(bb.env, swarmx_settings(plan), hw.swarmx.fan_out, hw.wafers, rep, faults.bandwidth_factors(),
                      classes)
    stand_in = tree.stand_in[-1]
    programs = _programs(plan, bb.program, sizes)
    base = _all_token_counts(plan, sizes)
    slots = _wafer_slots(plan, stand_in, sizes, programs, base)
    own = wire(bb, plan, tree, slots)
    simulated = {slot.leaf: parts for slot, parts in zip(slots, own)}
    # A wafer stood for by an identical one is that one; one cut off never runs (its record and trace track stay
    # empty).
    wafers = [simulated[s].wafer if s >= 0 else Wafer(bb.env, dataclasses.replace(base, name=f"wafer.{w}"), [], {}, {})
              for w, s in enumerate(stand_in)]
    wafers[rep].progress = progress
    mine = simulated[rep]
    returns = [w.back for w in own if w.back is not None]
    offload_in = LinkGroup("wafer.offload.in", returns, mine.back) if mine.back is not None else None
    return assemble(UnfoldedCluster, bb, plan, programs[tuple(sizes[rep])], tree, mine, offload_in, own, record,
                    wafers=wafers, stand_in=list(stand_in))


def _beside_the_busiest(plan: Plan, sizes: list[list[int]], rep: int) -> list[int]:
    """The wafers that never hold up the busiest (:func:`~wss.model.folding.drift.less_work`), where the nodes above
    the busiest may stand for each other whatever of these hang beside them (``stand_ins``' ``drifting``): wafer
    classes on, and every wafer's block inputs on a store of its own (limited or not: a wafer with less work has fewer
    block inputs to move through its own store; a shared store would let their traffic slow the busiest's)."""
    s = plan.scenario
    if not s.simulation.wafer_classes or not s.hardware.activation_store.is_per_wafer:
        return []
    return less_work(plan, sizes, rep, reachable_wafers(s))[0]


def _wafer_slots(plan: Plan, stand_in: list[int], sizes: list[list[int]], programs: dict[tuple[int, ...], list[Pass]],
                 base: WaferSettings) -> list[WaferSlot]:
    """The wafers simulated (those standing for themselves), in wafer order: each with its micro-batches' program
    and inputs, its jitter and slowdown, and on MemoryX's ports the wafers it stands for."""
    slowdowns = plan.scenario.faults.slowdowns()
    members = Counter(stand_in)
    factors = _jitter(plan)
    inputs = input_settings(plan)
    return [WaferSlot(w, _slowed(dataclasses.replace(base, compute_factors=factors[w]), slowdowns.get(w, 1.0)),
                      dataclasses.replace(inputs, micro_batch_samples=tuple(mbs)), programs[tuple(mbs)], f".{w}",
                      members[w])
            for w, (s, mbs) in enumerate(zip(stand_in, sizes)) if s == w]


def _own_compute(cluster: UnfoldedCluster, fold: LayerFold) -> LayerFold:
    """A fold point's deltas with each wafer's compute measured over its own copied block (from its own marks,
    not the representative's moments): identical wafers then grow by identical amounts, to the bit."""
    b, c = fold.point.b, fold.point.c
    marks = cluster.folding.wafer_marks
    own = {f"wafer.{w}.compute": marks[wafer.name][c][2] - marks[wafer.name][b][2]
           for w, wafer in enumerate(cluster.wafers) if wafer.name in marks}
    return dataclasses.replace(fold, deltas={**fold.deltas, **own})


def _unfold_layers(cluster: UnfoldedCluster) -> None:
    """After a layer-folded run, before its members are named: every simulated wafer's timeline, passes and
    loss times, the optimizer's jobs, the snapshots, each wafer's micro-batch marks and the parts' busy
    seconds at each step's end, all on the axis with the folded blocks in place.  A drifting wafer's copies are
    its own blocks (:mod:`wss.model.folding.drift`: checked first that each ended its block behind each delay), and
    the drifting worlds' links grow by what they moved for the copied block's passes."""
    folding = cluster.folding
    drift = folding.drift
    folds = [_own_compute(cluster, f) for f in folding.layer_folds]
    if drift is not None:
        drift.check_after(folding.wafer_marks)
        folds = [dataclasses.replace(f, deltas={**f.deltas, **drift.link_deltas(f)}) for f in folds]
    layers = LayersFold(tuple(folds))
    folding.layers = layers
    check_layer_crossings(cluster, layers)
    own: dict[int, tuple[LayersFold, WaferCopies]] = {}
    for w in cluster.simulated:
        if w is cluster.wafer:
            own[id(w)] = (layers, [(f.at, f.spans) for f in layers.folds])
            continue
        marks = folding.wafer_marks[w.name]
        wafer_folds, copies = [], []
        for f in layers.folds:
            if drift is not None and (w.name, f.point.c) in drift.periods:
                f = drift.wafer_fold(w, f, marks)
                copies.append((f.at, f.spans))
            else:
                copies.extend(wafer_copies(w.timeline, {i: m[:2] for i, m in marks.items()}, LayersFold((f,)), w.name))
            wafer_folds.append(f)
        own[id(w)] = (LayersFold(tuple(wafer_folds)), copies)
        if drift is not None and id(w) in drift.members:
            drift.world_layers.setdefault(drift.members[id(w)], own[id(w)][0])
    for w in cluster.simulated:
        shifted = own[id(w)][0]
        if any(cause == "input" and shifted.shift(p) > 0 for _, _, cause, p in w.timeline):
            raise LayerFoldMismatch(f"{w.name} waited for input data after folded blocks", "")
    new_index = {id(w): unfold_wafer(w, w.program, *own[id(w)]) for w in cluster.simulated}
    unfold_jobs(cluster.optimizer.jobs, cluster.program, layers)
    unfold_snapshots(folding.snapshots, cluster.program, layers, new_index[id(cluster.wafer)])
    for key, lengths in folding.marks.items():
        folding.marks[key] = [new_index[id(w)][n] if id(w) in new_index else n
                              for w, n in zip(cluster.wafers, lengths)]
    names = [f"wafer.{w}.compute" for w in range(len(cluster.wafers))] + [link.name for link in cluster.tree.links()]
    for k, busy in enumerate(cluster.step_busy):
        before = [f for f in layers.folds if f.point.step < k]
        cluster.step_busy[k] = [b + sum(f.copies * f.deltas.get(name, 0.0) for f in before)
                                for b, name in zip(busy, names)]


def _mark_steps(cluster: UnfoldedCluster) -> Generator[simpy.Event, Any, None]:
    """Process: mark every part's busy seconds as each step's last update ends (where measure ends the step)."""
    plan, optimizer = cluster.plan, cluster.optimizer
    updated = updated_kernels(cluster.program)
    cluster.mark_busy()
    for step in range(plan.scenario.training.steps):
        yield cluster.env.all_of([optimizer.done_event(k.index, step) for k in plan.kernels
                                  if k.owns_state and k.index in updated])
        cluster.mark_busy()


def run_unfolded(plan: Plan, record: bool = False,
                 progress: Callable[[float], None] | None = None) -> UnfoldedCluster:
    """Simulate every step with every wafer apart; return the parts with their measurements."""
    cluster = build_unfolded(plan, record, progress)
    env = cluster.env
    apart, slots = drifting_wafers(cluster, wafer_micro_batches(plan))
    drift = drift_world(cluster, apart, slots, record) if apart else None
    cluster.folding.attach(cluster, cluster.wafers, cluster.simulated, drift)
    wafers = len(cluster.simulated)
    parts = cluster.parts()
    processes = start_parts(env, parts[:-wafers])
    env.process(_mark_steps(cluster))  # before the wafers start, as each step's end is marked
    processes.update(start_parts(env, parts[-wafers:]))
    done = [processes[w.name] for w in cluster.simulated]
    drain(cluster, env.all_of(done), processes, plan.scenario.training.steps)
    if cluster.folding.layer_points:  # none when every simulated micro-batch runs all its blocks (uneven slots)
        _unfold_layers(cluster)
    # The counters each entry of step_busy grows by: the simulated parts' (before name_members renames the members).
    counted = [f"wafer.{s}.compute" for s in cluster.stand_in] + [link.name for link in cluster.tree.links()]
    for group in cluster.groups():
        group.sync()
    cluster.name_members()
    if plan.fold_copies:
        after_copies = plan.simulated_micro_batches[FOLDED_PREFIX]
        cluster.folding.fold = analyse(cluster.folding.snapshots, cluster.wafer.timeline,
                                       plan.scenario.training.steps, after_copies, plan.fold_copies)
        _busy_with_copies(cluster, cluster.folding.fold, counted)
    return cluster


def _busy_with_copies(cluster: UnfoldedCluster, fold: Fold, names: list[str]) -> None:
    """Every part's busy seconds at each step's end with the folded micro-batches of that step and the ones before
    in place: each entry grows by the copies' deltas of the counter ``names`` gives it (a wafer or an edge stood for
    by another grows as its stand-in)."""
    for k in range(1, len(cluster.step_busy)):
        done = fold.steps[:k]  # mark k is taken as step k - 1's last update ends
        cluster.step_busy[k] = [b + sum(fold.copies * f.deltas.get(name, 0.0) for f in done)
                                for b, name in zip(cluster.step_busy[k], names)]
