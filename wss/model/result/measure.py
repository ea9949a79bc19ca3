"""Turn a finished :class:`~wss.model.sim.cluster.Cluster` into a :class:`~wss.model.result.results.Result`."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from wss.model.components.part import Reading, carried_of, utilisation_of
from wss.model.components.wafer import Wafer
from wss.model.folding.fold import Fold
from wss.model.folding.step_fold import COPIED_STEP, Unfolding
from wss.model.plan import Plan
from wss.model.program import gradient_passes
from wss.model.result.energy import energy_summary
from wss.model.result.goodput import failure_summary
from wss.model.result.results import (
    BREAKDOWN_CATEGORIES,
    RECORD_SECONDS,
    FlopsSummary,
    KernelRecord,
    LayerFoldRecord,
    LinkBytes,
    MemoryFootprint,
    NumericsSummary,
    Result,
    StepPacer,
    StepRecord,
    WaferFolding,
    WaferRecord,
    bound_category,
    paced_by,
    pass_pacing,
)
from wss.model.scenario import Scenario
from wss.model.scenario.fold_rules import fold_decision
from wss.model.sim.cluster import Cluster
from wss.model.sim.unfolded import UnfoldedCluster, wafer_micro_batches
from wss.model.workload import StreamedKernel, WaferOp

#: Seconds to add to a time recorded in (step, micro-batch) to put it on the unfolded axis (``Unfolding.shift``).
Shift = Callable[[int, int], float]

__all__ = ["measure"]


def wafer_folding(s: Scenario) -> WaferFolding:
    """The Result's record of whether one wafer stood for all, and why (:func:`fold_decision`)."""
    folded, reason = fold_decision(s)
    return WaferFolding(folded=folded, reason=reason)


def measure(cluster: Cluster, version: str, numerics: NumericsSummary | None = None) -> Result:
    """The Result of a finished run: step times, where the time went, utilisation, traffic and records.

    Times are on the unfolded axis: a folded run's repeated micro-batches and
    steps are added back from the folds' measured periods (see
    :mod:`wss.model.folding.fold` and :mod:`wss.model.folding.step_fold`).
    """
    plan = cluster.plan
    s = plan.scenario
    n_steps = s.training.steps
    unfold = cluster.folding.unfolding()
    shift = unfold.shift

    windows = _step_windows(cluster, unfold)
    timeline = _timeline_with_tail(cluster, windows.simulated_ends[-1])
    simulated = _breakdowns(timeline, windows.simulated_ends, cluster.folding.fold, plan.simulated_steps)
    breakdowns = [dict(b) for b in unfold.real_steps(simulated)]
    step_time = windows.total_s / n_steps
    samples = s.training.global_batch
    tokens = samples * plan.tokens_per_sample
    tail = [(a, b, c) for a, b, c, p in timeline if p == -1]
    records, pass_paces = _records(cluster, shift, tail)
    pacing = _pacing(records, pass_paces, n_steps, tail)
    utilisation = _utilisation(cluster, windows.total_s)
    facts = _cluster_facts(cluster)
    step_records = _step_records(cluster, windows, breakdowns, unfold, numerics)
    return Result(
        wss_version=version,
        scenario=s,
        step_time_s=step_time,
        total_time_s=windows.total_s,
        samples_per_s=samples / step_time,
        tokens_per_s=tokens / step_time,
        steps=step_records,
        flops=_flops(cluster, tokens, step_time),
        breakdown_s={c: sum(b[c] for b in breakdowns) / n_steps for c in BREAKDOWN_CATEGORIES},
        pacing_s=pacing,
        bound_by=bound_category(pacing),
        utilisation=utilisation,
        link_bytes=_link_bytes(cluster, windows.total_s),
        weight_crossings_per_micro_batch=_crossings(cluster),
        phase_s=_phase_seconds(records, n_steps),
        memory=_memory(plan),
        cluster=facts,
        numerics=numerics,
        sim_events=cluster.events,
        records=records,
        plan_choice=plan.choice,
        energy=energy_summary(s, utilisation, _wafer_busy(cluster, windows.total_s), step_time, samples, tokens,
                              [part.power_draw(utilisation) for part in cluster.powered()]),
        wafer_folding=wafer_folding(s),
        wafers=_per_wafer(cluster, windows, step_time) if isinstance(cluster, UnfoldedCluster) else None,
        step_pacers=_step_pacers(cluster) if isinstance(cluster, UnfoldedCluster) else None,
        layer_folds=_layer_folds(plan) if cluster.folding.layers is not None else None,
        failures=failure_summary(plan, step_time, step_records),
    )


def _layer_folds(plan: Plan) -> list[LayerFoldRecord]:
    """Each folded run of identical blocks, per direction, and the simulated block standing for it: in the
    forward passes the block before the copies, in the backward passes the block after them (the order they
    run in), as :mod:`wss.model.folding.layer_fold` repeats them."""
    layer_of = {op.block: op.layer for op in plan.ops if op.block is not None}
    out = []
    for direction in plan.layer_directions:
        for run in plan.layer_runs:
            dropped = list(run.dropped_in(direction))
            standing = dropped[0] - 1 if direction == "forward" else dropped[-1] + 1
            out.append(LayerFoldRecord(direction=direction, layer=layer_of[standing],
                                       stands_for=[layer_of[b] for b in sorted({standing, *dropped})]))
    return out


def _step_pacers(cluster: UnfoldedCluster) -> list[StepPacer]:
    """Each step's busiest part between the end of the step before (its last update) and its own (ties:
    the first wafer, then the first link root first)."""
    names, marks = cluster.busy_parts(), cluster.step_busy
    out = []
    for step, (before, after) in enumerate(zip(marks, marks[1:])):
        busy = [b - a for a, b in zip(before, after)]
        best = busy.index(max(busy))
        out.append(StepPacer(step=step, part=names[best], busy_s=busy[best]))
    return out


@dataclass(frozen=True)
class _StepWindows:
    """Where each step ends: on the simulated axis and on the unfolded one.

    A step ends when the optimizer finishes its last update of that step.
    """

    simulated_ends: list[float]
    starts: list[float]
    ends: list[float]

    @property
    def total_s(self) -> float:
        return self.ends[-1]


def _step_windows(cluster: Cluster, unfold: Unfolding) -> _StepWindows:
    """Each step's end; a folded step's copies end one period after another, after step 3."""
    opt = cluster.optimizer
    last_mb = len(cluster.plan.micro_batches) - 1
    ends_sim = [
        max(j.end for j in opt.jobs if j.kind == "update" and j.step == step)
        for step in range(cluster.plan.simulated_steps)
    ]
    ends = [e + unfold.shift(step, last_mb) for step, e in enumerate(ends_sim)]
    if unfold.steps is not None:
        k, period = COPIED_STEP, unfold.steps.period
        ends = [*ends[: k + 1], *(ends[k] + i * period for i in range(1, unfold.steps.copies + 1)), *ends[k + 1 :]]
    return _StepWindows(ends_sim, [0.0, *ends[:-1]], ends)


def _timeline_with_tail(cluster: Cluster, total_sim: float, wafer: Wafer | None = None
                        ) -> list[tuple[float, float, str, int]]:
    """The wafer's timeline (the representative's unless ``wafer``), plus the run's tail after the wafer's
    last pass (pass index -1).

    The tail is the last update's wait: first its time queued behind other
    optimizer jobs, then the rest of it (the bubble).
    """
    timeline = list((wafer or cluster.wafer).timeline)
    last_wafer = timeline[-1][1] if timeline else 0.0
    if total_sim > last_wafer:
        last_job = _last_update(cluster)
        q = min(max(last_job.queued_s, 0.0), total_sim - last_wafer)
        timeline.append((last_wafer, last_wafer + q, "optimizer", -1))
        timeline.append((last_wafer + q, total_sim, "bubble", -1))
    return timeline


def _last_update(cluster: Cluster) -> Any:
    """The optimizer job that ends the run: the last step's last update."""
    last_step = cluster.plan.simulated_steps - 1
    return max((j for j in cluster.optimizer.jobs if j.kind == "update" and j.step == last_step), key=lambda j: j.end)


def _breakdowns(timeline: list[tuple[float, float, str, int]], ends_sim: list[float], fold: Fold | None,
                n_steps: int, copy: Callable[[int], dict[str, float]] | None = None) -> list[dict[str, float]]:
    """Split each step's window (simulated axis) by the timeline's causes; add the folded copies.

    ``copy(step)`` is one copy's seconds by cause (default: the fold's, measured on the representative wafer).
    """
    breakdowns = [dict.fromkeys(BREAKDOWN_CATEGORIES, 0.0) for _ in range(n_steps)]
    w = 0
    end, row = (ends_sim[0], breakdowns[0]) if n_steps else (-math.inf, {})
    for a, b, cause, _ in timeline:
        if a < end and b <= end:  # inside the current step's window (most spans): the loop below, in short
            if b > a:
                row[cause] += b - a
            continue
        while w < n_steps and a >= ends_sim[w]:
            w += 1
        end, row = (ends_sim[w], breakdowns[w]) if w < n_steps else (-math.inf, row)
        k = w
        while a < b and k < n_steps:
            cut = min(b, ends_sim[k])
            if cut > a:
                breakdowns[k][cause] += cut - a
            a = cut
            k += 1
    if fold is not None:  # the repeated micro-batches of each step
        for k, step_fold in enumerate(fold.steps):
            for cause, v in (copy(k) if copy is not None else step_fold.breakdown).items():
                breakdowns[k][cause] += fold.copies * v
    return breakdowns


def _per_wafer(cluster: UnfoldedCluster, windows: _StepWindows, step_time: float) -> list[WaferRecord]:
    """One record per wafer of an unfolded run: its shard and its mean seconds per step by cause (measured
    once per simulated wafer, and copied to the wafers it stood for)."""
    plan, fold = cluster.plan, cluster.folding.fold
    n_steps = plan.scenario.training.steps
    totals = cluster.totals()
    measured: dict[int, tuple[dict[str, float], float]] = {}
    out = []
    for w, mbs in enumerate(wafer_micro_batches(plan)):
        s = cluster.stand_in[w]
        if s == -1:  # cut off by a SwarmX node that is down: no samples, no work, idle all along
            out.append(WaferRecord(wafer=w, samples=0, micro_batches=[], breakdown_s=dict.fromkeys(
                BREAKDOWN_CATEGORIES, 0.0), compute_s=0.0, idle_s=step_time))
            continue
        if s not in measured:
            timeline = _timeline_with_tail(cluster, windows.simulated_ends[-1], cluster.wafers[s])
            copy = (lambda k, s=s: cluster.copy_breakdown(s, k)) if fold is not None else None
            steps = _breakdowns(timeline, windows.simulated_ends, fold, n_steps, copy)
            mean = {c: sum(b[c] for b in steps) / n_steps for c in BREAKDOWN_CATEGORIES}
            measured[s] = mean, totals[f"wafer.{s}.compute"] / n_steps
        mean, compute = measured[s]
        out.append(WaferRecord(wafer=w, samples=plan.wafer_samples[w], micro_batches=mbs, breakdown_s=dict(mean),
                               compute_s=compute, idle_s=step_time - compute))
    return out


def _step_records(cluster: Cluster, windows: _StepWindows, breakdowns: list[dict[str, float]],
                  unfold: Unfolding, numerics: NumericsSummary | None) -> list[StepRecord]:
    """One record per step; the loss reaches the user node after climbing the tree."""
    hw = cluster.plan.scenario.hardware
    latency_up = cluster.swarmx.levels * hw.swarmx.hop_latency_s
    steps = []
    for i in range(len(windows.ends)):
        sim, offset = unfold.copy_offset(i)
        loss_times = [t + unfold.shift(st, mb) for (st, mb), t in cluster.wafer.loss_times.items() if st == sim]
        if offset:
            loss_times = [t + offset for t in loss_times]
        steps.append(
            StepRecord(
                step=i,
                start_s=windows.starts[i],
                end_s=windows.ends[i],
                time_s=windows.ends[i] - windows.starts[i],
                breakdown_s=breakdowns[i],
                loss_at_user_s=(max(loss_times) + latency_up) if loss_times else None,
                loss=numerics.losses[i] if numerics and i < len(numerics.losses) else None,
                accuracy=numerics.accuracies[i] if numerics and i < len(numerics.accuracies) else None,
            )
        )
    return steps


def _reading(cluster: Cluster, total: float) -> Reading:
    """What the reported parts read: the cluster's counters on the unfolded axis, the run's length, the wafers
    that train."""
    wafers = cluster.reachable if isinstance(cluster, UnfoldedCluster) else cluster.plan.scenario.hardware.wafers
    return Reading(cluster.total, total, wafers)


def _utilisation(cluster: Cluster, total: float) -> dict[str, float]:
    """Busy fraction of the run of each part the cluster reports (:meth:`Cluster.reported`), by its own account:
    for a shared bandwidth such as MemoryX's DRAM, the fraction of its bandwidth used."""
    return utilisation_of(cluster.reported(), _reading(cluster, total))


def _wafer_busy(cluster: Cluster, total: float) -> list[float]:
    """Each wafer's fraction of the run spent computing: all alike in a folded run; in an unfolded one each
    its stand-in's, 0 for a wafer cut off by a SwarmX node that is down."""
    if not isinstance(cluster, UnfoldedCluster):
        return [cluster.total("wafer.compute") / total] * cluster.plan.scenario.hardware.wafers
    totals = cluster.totals()  # once: a total per wafer would count every part once per wafer
    return [totals[f"wafer.{s}.compute"] / total if s >= 0 else 0.0 for s in cluster.stand_in]


def _cluster_facts(cluster: Cluster) -> dict[str, Any]:
    """The shape of what was simulated: tree, shards, kernels, chunks, the micro-batches and steps simulated."""
    plan = cluster.plan
    facts = {
        "wafers": plan.scenario.hardware.wafers,
        "tree_levels": cluster.swarmx.levels,
        "nodes_per_level": list(cluster.swarmx.nodes_per_level),
        "samples_per_wafer_max": max(plan.wafer_samples),
        "samples_per_wafer_min": min(plan.wafer_samples),
        "kernels": len(plan.kernels),
        "params": plan.params,
        "nonzero_params": plan.nnz,
        "chunks_per_step": sum(k.n_chunks for k in plan.kernels),
        "micro_batches_simulated": len(plan.simulated_micro_batches),
    }
    if plan.step_fold_copies:  # only in a run whose steps are folded: results of other runs keep their bytes
        facts["steps_simulated"] = plan.simulated_steps
    if cluster.folding.layers is not None:  # likewise, only with layers folded
        blocks = len({op.block for op in plan.ops if op.block is not None})
        facts["blocks"] = blocks
        facts["blocks_simulated_forward"] = blocks - len(plan.dropped_in("forward"))
        facts["blocks_simulated_backward"] = blocks - len(plan.dropped_in("backward"))
    return facts


def _pacing(
    records: list[KernelRecord],
    pass_paces: list[dict[str, float]],
    steps: int,
    tail: list[tuple[float, float, str]],
) -> dict[str, float]:
    """Mean seconds per step by what paced it: each wafer pass's split, then the run's tail by its cause."""
    out = dict.fromkeys(BREAKDOWN_CATEGORIES, 0.0)
    for r, pace in zip(records, pass_paces):  # the wafer records come first, one per pass
        for c, v in pace.items():
            out[c] += r.repeats * v
    for a, b, cause in tail:
        out[cause] += b - a
    return {c: v / steps for c, v in out.items()}


def _phase_seconds(records: list[KernelRecord], steps: int) -> dict[str, float]:
    """Mean time per step in each phase; a folded run's copied micro-batch counts once per copy too."""
    out: dict[str, float] = {}
    for r in records:
        key = f"{r.where}.{r.phase}"
        out[key] = out.get(key, 0.0) + r.repeats * (r.end_s - r.start_s) / steps
    return dict(sorted(out.items()))


def _flops(cluster: Cluster, tokens: int, step_time: float) -> FlopsSummary:
    plan = cluster.plan
    hw = plan.scenario.hardware
    dense = executed = 0.0
    recompute_blocks = plan.checkpointing in ("blocks", "offload")
    nnz = {id(k.kernel): k.nnz for k in plan.kernels}
    for op in plan.ops:
        if isinstance(op, StreamedKernel):
            if op.kind == "embedding":
                continue
            d = op.dense_flops_per_token() * tokens  # the model's FLOPs: an expert's routed tokens only
            e = op.executed_flops(tokens, nnz[id(op)])
            dense += 3 * d
            executed += 3 * e + (e if recompute_blocks and op.block is not None else 0.0)
        else:
            assert isinstance(op, WaferOp)
            f = op.flops_per_token * tokens
            dense += f * (1 + op.backward_factor)
            executed += f * (1 + op.backward_factor) + (f if recompute_blocks and op.block is not None else 0.0)
    peak = hw.wafers * hw.wafer.peak_flops
    return FlopsSummary(
        dense_equivalent_per_step=dense,
        executed_per_step=executed,
        achieved_dense_equivalent_flops=dense / step_time,
        achieved_executed_flops=executed / step_time,
        peak_flops=peak,
        fraction_of_peak=executed / step_time / peak,
        dense_equivalent_fraction_of_peak=dense / step_time / peak,
    )


def _link_bytes(cluster: Cluster, total: float) -> dict[str, LinkBytes]:
    """Bytes per step on each class of link, as the parts that move them report (:meth:`Cluster.carriers`)."""
    steps = cluster.plan.scenario.training.steps
    return {name: LinkBytes(links=c.links, per_link_bytes=c.per_link_bytes / steps,
                            total_bytes=c.per_link_bytes * c.links / steps)
            for name, c in carried_of(cluster.carriers(), _reading(cluster, total)).items()}


def _crossings(cluster: Cluster) -> float:
    """Weight bytes into one wafer per step over one full streamed copy of the weights, per micro-batch."""
    plan = cluster.plan
    one_copy = sum(k.stream_bytes for k in plan.kernels)
    per_step = cluster.total(cluster.swarmx.down[-1].name + ".bytes") / plan.scenario.training.steps
    return per_step / one_copy / len(plan.micro_batches)


def _memory(plan: Plan) -> MemoryFootprint:
    s = plan.scenario
    mx = s.hardware.memoryx
    return MemoryFootprint(
        memoryx_state_bytes=plan.memoryx_state_bytes,
        memoryx_dram_bytes=plan.memoryx_dram_bytes,
        memoryx_flash_bytes=plan.memoryx_flash_bytes,
        memoryx_dram_capacity_bytes=mx.dram_total_bytes,
        memoryx_flash_capacity_bytes=mx.flash_total_bytes,
        memoryx_staging_bytes=plan.staging_bytes,
        memoryx_components=plan.memoryx_components,
        wafer_sram_activation_bytes=plan.sram_bytes_needed,
        wafer_sram_available_bytes=plan.sram_bytes_available,
        wafer_sram_total_bytes=float(s.hardware.wafer.sram_bytes),
        micro_batch=max(plan.micro_batches),
        micro_batches=len(plan.micro_batches),
        activation_checkpointing=plan.checkpointing,
    )


def _records(cluster: Cluster, shift: Shift, tail: list[tuple[float, float, str]]
             ) -> tuple[list[KernelRecord], list[dict[str, float]]]:
    """Kernel records (wafer passes, then MemoryX jobs) and each wafer pass's pacing split.

    Each wafer pass carries its seconds by cause, and each record the micro-batches it stands
    for.  The run's tail (the wafer's wait after its last pass, by cause) goes to the stall fields
    of the update that ends the run: no pass absorbs it, but the last step pays for it.
    """
    recs, paces = _wafer_records(cluster, shift)
    return recs + _memoryx_records(cluster, shift, tail), paces


def _wafer_records(cluster: Cluster, shift: Shift) -> tuple[list[KernelRecord], list[dict[str, float]]]:
    """One record per wafer pass, and its pacing split."""
    plan = cluster.plan
    unfold = cluster.folding.unfolding()
    recs: list[KernelRecord] = []
    paces: list[dict[str, float]] = []
    seconds = _pass_seconds(cluster.wafer.timeline, len(cluster.wafer.passes))
    for p, t in zip(cluster.program, cluster.wafer.passes):
        op = plan.ops[p.op]
        pace = pass_pacing(t.compute_s, t.stall_by)
        paces.append(pace)
        bound = paced_by(pace)
        recs.append(
            KernelRecord(
                step=unfold.step_of(p.step),
                micro_batch=p.micro_batch,
                name=op.name,
                layer=op.layer,
                phase=p.phase,
                where="wafer",
                start_s=t.start + shift(p.step, p.micro_batch),
                end_s=t.end + shift(p.step, p.micro_batch),
                bytes_in=t.bytes_in,
                bytes_out=t.bytes_out,
                cycles=t.cycles,
                bound_by=bound,
                exposed_stall_s=t.stall_s,
                repeats=unfold.repeats(p.step, p.micro_batch) * cluster.folding.layer_repeats(p.index),
                **_seconds_fields(seconds[p.index]),
            )
        )
    return recs, paces


def _memoryx_records(cluster: Cluster, shift: Shift, tail: list[tuple[float, float, str]]) -> list[KernelRecord]:
    """One record per optimizer job (update or accumulation), in start order; the last update takes the tail."""
    plan = cluster.plan
    unfold = cluster.folding.unfolding()
    recs: list[KernelRecord] = []
    opt = cluster.optimizer
    last_job = _last_update(cluster) if tail else None
    drain: dict[str, float] = {}
    for a, b, cause in tail:
        drain[cause] = drain.get(cause, 0.0) + (b - a)
    grad = gradient_passes(cluster.program)
    for j in sorted(opt.jobs, key=lambda j: (j.start, j.kernel)):
        kp = plan.kernels[j.kernel]
        t = j.traffic
        assert t is not None
        alone = {  # each kind of work as if it ran alone; the longest names what bound the job
            "memoryx_dram": t.dram_bytes / opt.dram.bandwidth_Bps,
            "memoryx_flash": t.flash_read_bytes / opt.flash_read_Bps + t.flash_write_bytes / opt.flash_write_Bps,
            "optimizer_flops": t.flops / opt.flops_rate,
        }
        bound = max(alone, key=lambda k: alone[k])
        recs.append(
            KernelRecord(
                step=unfold.step_of(j.step),
                micro_batch=j.micro_batch,
                name=kp.kernel.name,
                layer=kp.kernel.layer,
                phase=j.kind,
                where="memoryx",
                start_s=j.start + shift(j.step, j.micro_batch),
                end_s=j.end + shift(j.step, j.micro_batch),
                bytes_in=j.read_bytes,
                bytes_out=j.write_bytes,
                cycles=0.0,
                bound_by=bound,
                exposed_stall_s=max(j.queued_s, 0.0),
                # an update released by the step's last gradient (clipping) is one kernel's, stand-ins included
                repeats=unfold.repeats(j.step, j.micro_batch) * cluster.folding.layer_repeats(
                    j.released_by if j.released_by is not None else grad[(j.kernel, j.step, j.micro_batch)]),
                **_seconds_fields(drain if j is last_job else {}),
            )
        )
    return recs


def _pass_seconds(timeline: list[tuple[float, float, str, int]], n_passes: int) -> list[dict[str, float]]:
    """Each pass's seconds by cause, summed from the wafer's timeline spans.

    The same spans the steps' breakdown adds up, so the records' totals match it to rounding.
    """
    out: list[dict[str, float]] = [{} for _ in range(n_passes)]
    for a, b, cause, p in timeline:
        if p >= 0:
            out[p][cause] = out[p].get(cause, 0.0) + (b - a)
    return out


def _seconds_fields(by_cause: dict[str, float]) -> dict[str, Any]:
    """``{cause: seconds}`` as :class:`KernelRecord` keyword arguments (``compute_s``, ``stall_<cause>_s``)."""
    return {RECORD_SECONDS[c]: v for c, v in by_cause.items()}
