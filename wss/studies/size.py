"""Cluster sizing: how long a token budget takes on each cluster size, and the smallest that meets a deadline.

>>> import wss
>>> df = wss.size("scenarios/gpt3_175b.yaml", tokens=3e11, days=30)
>>> df.attrs["recommended"]

Every size is the scenario with only ``hardware.wafers`` changed: the per-step global batch (and so the
tokens per step), the model, MemoryX and the SwarmX fan-out stay as the scenario has them.  Without a target
each size is simulated (``wss.simulate``); with one, each is estimated by the analytic level and only the
counts that decide the smallest size meeting it are simulated (or bounded: :mod:`wss.studies.size_search`).
The time to train is the token budget's steps and the job around them (compile, programming, weight
initialisation, input priming, checkpoints: the scenario's ``job``, or its system's preset), from
:func:`wss.model.result.goodput.time_to_train`; ``job_costs`` says which to count.  See docs/sizing.md.
"""

from __future__ import annotations

import math
import multiprocessing
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wss.errors import WssError
from wss.model.scenario import Scenario, load_scenario
from wss.model.scenario.loader import job_of, published_cluster_limit
from wss.studies.size_search import SIMULATION_UNITS
from wss.studies.step_only import step_only

if TYPE_CHECKING:  # pandas and matplotlib are imported only when used
    import pandas as pd
    from matplotlib.figure import Figure

    from wss.model.result.goodput import JobCosts, TrainTime

__all__ = ["size", "SizeError", "cluster_sizes", "format_size", "size_figure", "DEFAULT_MAX_WAFERS"]

#: Largest cluster tried when the wafer's preset publishes no limit (the CS-2's published 192).
DEFAULT_MAX_WAFERS = 192

_SECONDS_PER_DAY = 86400.0


class SizeError(WssError):
    """A sizing question that cannot be asked as given (a negative budget, two targets, ...)."""


def cluster_sizes(max_wafers: int) -> list[int]:
    """Powers of two up to ``max_wafers``, and ``max_wafers`` itself when it is not one."""
    sizes = [2**k for k in range(max_wafers.bit_length()) if 2**k <= max_wafers]
    if sizes[-1] != max_wafers:
        sizes.append(max_wafers)
    return sizes


def _positive(name: str, value: float | None) -> None:
    if value is not None and not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise SizeError(f"{name} must be a positive number, got {value!r}")


def _check_args(tokens: float, days: float | None, tokens_per_s: float | None, max_wafers: int | None,
                price: float | None) -> None:
    _positive("tokens", tokens)
    _positive("days", days)
    _positive("tokens_per_s", tokens_per_s)
    if price is not None and not (math.isfinite(price) and price >= 0):
        raise SizeError(f"price_per_wafer_hour must be a non-negative number, got {price!r}")
    if days is not None and tokens_per_s is not None:
        raise SizeError("give one target: days or tokens_per_s, not both")
    if max_wafers is not None and (isinstance(max_wafers, bool) or not isinstance(max_wafers, int) or max_wafers < 1):
        raise SizeError(f"max_wafers must be a positive integer, got {max_wafers!r}")


def _max_wafers(base: Scenario, max_wafers: int | None) -> int:
    """The largest size to try: the argument, else the wafer's published cluster limit, else 192."""
    limit = published_cluster_limit(base.hardware.wafer.name)
    if max_wafers is None:
        return limit.wafers if limit is not None else DEFAULT_MAX_WAFERS
    if limit is not None and max_wafers > limit.wafers and not base.hardware.allow_beyond_published_limits:
        raise SizeError(
            f"max_wafers {max_wafers} is above the largest published cluster of {base.hardware.wafer.name} "
            f"({limit.wafers}: {limit.source}); set hardware.allow_beyond_published_limits: true for a what-if"
        )
    return max_wafers


def _run_size(scenario_json: str, progress: Callable[[float], None] | None = None) -> dict[str, Any]:
    """Simulate one size (in this process or a worker); a WssError becomes an error row.  ``progress`` is told
    the fraction of the run done."""
    from wss.model.simulate import simulate_detailed

    scenario = Scenario.model_validate_json(scenario_json)
    try:
        r = simulate_detailed(scenario, record=False, progress=progress)[0]
    except WssError as exc:
        return {"status": "error", "error": str(exc).splitlines()[0]}
    e = r.energy
    return {
        "status": "ok",
        "step_time_s": r.step_time_s,
        "tokens_per_s": r.tokens_per_s,
        "bound_by": r.bound_by,
        "energy_per_token_J": e.per_token_J if e is not None else math.nan,
        "average_power_kW": e.average_power_W / 1e3 if e is not None else math.nan,
        "error": "",
    }


class _Probes:
    """Work done out of that planned, told to a progress callback as a fraction that never runs backwards.

    Without a target the work is the table's simulations, one unit each.  With one, an estimate is a unit
    and a simulation :data:`~wss.studies.size_search.SIMULATION_UNITS` (it reports its own progress in
    between); the plan is at its most at the start and shrinks to what the search needs once its guess is
    made.  Work beyond the plan holds the bar where it is.
    """

    def __init__(self, progress: Callable[[float], None] | None, planned: float):
        self.progress, self.planned, self.done, self.told = progress, max(planned, 1.0), 0.0, 0.0

    def replan(self, remaining: float) -> None:
        """About ``remaining`` more units from now."""
        self.planned = max(self.done + remaining, 1.0)

    def add(self, units: float = 1.0) -> None:
        self.at(self.done + units)

    def at(self, done: float) -> None:
        """``done`` units done in all."""
        self.done = done
        fraction = min(self.done / self.planned, 1.0)
        if self.progress is not None and fraction >= self.told:
            self.told = fraction
            self.progress(fraction)


def sized(base: Scenario, n: int) -> Scenario:
    """``base`` on ``n`` wafers, as a size is simulated: a size's row reads only the step (step time, throughput,
    bound, energy), so a count the batch does not divide runs with the busiest wafer for all where that gives the
    same step (:func:`~wss.studies.step_only.step_only`)."""
    return step_only(load_scenario(base, {"hardware.wafers": n}))


def _simulate_sizes(base: Scenario, sizes: Sequence[int], workers: int | None,
                    probes: _Probes | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any] | None] = [None] * len(sizes)
    jobs: dict[int, str] = {}
    for i, n in enumerate(sizes):
        try:
            jobs[i] = sized(base, n).model_dump_json()
        except WssError as exc:
            rows[i] = {"status": "error", "error": str(exc).splitlines()[0]}
    done: dict[int, dict[str, Any]] = {}
    if workers is not None and workers > 1 and len(jobs) > 1:
        ctx = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=ctx) as pool:
            for i, row in zip(jobs, pool.map(_run_size, jobs.values())):
                done[i] = row
                if probes is not None:
                    probes.add()
    else:
        for i, text in jobs.items():
            done[i] = _run_size(text)
            if probes is not None:
                probes.add()
    for i, row in done.items():
        rows[i] = row
    return [{"wafers": n, **row} for n, row in zip(sizes, rows) if row is not None]


def _search(base: Scenario, sizes: Sequence[int], meets: Callable[[dict[str, Any]], bool], workers: int | None,
            probes: _Probes | None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The table with a target: every size estimated, the counts that decide the smallest size that meets it
    simulated or bounded (:mod:`wss.studies.size_search`); the rows (each with ``how``: simulated or
    estimated) and the search's record for ``df.attrs["search"]``."""
    from wss.studies.size_search import Search

    def simulate(n: int, progress: Callable[[float], None] | None) -> dict[str, Any]:
        try:
            text = sized(base, n).model_dump_json()
        except WssError as exc:
            return {"wafers": n, "status": "error", "error": str(exc).splitlines()[0]}
        return {"wafers": n, **_run_size(text, progress)}

    search = Search(base, meets, simulate, probes)
    start = time.perf_counter()
    answer = search.smallest(sizes)
    record = {"seconds": time.perf_counter() - start, "answer": answer,
              "probes": [p.as_dict() for p in search.probes]}
    rows = {n: {"wafers": n, **search.estimated[n][0], "how": "estimated"} for n in sizes}
    rows.update({n: {**row, "how": "simulated"} for n, row in search.simulated.items()})
    return [rows[n] for n in sorted(rows)], record


def _bisection_probes(gap: int) -> int:
    """Simulations a bisection of a gap of ``gap`` wafers makes at most."""
    return max(0, math.ceil(math.log2(gap))) if gap > 1 else 0


def counted_job_costs(job_costs: str | Collection[str]) -> tuple[str, ...]:
    """The job costs to count: ``"all"``, ``"none"``, names separated by commas, or a collection of names (of
    :data:`~wss.model.scenario.job.JOB_COSTS`)."""
    from wss.model.scenario.job import JOB_COSTS

    if isinstance(job_costs, str):
        names = {"all": list(JOB_COSTS), "none": []}.get(job_costs.strip(),
                                                           [n.strip() for n in job_costs.split(",") if n.strip()])
    else:
        names = list(job_costs)
    unknown = [n for n in names if n not in JOB_COSTS]
    if unknown:
        raise SizeError(f"unknown job cost {unknown[0]!r}: give all, none, or some of {', '.join(JOB_COSTS)}")
    return tuple(n for n in JOB_COSTS if n in names)


def _checkpoint_write_s(base: Scenario, sizes: Sequence[int]) -> float:
    """Seconds to write one checkpoint's bytes (MemoryX's weights and moments, which no wafer count changes),
    from the plan of the first size that plans."""
    from wss.model.plan import make_plan
    from wss.model.result.goodput import checkpoint_write_seconds
    from wss.model.scenario.loader import checkpoint_storage

    for n in sizes:
        try:
            return checkpoint_write_seconds(make_plan(load_scenario(base, {"hardware.wafers": n})),
                                            checkpoint_storage(base))
        except WssError:
            continue
    return 0.0  # no size plans: every row is an error


def _job(base: Scenario, sizes: Sequence[int], counted: tuple[str, ...]) -> JobCosts:
    """The job costs of the scenario (its ``job``, or its system's preset) that ``counted`` names."""
    from wss.model.result.goodput import job_costs

    job = job_of(base)
    count_checkpoints = "checkpoints" in counted and job.checkpoint_every_steps is not None
    return job_costs(base, job, _checkpoint_write_s(base, sizes) if count_checkpoints else 0.0, counted)


def _job_attrs(base: Scenario, costs: JobCosts, steps: float) -> dict[str, Any]:
    """``df.attrs["job"]``: the job costs counted, for the table's line and the JSON."""
    return {"name": costs.name, "counted": list(costs.counted), "once_s": costs.once_s,
            "checkpoint_s": costs.checkpoint_s, "checkpoint_every_steps": costs.every, "steps": steps,
            "micro_batch_search": base.training.micro_batch == "auto" and job_of(base).micro_batch_search_s > 0}


def _train_time(tokens: float, tokens_per_step: float, tokens_per_s: float, costs: JobCosts) -> TrainTime:
    """The time to train ``tokens`` at ``tokens_per_s``: the steps and the job's costs (one function)."""
    from wss.model.result.goodput import time_to_train

    return time_to_train(tokens / tokens_per_step, tokens_per_step / tokens_per_s, costs)


def _train_seconds(tokens: float, tokens_per_step: float, tokens_per_s: float, costs: JobCosts) -> float:
    """Wall seconds to train ``tokens`` at ``tokens_per_s``: the steps and the job's costs."""
    return _train_time(tokens, tokens_per_step, tokens_per_s, costs).total_s


def _meets(tokens: float, days: float | None, tokens_per_s: float | None, tokens_per_step: float,
           costs: JobCosts) -> Callable[[dict[str, Any]], bool]:
    """Does a row (simulated or estimated) meet the target?  Never without one."""

    def meets(row: dict[str, Any]) -> bool:
        if row.get("status") != "ok":
            return False
        if days is not None:
            return _train_seconds(tokens, tokens_per_step, row["tokens_per_s"], costs) / _SECONDS_PER_DAY <= days
        return tokens_per_s is not None and row["tokens_per_s"] >= tokens_per_s

    return meets


def _add_columns(df: pd.DataFrame, tokens: float, price: float | None, tokens_per_step: float,
                 costs: JobCosts) -> None:
    ok = df["status"] == "ok"
    # Both columns from one TrainTime: the job's part is what it adds to the steps, exactly 0 with no job costs
    # (a difference of separately rounded day counts would leave 1e-17 hours).
    trains = [_train_time(tokens, tokens_per_step, x, costs) if good else None
              for x, good in zip(df["tokens_per_s"], ok)]
    df["days"] = [t.total_s / _SECONDS_PER_DAY if t else math.nan for t in trains]
    df["job_hours"] = [(t.total_s - t.steps_s) / 3600.0 if t else math.nan for t in trains]
    ref = df[ok].iloc[0] if ok.any() else None
    if ref is not None:
        df["efficiency"] = (df["tokens_per_s"] / df["wafers"]) / (ref["tokens_per_s"] / ref["wafers"])
    else:
        df["efficiency"] = math.nan
    df["wafer_hours"] = df["wafers"] * df["days"] * 24.0
    df["energy_kWh"] = tokens * df["energy_per_token_J"] / 3.6e6
    if price is not None:
        df["cost"] = df["wafer_hours"] * price


def size(
    scenario: str | Path | Mapping[str, Any] | Scenario,
    tokens: float,
    *,
    days: float | None = None,
    tokens_per_s: float | None = None,
    max_wafers: int | None = None,
    price_per_wafer_hour: float | None = None,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
    workers: int | None = None,
    progress: Callable[[float], None] | None = None,
    job_costs: str | Collection[str] = "all",
) -> pd.DataFrame:
    """Time to train ``tokens`` on each cluster size, one row per size, smallest first.

    Sizes are the powers of two up to ``max_wafers`` (default: the wafer's published cluster limit, else
    192) and ``max_wafers`` itself.  Only ``hardware.wafers`` changes: the per-step global batch stays the
    scenario's, so a size with more wafers than samples per step is an error row.  With a target (``days``
    or ``tokens_per_s``) the smallest size that meets it is ``recommended`` (one wafer fewer misses): the
    analytic level estimates the table's sizes and guesses the boundary, and only the counts that decide it
    are simulated (or, for a miss, bounded by their compute); see :mod:`wss.studies.size_search`.  Then the
    ``how`` column says which rows were simulated and which estimated, and ``df.attrs["search"]`` lists
    every probe (how, step time, seconds).  ``workers`` > 1 simulates the table's sizes in that many
    processes.  ``progress`` is called with the fraction of the probes done.

    The days are the steps and the job around them (the scenario's ``job``, or its system's preset):
    ``job_costs`` counts ``"all"`` (default), ``"none"`` or some of :data:`~wss.model.scenario.job.JOB_COSTS`.

    Columns: wafers, status, step_time_s, tokens_per_s, bound_by, days, job_hours (the job's part of days),
    efficiency (tokens/s per wafer over the smallest size's), wafer_hours, energy_kWh, average_power_kW,
    energy_per_token_J, cost (with a price), meets_target, recommended, error, how.  ``df.attrs`` holds
    ``tokens``, ``target``, ``recommended`` (wafers or None), ``reachable``, ``global_batch``, ``table_seconds``,
    ``search`` (None without a target) and ``job`` (the costs counted, by name; the checkpoint and its interval).
    """
    import pandas as pd

    _check_args(tokens, days, tokens_per_s, max_wafers, price_per_wafer_hour)
    base = load_scenario(scenario, overrides)
    if base.workload.model.input != "tokens":
        raise SizeError(f"{base.name}: sizing needs a token model (this one reads {base.workload.model.input})")
    sizes = cluster_sizes(_max_wafers(base, max_wafers))
    target: str | None = f"{days:g} days" if days is not None else (
        f"{tokens_per_s:.4g} tokens/s" if tokens_per_s is not None else None)
    costs = _job(base, sizes, counted_job_costs(job_costs))
    tokens_per_step = float(base.training.global_batch * base.seq_len)
    meets = _meets(tokens, days, tokens_per_s, tokens_per_step, costs)
    widest = max((b - a for a, b in zip(sizes, sizes[1:])), default=0)
    # with a target: every size estimated, a bisection of estimates, then two counts decided (at most
    # simulated), and a bisection of simulations at worst
    planned = len(sizes) + (_bisection_probes(widest) + SIMULATION_UNITS * (2 + _bisection_probes(widest))
                            if target is not None else 0)
    probes = _Probes(progress, planned)
    if progress is not None:
        progress(0.0)
    started = time.perf_counter()
    search: dict[str, Any] | None = None
    if target is None:  # the table alone: every size simulated
        rows = [{**row, "how": "simulated"} for row in _simulate_sizes(base, sizes, workers, probes)]
    else:
        rows, search = _search(base, sizes, meets, workers, probes)
    table_s = time.perf_counter() - started
    if progress is not None:
        progress(1.0)
    df = pd.DataFrame(rows)
    _add_columns(df, tokens, price_per_wafer_hour, tokens_per_step, costs)
    df["meets_target"] = [meets(r) for r in rows]  # an estimated row's by its estimate
    answer = search["answer"] if search is not None else None
    df["recommended"] = df["wafers"] == answer
    df.attrs.update(
        tokens=tokens,
        target=target,
        recommended=answer,
        reachable=answer is not None if target is not None else None,
        global_batch=base.training.global_batch,
        scenario=base.name,
        table_seconds=table_s,
        search=search,
        job=_job_attrs(base, costs, tokens / tokens_per_step),
    )
    return df


def _fmt(x: float, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _amount(x: float) -> str:
    """Whole numbers with thousands separators from 100 up, three significant digits below."""
    return _fmt(x, ",.0f" if abs(x) >= 100 else ".3g")


def format_size(df: pd.DataFrame) -> str:
    """The sizing table and its conclusion as text (the CLI prints it)."""
    a = df.attrs
    cost = "cost" in df.columns
    by = "how" in df.columns and bool((df["how"] != "simulated").any())  # say which rows are estimates
    head = (f"{a['scenario']}: {a['tokens']:.3g} tokens, global batch {a['global_batch']} per step at every size"
            + (f"; target {a['target']}" if a["target"] else ""))
    header = ["wafers", "step time", "tokens/s", "days", "job h", "eff.", "wafer-h", "MWh", *(["cost"] if cost else []),
              *(["by"] if by else []), ""]
    rows, errors = [], []
    for _, r in df.iterrows():
        if r["status"] != "ok":
            errors.append(f"{r['wafers']} wafers: error: {r['error']}")
            continue
        rows.append([str(r["wafers"]), _fmt(r["step_time_s"], ".4g") + " s", _fmt(r["tokens_per_s"], ".4g"),
                     _fmt(r["days"], ".4g"), _fmt(r["job_hours"], ".3g"), _fmt(r["efficiency"], ".1%"),
                     _amount(r["wafer_hours"]),
                     _amount(r["energy_kWh"] / 1e3), *([_amount(r["cost"])] if cost else []),
                     *([_BY[r["how"]]] if by else []), "<- recommended" if r["recommended"] else ""])
    from wss.views.table import text_table

    align = [">"] * (len(header) - 1 - by) + ["<"] * (1 + by)
    lines = [head, job_line(a.get("job")), *text_table(header, rows, align), *errors, *_search_lines(df)]
    lines.append(conclusion(df))
    return "\n".join(line for line in lines if line)


def job_line(job: dict[str, Any] | None) -> str:
    """Which of the job's costs the days count, and how long each takes: 'job costs counted (cs2): compile 24
    min, ...; a checkpoint of 3.02 min every 1,000 steps (N in all)'."""
    from wss.model.scenario.job import JOB_COSTS
    from wss.views.summary import fmt_duration

    if job is None:
        return ""
    counted = job["counted"]
    if not counted:
        return "job costs: none counted, the steps alone (days count no compile, programming, weight_init, " \
               "input_priming or checkpoints)"
    parts = [f"{name} {fmt_duration(sec) if sec else '0 s'}"
             + (" (with the micro-batch search)" if name == "compile" and job["micro_batch_search"] else "")
             for name, sec in job["once_s"].items()]
    every = job["checkpoint_every_steps"]
    if every is not None:
        n = math.ceil(job["steps"] / every)
        parts.append(f"a checkpoint of {fmt_duration(job['checkpoint_s'])} every {every:,} steps ({n:,} in all)")
    left = [c for c in JOB_COSTS if c not in counted]
    if "checkpoints" in counted and every is None:
        left.append("checkpoints (the job sets no interval)")
    tail = f"; not counted: {', '.join(left)}" if left else ""
    return f"job costs counted ({job['name']}): {', '.join(parts)}{tail}"


#: The ``by`` column: how a row's figures were found.
_BY = {"simulated": "simulation", "estimated": "estimate"}


#: How a deciding probe was decided, in words for the table.
_HOW = {"bounded": "bounded: its compute alone", "simulated": "simulated"}


def _search_lines(df: pd.DataFrame) -> list[str]:
    """How the smallest size was found: how many estimates steered the search, and the counts that decided
    it, each simulated or bounded by the analytic level, with the seconds each took (nothing without a
    target)."""
    from wss.views.table import text_table

    search = df.attrs.get("search")
    if search is None:
        return []
    estimates = [p for p in search["probes"] if p["how"] == "estimated"]
    deciding = [p for p in search["probes"] if p["how"] != "estimated"]
    lines = [f"searched in {search['seconds']:.1f} s: {len(estimates)} estimates "
             f"({sum(p['seconds'] for p in estimates):.1f} s) steered it; the counts that decide:"]
    rows = [[str(p["wafers"]), _HOW[p["how"]],
             ("at least " if p["how"] == "bounded" else "") + _fmt(p["step_time_s"], ".4g") + " s",
             "meets" if p["meets"] else "misses", f"{p['seconds']:.1f} s" if p["how"] == "simulated" else ""]
            for p in deciding]
    return lines + text_table(["wafers", "how", "step time", "target", "took"], rows, "><><>")


def conclusion(df: pd.DataFrame) -> str:
    """One line: the recommended size, or that the target is out of reach and the best achievable."""
    a = df.attrs
    if a["target"] is None:
        return ""
    if a["recommended"] is not None:
        r = df[df["recommended"]].iloc[0]
        return (f"recommended: {a['recommended']} wafers, the smallest size that meets {a['target']} "
                f"({r['days']:.4g} days, {r['tokens_per_s']:.4g} tokens/s)")
    ok = df[df["status"] == "ok"]
    if ok.empty:
        return f"unreachable: {a['target']}: no size ran (see the errors above)"
    best = ok.sort_values("tokens_per_s", kind="stable").iloc[-1]
    estimated = ", estimated" if best.get("how") == "estimated" else ""
    return (f"unreachable: no size up to {int(df['wafers'].max())} wafers meets {a['target']}; the best is "
            f"{int(best['wafers'])} wafers, {best['days']:.4g} days ({best['tokens_per_s']:.4g} tokens/s{estimated})")


def size_figure(df: pd.DataFrame) -> Figure:
    """Days to train and efficiency against wafers (log-2 axis), the recommended size marked."""
    from matplotlib.figure import Figure

    ok = df[df["status"] == "ok"]
    fig = Figure(figsize=(7, 6))
    ax_days, ax_eff = fig.subplots(2, 1, sharex=True)
    ax_days.plot(ok["wafers"], ok["days"], marker="o")
    ax_days.set_yscale("log")
    ax_days.set_ylabel("days to train")
    ax_eff.plot(ok["wafers"], ok["efficiency"] * 100, marker="o")
    ax_eff.set_ylabel("efficiency vs smallest (%)")
    ax_eff.set_ylim(0, 105)
    ax_eff.set_xlabel("wafers")
    ax_eff.set_xscale("log", base=2)
    rec = df.attrs.get("recommended")
    if rec is not None:
        for ax in (ax_days, ax_eff):
            ax.axvline(rec, color="green", linestyle="--", label=f"recommended: {rec}")
        ax_days.legend(fontsize="small")
    fig.suptitle(f"{df.attrs.get('scenario', '')}: {df.attrs.get('tokens', 0):.3g} tokens, "
                 f"global batch {df.attrs.get('global_batch')}")
    return fig
