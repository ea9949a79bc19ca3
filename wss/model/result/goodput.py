"""Failures, checkpoints, goodput and the time to train: what a training run costs besides its steps.

The time to train (:func:`time_to_train`, the one function every figure of it comes from: ``wss size``, the
Result's ``failures``) is the steps, the job's costs once per job (compile, micro-batch search, programming,
weight initialisation, input priming: :class:`~wss.model.scenario.job.JobConfig`), a checkpoint every so many
steps (its fixed part and its bytes over the storage), and, with failures, the work they lose and the restarts.

A failure does not change a step; it costs time between steps.  The job writes a checkpoint of
MemoryX's state (weights and optimizer state) to storage every ``K`` steps; when any wafer fails,
the job restarts (``R`` seconds) and runs again the steps since the last checkpoint.

The expected-value model (docs/faults.md).  Failures of the job arrive as a Poisson process of rate
``lam = wafers / MTBF_wafer`` (cluster MTBF ``M = 1 / lam``), also during checkpoints and restarts;
``wafers`` counts the wafers that train, not those a SwarmX node that is down cuts off (they are not
in the job, so their failures stop nothing).
A segment of ``K`` steps of ``T`` seconds and its checkpoint of ``C`` seconds lasts ``tau = K T + C``
without failure.  Its expected wall time, with every failure costing the work since the segment
began plus a restart, is (Daly, "A higher order estimate of the optimum checkpoint interval for
restart dumps", 2006)::

    E(K) = (exp(lam R) / lam) (exp(lam tau) - 1)

and the goodput is ``K T / E(K)``.  Setting its derivative in ``K`` to zero gives, with
``x = lam tau``, ``1 - exp(-x) = x - lam C``, solved here by bisection; for ``C << M`` its root
approaches Young's interval ``K T = sqrt(2 C M)`` ("A first order approximation to the optimum
checkpoint interval", Young, 1974).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace

from wss.errors import FieldProblem, InfeasibleError
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.plan import Plan
from wss.model.result.results import FailureSummary, RunSpan, StepRecord
from wss.model.scenario import Scenario
from wss.model.scenario.faults import FailuresConfig, FaultsConfig, StorageConfig
from wss.model.scenario.job import JOB_COSTS, JobConfig
from wss.model.scenario.shards import reachable_wafers

__all__ = ["checkpoint_bytes", "checkpoint_seconds", "checkpoint_write_seconds", "segment_seconds", "goodput",
           "best_interval", "failure_summary", "run_timeline", "JobCosts", "job_costs", "TrainTime",
           "time_to_train"]

#: Beyond exp(this) a segment is expected to last longer than any run: it practically never completes.
_EXP_LIMIT = 700.0

#: MemoryX's state components a checkpoint holds: the gradient accumulators are empty between steps.
CHECKPOINTED = ("weights", "moments")


def checkpoint_bytes(plan: Plan) -> float:
    """Bytes of one checkpoint: every MemoryX state component but the gradient accumulators."""
    return sum(sum(where.values()) for c, where in plan.memoryx_components.items() if c in CHECKPOINTED)


def checkpoint_seconds(plan: Plan, failures: FailuresConfig) -> float:
    """Seconds to write a checkpoint's bytes to ``failures.storage`` (:func:`checkpoint_write_seconds`)."""
    return checkpoint_write_seconds(plan, failures.storage)


def checkpoint_write_seconds(plan: Plan, storage: StorageConfig) -> float:
    """Seconds to write a checkpoint's bytes: the slowest stage of a pipelined copy from MemoryX's DRAM and flash,
    through its network ports (each at the slowest shard's rate: :mod:`wss.model.machine.memoryx_rates`), to
    storage.  A job's checkpoint costs its fixed part (``job.checkpoint_s``) besides."""
    rates = memoryx_rates(plan.scenario)
    parts = {c: where for c, where in plan.memoryx_components.items() if c in CHECKPOINTED}
    dram = sum(w.get("dram", 0.0) for w in parts.values())
    flash = sum(w.get("flash", 0.0) for w in parts.values())
    total = dram + flash
    read = dram / rates.dram_Bps + flash / rates.flash_read_Bps
    network = total / rates.network_Bps
    return max(read, network, total / storage.write_bandwidth_Bps)


@dataclass(frozen=True)
class JobCosts:
    """What a job pays besides its steps, as counted: the job's ``name`` (its preset), ``once_s`` by cost
    (compile with its micro-batch search, programming, weight_init, input_priming), the seconds of one
    checkpoint and the steps between them (None: no checkpoints), and the names of the costs counted (of
    :data:`~wss.model.scenario.job.JOB_COSTS`)."""

    name: str
    once_s: dict[str, float]
    checkpoint_s: float
    every: int | None
    counted: tuple[str, ...]

    @property
    def startup_s(self) -> float:
        """Seconds before the first step."""
        return sum(self.once_s.values())


def job_costs(scenario: Scenario, job: JobConfig, write_s: float,
              counted: Collection[str] = JOB_COSTS) -> JobCosts:
    """The costs of ``scenario``'s job that ``counted`` names: the micro-batch search only where the
    micro-batch is the compiler's choice (``training.micro_batch: auto``), the priming of the model's input
    kind, a checkpoint of ``job.checkpoint_s`` plus ``write_s`` (its bytes) every ``job.checkpoint_every_steps``.
    """
    unknown = sorted(set(counted) - set(JOB_COSTS))
    if unknown:
        raise ValueError(f"unknown job costs {unknown}; known: {', '.join(JOB_COSTS)}")
    search = job.micro_batch_search_s if scenario.training.micro_batch == "auto" else 0.0
    once = {"compile": job.compile_s + search, "programming": job.programming_s, "weight_init": job.weight_init_s,
            "input_priming": job.input_priming_s.of(scenario.workload.model.input)}
    keep = "checkpoints" in counted and job.checkpoint_every_steps is not None
    return JobCosts(name=job.name, once_s={k: float(v) for k, v in once.items() if k in counted},
                    checkpoint_s=job.checkpoint_s + write_s if keep else 0.0,
                    every=job.checkpoint_every_steps if keep else None,
                    counted=tuple(c for c in JOB_COSTS if c in counted))


@dataclass(frozen=True)
class TrainTime:
    """A time to train, in parts: the steps alone, the job's costs once per job (by cost), the checkpoints
    (how many, their seconds) and what failures cost on average (lost work and restarts); ``total_s`` is
    their sum."""

    steps_s: float
    once_s: dict[str, float]
    checkpoints: int
    checkpoints_s: float
    failures_s: float
    total_s: float


def time_to_train(steps: float, step_s: float, costs: JobCosts, rate: float = 0.0, restart_s: float = 0.0,
                  every: int | None = None) -> TrainTime:
    """Wall seconds to train ``steps`` steps of ``step_s``: the job's start-up, the steps, a checkpoint every
    ``every`` steps (default: the job's interval; the last step is saved too) and, under failures of ``rate``
    per second, the expected rework and restarts (Daly's segments, :func:`segment_seconds`)."""
    k = costs.every if every is None else every
    c = costs.checkpoint_s
    work = steps * step_s
    if k is None:
        if rate > 0.0:
            raise ValueError("failures need a checkpoint interval")
        n, segments = 0, work
    else:
        n = math.ceil(steps / k) if steps > 0 else 0
        if rate == 0.0:
            segments = work + n * c
        else:
            whole, rest = divmod(steps, k)
            segments = whole * segment_seconds(k, step_s, c, restart_s, rate) + (
                segment_seconds(rest, step_s, c, restart_s, rate) if rest else 0.0)
    once = dict(costs.once_s)
    return TrainTime(steps_s=work, once_s=once, checkpoints=n, checkpoints_s=n * c,
                     failures_s=segments - work - n * c, total_s=costs.startup_s + segments)


def segment_seconds(k: float, step_s: float, checkpoint_s: float, restart_s: float, rate: float) -> float:
    """Expected wall seconds of ``k`` steps and their checkpoint under failures of ``rate`` per second."""
    tau = k * step_s + checkpoint_s
    if rate == 0.0:
        return tau
    if rate * (restart_s + tau) > _EXP_LIMIT:
        return math.inf
    return math.exp(rate * restart_s) * math.expm1(rate * tau) / rate


def goodput(k: int, step_s: float, checkpoint_s: float, restart_s: float, rate: float) -> float:
    """Expected fraction of wall time spent on kept steps, with a checkpoint every ``k`` steps."""
    return k * step_s / segment_seconds(k, step_s, checkpoint_s, restart_s, rate)


def best_interval(step_s: float, checkpoint_s: float, restart_s: float, rate: float) -> int:
    """The checkpoint interval in steps with the highest expected goodput (``rate > 0``).

    The continuous optimum solves ``1 - exp(-x) = x - rate C`` for ``x = rate (K T + C)`` in
    ``(rate C, rate C + 1)``; the best whole number of steps is next to it.
    """
    lc = rate * checkpoint_s
    lo, hi = lc, lc + 1.0
    for _ in range(200):  # g(x) = 1 - exp(-x) - x + lc falls from positive at lo to negative at hi
        mid = 0.5 * (lo + hi)
        if -math.expm1(-mid) - mid + lc > 0:
            lo = mid
        else:
            hi = mid
    k = (0.5 * (lo + hi) - lc) / (rate * step_s)
    candidates = {max(1, math.floor(k)), max(1, math.ceil(k))}
    return max(sorted(candidates), key=lambda n: goodput(n, step_s, checkpoint_s, restart_s, rate))


def run_timeline(steps: list[StepRecord], faults: FaultsConfig, every: int, checkpoint_s: float,
                 restart_s: float) -> list[RunSpan]:
    """The simulated steps on the wall clock, with a checkpoint after every ``every``-th step and each
    scripted failure (at the end of its step, before that step's checkpoint) costing a restart and the
    steps since the last checkpoint, run again for the time they took."""
    fails: dict[int, list[int]] = {}
    for e in sorted(faults.events, key=lambda e: (e.at_step, e.wafer)):
        fails.setdefault(e.at_step, []).append(e.wafer)
    spans: list[RunSpan] = []
    t, saved = 0.0, -1  # saved: the last checkpointed step
    for rec in steps:
        i = rec.step
        spans.append(RunSpan(kind="step", step=i, start_s=t, end_s=t + rec.time_s))
        t += rec.time_s
        for wafer in fails.get(i, []):
            spans.append(RunSpan(kind="restart", step=i, start_s=t, end_s=t + restart_s, wafer=wafer,
                                 lost_steps=i - saved))
            t += restart_s
            for lost in steps[saved + 1:i + 1]:
                spans.append(RunSpan(kind="redo", step=lost.step, start_s=t, end_s=t + lost.time_s))
                t += lost.time_s
        if (i + 1) % every == 0:
            spans.append(RunSpan(kind="checkpoint", step=i, start_s=t, end_s=t + checkpoint_s))
            t += checkpoint_s
            saved = i
    return spans


def _train_steps(plan: Plan, failures: FailuresConfig) -> int | None:
    if failures.train_steps is not None:
        return failures.train_steps
    if failures.train_tokens is not None:
        per_step = plan.scenario.training.global_batch * plan.tokens_per_sample
        return max(1, math.ceil(failures.train_tokens / per_step))
    return None


def failure_summary(plan: Plan, step_s: float, steps: list[StepRecord]) -> FailureSummary | None:
    """Goodput, the checkpoint interval and the expected time to train; None without ``faults.failures``.

    A checkpoint costs the job's fixed part (``job.checkpoint_s``) and its bytes; the time to train adds the
    job's start-up (:func:`time_to_train`).  A scenario the loader did not resolve may carry no ``job``: then
    it pays nothing but the bytes (the loader gives one with ``faults.failures``: the system's preset)."""
    s = plan.scenario
    f = s.faults.failures
    if f is None:
        return None
    job = s.job if s.job is not None else JobConfig(name="none")
    write = checkpoint_seconds(plan, f)
    c = job.checkpoint_s + write
    # A wafer cut off by a SwarmX node that is down is not in the job: its failure stops nothing.
    trains = len(reachable_wafers(s))
    mtbf = f.mtbf_hours_per_wafer * 3600.0 / trains if f.mtbf_hours_per_wafer is not None else None
    rate = 1.0 / mtbf if mtbf is not None else 0.0
    auto = f.checkpoint_every_steps == "auto"
    k = best_interval(step_s, c, f.restart_s, rate) if auto else int(f.checkpoint_every_steps)
    segment = segment_seconds(k, step_s, c, f.restart_s, rate)
    if not math.isfinite(segment):
        raise InfeasibleError(s.name, [FieldProblem(
            "faults.failures.mtbf_hours_per_wafer",
            f"the job fails every {mtbf:.3g} s on average, and {k} steps with a checkpoint and a restart take "
            f"{k * step_s + c + f.restart_s:.3g} s: it would practically never finish")])
    costs = replace(job_costs(s, job, write), checkpoint_s=c, every=k)
    total = _train_steps(plan, f)
    to_train = time_to_train(total, step_s, costs, rate, f.restart_s).total_s if total is not None else None
    timeline = run_timeline(steps, s.faults, k, c, f.restart_s)
    return FailureSummary(
        cluster_mtbf_s=mtbf,
        checkpoint_bytes=checkpoint_bytes(plan),
        checkpoint_s=c,
        checkpoint_fixed_s=job.checkpoint_s,
        restart_s=f.restart_s,
        checkpoint_every_steps=k,
        chosen_by="auto" if auto else "scenario",
        young_daly_steps=math.sqrt(2.0 * c * mtbf) / step_s if mtbf is not None else None,
        goodput=k * step_s / segment,
        expected_s_per_step=segment / k,
        job=job.name,
        startup_s=costs.once_s,
        train_steps=total,
        expected_time_to_train_s=to_train,
        run_time_s=timeline[-1].end_s if timeline else 0.0,
        timeline=timeline,
    )
