"""Cluster sizing: how long a token budget takes on each cluster size, and the smallest that meets a deadline.

>>> import wss
>>> df = wss.size("scenarios/gpt3_175b.yaml", tokens=3e11, days=30)
>>> df.attrs["recommended"]

Every size is the scenario with only ``hardware.wafers`` changed: the per-step global batch (and so the
tokens per step), the model, MemoryX and the SwarmX fan-out stay as the scenario has them.  Each size is
simulated (``wss.simulate``); the time to train is the token budget over the simulated tokens per second.
See docs/sizing.md.
"""

from __future__ import annotations

import math
import multiprocessing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wss.errors import WssError
from wss.model.scenario import Scenario, load_scenario
from wss.model.scenario.loader import published_cluster_limit

if TYPE_CHECKING:  # pandas and matplotlib are imported only when used
    import pandas as pd
    from matplotlib.figure import Figure

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


def _run_size(scenario_json: str) -> dict[str, Any]:
    """Simulate one size (in this process or a worker); a WssError becomes an error row."""
    from wss.model.simulate import simulate

    scenario = Scenario.model_validate_json(scenario_json)
    try:
        r = simulate(scenario)
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
    """Simulations done out of those planned, told to a progress callback as a fraction.

    The table's sizes are known at the start, and with a target the bisection's probes are planned at
    their most (log2 of the widest gap between two table sizes); when the bisection starts, its gap is
    known and the plan shrinks to what it needs.  So the fraction never runs backwards.
    """

    def __init__(self, progress: Callable[[float], None] | None, planned: int):
        self.progress, self.planned, self.done = progress, max(planned, 1), 0

    def replan(self, remaining: int) -> None:
        """At most ``remaining`` more simulations from now (never more than planned before)."""
        self.planned = max(min(self.planned, self.done + remaining), 1)

    def add(self, n: int = 1) -> None:
        self.done += n
        if self.progress is not None:
            self.progress(min(self.done / self.planned, 1.0))


def _simulate_sizes(base: Scenario, sizes: Sequence[int], workers: int | None,
                    probes: _Probes | None = None) -> list[dict[str, Any]]:
    rows: list[dict[str, Any] | None] = [None] * len(sizes)
    jobs: dict[int, str] = {}
    for i, n in enumerate(sizes):
        try:
            jobs[i] = load_scenario(base, {"hardware.wafers": n}).model_dump_json()
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


def _refine(base: Scenario, rows: list[dict[str, Any]], meets: Callable[[dict[str, Any]], bool],
            workers: int | None, probes: _Probes | None = None) -> list[dict[str, Any]]:
    """Bisect between the largest table size that misses the target and the smallest that meets it.

    The table's sizes are powers of two; the smallest cluster that meets a deadline is usually between
    two of them.  Each probe is a simulation (about log2 of the gap of them), and every size probed
    joins the table.  It assumes the time to train falls as wafers are added between the two, as it
    does when only the per-wafer share of the batch changes.
    """
    hit = next((i for i, r in enumerate(rows) if meets(r)), None)
    if hit is None or hit == 0 or rows[hit - 1].get("status") != "ok":
        return rows
    lo, hi = rows[hit - 1]["wafers"], rows[hit]["wafers"]
    if probes is not None:
        probes.replan(_bisection_probes(hi - lo))
    probed = list(rows)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        (row,) = _simulate_sizes(base, [mid], workers, probes) or [{"wafers": mid, "status": "error", "error": ""}]
        probed.append(row)
        if meets(row):
            hi = mid
        else:
            lo = mid
    return sorted(probed, key=lambda r: r["wafers"])


def _bisection_probes(gap: int) -> int:
    """Simulations a bisection of a gap of ``gap`` wafers makes at most."""
    return max(0, math.ceil(math.log2(gap))) if gap > 1 else 0


def _add_columns(df: pd.DataFrame, tokens: float, price: float | None) -> None:
    ok = df["status"] == "ok"
    df["days"] = tokens / df["tokens_per_s"] / _SECONDS_PER_DAY
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
) -> pd.DataFrame:
    """Time to train ``tokens`` on each cluster size, one row per size, smallest first.

    Sizes are the powers of two up to ``max_wafers`` (default: the wafer's published cluster limit, else
    192) and ``max_wafers`` itself.  Only ``hardware.wafers`` changes: the per-step global batch stays the
    scenario's, so a size with more wafers than samples per step is an error row.  With a target (``days``
    or ``tokens_per_s``) the sizes between the largest power of two that misses it and the smallest that
    meets it are bisected (each probe a simulation, every probe a row), and the smallest size that meets
    it is ``recommended``: one wafer fewer misses.  ``workers`` > 1 simulates the
    sizes in that many processes.  ``progress`` is called with the fraction of the simulations done.

    Columns: wafers, status, step_time_s, tokens_per_s, bound_by, days, efficiency (tokens/s per wafer over
    the smallest size's), wafer_hours, energy_kWh, average_power_kW, energy_per_token_J, cost (with a
    price), meets_target, recommended, error.  ``df.attrs`` holds ``tokens``, ``target`` (a description or
    None), ``recommended`` (wafers or None), ``reachable`` and ``global_batch``.
    """
    import pandas as pd

    _check_args(tokens, days, tokens_per_s, max_wafers, price_per_wafer_hour)
    base = load_scenario(scenario, overrides)
    if base.workload.model.input != "tokens":
        raise SizeError(f"{base.name}: sizing needs a token model (this one reads {base.workload.model.input})")
    top = _max_wafers(base, max_wafers)
    sizes = cluster_sizes(top)
    target: str | None = f"{days:g} days" if days is not None else (
        f"{tokens_per_s:.4g} tokens/s" if tokens_per_s is not None else None)
    widest = max((b - a for a, b in zip(sizes, sizes[1:])), default=0)
    probes = _Probes(progress, len(sizes) + (_bisection_probes(widest) if target is not None else 0))
    if progress is not None:
        progress(0.0)
    rows = _simulate_sizes(base, sizes, workers, probes)

    def meets(row: dict[str, Any]) -> bool:
        if row.get("status") != "ok" or target is None:
            return False
        if days is not None:
            return tokens / row["tokens_per_s"] / _SECONDS_PER_DAY <= days
        return row["tokens_per_s"] >= tokens_per_s

    rows = _refine(base, rows, meets, workers, probes)
    if progress is not None:
        progress(1.0)
    df = pd.DataFrame(rows)
    _add_columns(df, tokens, price_per_wafer_hour)
    df["meets_target"] = [meets(r) for r in rows]
    meeting = df.index[df["meets_target"]]
    df["recommended"] = False
    if len(meeting):
        df.loc[meeting[0], "recommended"] = True
    df.attrs.update(
        tokens=tokens,
        target=target,
        recommended=int(df.loc[meeting[0], "wafers"]) if len(meeting) else None,
        reachable=bool(len(meeting)) if target is not None else None,
        global_batch=base.training.global_batch,
        scenario=base.name,
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
    head = (f"{a['scenario']}: {a['tokens']:.3g} tokens, global batch {a['global_batch']} per step at every size"
            + (f"; target {a['target']}" if a["target"] else ""))
    header = ["wafers", "step time", "tokens/s", "days", "eff.", "wafer-h", "MWh", *(["cost"] if cost else []), ""]
    rows, errors = [], []
    for _, r in df.iterrows():
        if r["status"] != "ok":
            errors.append(f"{r['wafers']} wafers: error: {r['error']}")
            continue
        rows.append([str(r["wafers"]), _fmt(r["step_time_s"], ".4g") + " s", _fmt(r["tokens_per_s"], ".4g"),
                     _fmt(r["days"], ".4g"), _fmt(r["efficiency"], ".1%"), _amount(r["wafer_hours"]),
                     _amount(r["energy_kWh"] / 1e3), *([_amount(r["cost"])] if cost else []),
                     "<- recommended" if r["recommended"] else ""])
    from wss.views.table import text_table

    lines = [head, *text_table(header, rows, [">"] * (len(header) - 1) + ["<"]), *errors]
    lines.append(conclusion(df))
    return "\n".join(line for line in lines if line)


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
    return (f"unreachable: no size up to {int(df['wafers'].max())} wafers meets {a['target']}; the best is "
            f"{int(best['wafers'])} wafers, {best['days']:.4g} days ({best['tokens_per_s']:.4g} tokens/s)")


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
