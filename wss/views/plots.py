"""Figures of a run (matplotlib, no display needed): timeline, per-kernel time, utilisation, memory and,
for an unfolded run, each wafer's compute and idle time.

Every function builds a :class:`matplotlib.figure.Figure` directly (no
pyplot, so no GUI backend and no global figure state) and
:func:`save_figure` writes PNG and SVG atomically.

Two sources for the timeline
----------------------------
With the finished cluster of ``simulate_detailed(scenario, record=True)`` the
Gantt chart has one row per part: the wafer's passes (named where wide
enough), MemoryX weight stream and flash prefetch, each SwarmX level down,
the wafer's compute and its stalls by cause, each SwarmX level up, gradients
into MemoryX, the optimizer and the input workers.  A folded run's spans are
placed on the Result's axis (:mod:`wss.model.folding.folded_spans`) and the
stretches its folded copies fill are hatched.

From a saved Result alone (``wss plot result.json``) only the per-pass
records exist, so the chart has three rows: the wafer's passes coloured by
phase, the same passes coloured by what bound them (compute, stream, bubble,
...), and MemoryX's updates.  The stall of a pass is then not placed in
time, only attributed.
"""

from __future__ import annotations

import io
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib
from matplotlib.artist import Artist
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from wss.files import atomic_write_bytes
from wss.model.result.results import BREAKDOWN_CATEGORIES, KernelRecord, Result
from wss.views.summary import fmt_bytes

__all__ = [
    "gantt_figure",
    "kernel_breakdown",
    "kernel_breakdown_figure",
    "utilisation_figure",
    "memory_figure",
    "wafers_figure",
    "save_figure",
    "plot_all",
    "PHASE_COLOURS",
    "CAUSE_COLOURS",
]

PHASE_COLOURS = {
    "forward": "#4c78a8",
    "recompute": "#72b7b2",
    "backward": "#f58518",
    "accumulate": "#bab0ac",
    "update": "#54a24b",
    "input": "#79706e",
}
CAUSE_COLOURS = {
    "compute": "#2f4b7c",
    "stream": "#e45756",
    "flash": "#9d755d",
    "bubble": "#b279a2",
    "optimizer": "#eeca3b",
    "input": "#79706e",
    "switch": "#ff9da6",
    "runtime": "#bab0ac",
    "offload": "#72b7b2",
    "memoryx_dram": "#54a24b",
    "memoryx_flash": "#9d755d",
    "optimizer_flops": "#eeca3b",
}
_FALLBACK = "#cccccc"


def _time_unit(span_s: float) -> tuple[float, str]:
    if span_s >= 2.0:
        return 1.0, "s"
    if span_s >= 2e-3:
        return 1e3, "ms"
    return 1e6, "µs"


def _coalesce(spans: Iterable[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    """Join spans closer than ``gap`` (below a pixel): keeps vector files small, looks the same."""
    out: list[list[float]] = []
    for a, b in sorted(spans):
        if out and a - out[-1][1] <= gap:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def _step_window(result: Result, step: int) -> tuple[float, float]:
    recs = [r for r in result.records if r.step == step]
    st = result.steps[step]
    lo = min([st.start_s] + [r.start_s for r in recs])
    hi = max([st.end_s] + [r.end_s for r in recs])
    return lo, hi


def _rows_from_cluster(cluster: Any, lo: float, hi: float) -> list[tuple[str, dict[str, list[tuple[float, float]]]]]:
    """(row label, {colour key: spans}) for every part, clipped to [lo, hi], on the Result's axis."""
    from wss.model.folding.folded_spans import UnfoldedSpans

    program = cluster.program
    placed = UnfoldedSpans(cluster)

    def phase_of(p: int) -> str:
        return program[p].phase if 0 <= p < len(program) else "update"

    def by_phase(spans: Iterable[tuple[float, float, int, float]]) -> dict[str, list[tuple[float, float]]]:
        groups: dict[str, list[tuple[float, float]]] = defaultdict(list)
        for a, b, p, *_ in placed.pass_spans(spans):
            if b >= lo and a <= hi:
                groups[phase_of(p)].append((a, b))
        return groups

    rows: list[tuple[str, dict[str, list[tuple[float, float]]]]] = []
    passes: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for p, t in zip(program, cluster.wafer.passes):
        d = placed.wafer_shift(p.index)
        if t.end + d >= lo and t.start + d <= hi:
            passes[p.phase].append((t.start + d, t.end + d))
    rows.append(("wafer passes", passes))
    mx = cluster.memoryx
    rows.append(("MemoryX weights out", by_phase(mx.stream_spans or [])))
    if mx.prefetch_spans:
        rows.append(("MemoryX flash prefetch", by_phase(mx.prefetch_spans)))
    for link in cluster.swarmx.down:
        rows.append((f"SwarmX {link.name.rsplit('.', 1)[1]} down", by_phase(link.spans or [])))
    compute: dict[str, list[tuple[float, float]]] = defaultdict(list)
    stalls: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for a, b, cause, p in placed.timeline(cluster.wafer.timeline):
        if b < lo or a > hi:
            continue
        if cause == "compute":
            compute[phase_of(p)].append((a, b))
        else:
            stalls[cause].append((a, b))
    rows.append(("wafer compute", compute))
    rows.append(("wafer stalls", stalls))
    for link in reversed(cluster.swarmx.up):
        rows.append((f"SwarmX {link.name.rsplit('.', 1)[1]} up", by_phase(link.spans or [])))
    rows.append(("MemoryX gradients in", by_phase(cluster.memoryx_in.spans or [])))
    opt: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for j in cluster.optimizer.jobs:
        d = placed.shift(j.step, j.micro_batch)
        if j.end + d >= lo and j.start + d <= hi:
            opt[j.kind].append((j.start + d, j.end + d))
    rows.append(("optimizer", opt))
    inputs = [(a, b) for a, b, *_ in placed.micro_batch_spans(cluster.inputs.spans) if b >= lo and a <= hi]
    if inputs:
        rows.append(("input workers", {"input": inputs}))
    return rows


def _mark_folded(ax: Any, cluster: Any, lo: float, hi: float, scale: float) -> str | None:
    """Hatch the stretches of [lo, hi] that folded copies fill; return the legend's label (the widest), if any."""
    from wss.model.folding.folded_spans import folded_stretches

    shown = []
    for s in folded_stretches(cluster):
        a, b = max(s.start_s, lo), min(s.end_s, hi)
        if b > a:
            ax.axvspan((a - lo) * scale, (b - lo) * scale, facecolor="none", edgecolor="#999999", hatch="//",
                       linewidth=0, zorder=0)
            shown.append((b - a, s.name))
    if not shown:
        return None
    more = f", {len(shown) - 1} more" if len(shown) > 1 else ""
    return f"folded copies ({max(shown)[1]}{more})"


def _rows_from_records(result: Result, lo: float, hi: float) -> list[tuple[str, dict[str, list[tuple[float, float]]]]]:
    passes: dict[str, list[tuple[float, float]]] = defaultdict(list)
    bound: dict[str, list[tuple[float, float]]] = defaultdict(list)
    updates: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for r in result.records:
        if r.end_s < lo or r.start_s > hi:
            continue
        if r.where == "wafer":
            passes[r.phase].append((r.start_s, r.end_s))
            bound[r.bound_by].append((r.start_s, r.end_s))
        else:
            updates[r.phase].append((r.start_s, r.end_s))
    return [("wafer passes (phase)", passes), ("wafer passes (bound by)", bound), ("MemoryX optimizer", updates)]


def _recorded(cluster: Any | None) -> bool:
    return cluster is not None and getattr(cluster.memoryx, "stream_spans", None) is not None


def gantt_figure(result: Result, cluster: Any | None = None, step: int | None = None,
                 window: tuple[float, float] | None = None, width_px: int = 1600) -> Figure:
    """Gantt chart of one step across the parts (default: the last step).

    Uses the cluster's recorded spans when given, else the Result's records.
    ``window`` (start, end) in seconds of simulated time zooms in on part of
    the run instead of a whole step.
    """
    step = len(result.steps) - 1 if step is None else step
    if not 0 <= step < len(result.steps):
        raise ValueError(f"step {step} not in this run (0..{len(result.steps) - 1})")
    if window is not None:
        lo, hi = float(window[0]), float(window[1])
        if not hi > lo:
            raise ValueError(f"window {window}: the end must be after the start")
    else:
        lo, hi = _step_window(result, step)
    rows = _rows_from_cluster(cluster, lo, hi) if _recorded(cluster) else _rows_from_records(result, lo, hi)
    scale, unit = _time_unit(hi - lo)
    gap = (hi - lo) / width_px

    fig = Figure(figsize=(width_px / 100, 1.0 + 0.42 * len(rows)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    used: dict[str, str] = {}
    for i, (label, groups) in enumerate(rows):
        y = len(rows) - 1 - i
        for key in sorted(groups):
            spans = _coalesce(((max(a, lo), min(b, hi)) for a, b in groups[key]), gap)
            colour = PHASE_COLOURS.get(key) or CAUSE_COLOURS.get(key, _FALLBACK)
            if label.startswith("wafer stalls") or "bound by" in label:
                colour = CAUSE_COLOURS.get(key, _FALLBACK)
                used.setdefault(f"{key} stall" if key != "compute" else "compute-bound", colour)
            else:
                used.setdefault(key, colour)
            ax.broken_barh([((a - lo) * scale, (b - a) * scale) for a, b in spans], (y - 0.4, 0.8),
                           facecolors=colour, linewidth=0)
    _label_passes(ax, result, lo, hi, scale, y=len(rows) - 1)
    folded = _mark_folded(ax, cluster, lo, hi, scale) if _recorded(cluster) else None
    st = result.steps[step]
    if st.loss_at_user_s is not None and lo <= st.loss_at_user_s <= hi:
        ax.axvline((st.loss_at_user_s - lo) * scale, color="black", linestyle="--", linewidth=1)
        used.setdefault("loss at user node", "")
    ax.set_yticks(range(len(rows)), [label for label, _ in reversed(rows)])
    ax.set_xlim(0, (hi - lo) * scale)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    source = "recorded spans" if _recorded(cluster) else "result records"
    if window is None:
        ax.set_xlabel(f"time ({unit}) from {lo * scale:.4g} {unit}, the start of step {step}'s window")
        ax.set_title(f"{result.scenario.name}: step {step} ({(st.end_s - st.start_s) * scale:.4g} {unit}), {source}")
    else:
        ax.set_xlabel(f"time ({unit}) from t = {lo:.6g} s")
        ax.set_title(f"{result.scenario.name}: {lo:.6g} s to {hi:.6g} s of the run, {source}")
    order = [*PHASE_COLOURS, "compute-bound", *(f"{c} stall" for c in CAUSE_COLOURS)]
    keys = sorted((k for k, c in used.items() if c), key=lambda k: (order.index(k) if k in order else len(order), k))
    handles: list[Artist] = [Patch(facecolor=used[k], label=k) for k in keys]
    if folded is not None:
        handles.append(Patch(facecolor="none", edgecolor="#999999", hatch="//", label=folded))
    if "loss at user node" in used:
        handles.append(Line2D([], [], color="black", linestyle="--", label="loss at user node"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize="small", frameon=False)
    ax.grid(axis="x", alpha=0.3)
    return fig


def _label_passes(ax: Any, result: Result, lo: float, hi: float, scale: float, y: float,
                  min_fraction: float = 0.04) -> None:
    """Write the kernel name on wafer passes wide enough to hold it (top row)."""
    for r in result.records:
        if r.where != "wafer":
            continue
        a, b = max(r.start_s, lo), min(r.end_s, hi)
        if b - a >= min_fraction * (hi - lo):
            ax.text((a + b) / 2 * scale - lo * scale, y, r.name, ha="center", va="center", fontsize=7,
                    color="white", clip_on=True)


def _role(name: str) -> str:
    """'block.17.qkv' -> 'block.*.qkv': the same kernel in every repeated layer."""
    return re.sub(r"(?<=\.)\d+(?=\.|$)|^\d+(?=\.)", "*", name)


def _wafer_seconds(r: KernelRecord) -> tuple[float, float]:
    """(compute, exposed stall) seconds of the wafer in one repeat of a record.

    From its seconds by cause; a record without them (a result written before they existed)
    splits a wafer pass's duration by its ``exposed_stall_s``.
    """
    by = r.seconds_by_category()
    compute, stall = by.pop("compute"), sum(by.values())
    if r.where == "wafer" and compute == 0.0 and stall == 0.0:
        dur = r.end_s - r.start_s
        stall = min(r.exposed_stall_s, dur)
        compute = dur - stall
    return compute, stall


def kernel_breakdown(result: Result, group: str = "auto", top: int = 20) -> list[dict[str, Any]]:
    """Seconds per step spent on each kernel: wafer compute, exposed stall, MemoryX update.

    Each record counts ``repeats`` times, so a folded run's micro-batches are all in; the compute
    and stall columns of all rows add up to the step time (the wafer's wait after its last pass
    is the stall of the kernel whose update ends the run).

    Parameters
    ----------
    group
        ``"kernel"`` (by name, all phases together), ``"layer"``, ``"role"``
        (the same kernel across repeated layers, ``block.*.qkv``), or
        ``"auto"``: by kernel when there are at most ``top``, else by role.
    top
        Rows kept, by total time; the rest are summed into one "other" row.
    """
    names = {r.name for r in result.records}
    if group == "auto":
        group = "kernel" if len(names) <= top else "role"
    keyf = {"kernel": lambda r: r.name, "layer": lambda r: r.layer, "role": lambda r: _role(r.name)}[group]
    steps = max(len(result.steps), 1)
    acc: dict[str, dict[str, float]] = defaultdict(lambda: {"compute_s": 0.0, "stall_s": 0.0, "update_s": 0.0})
    members: dict[str, set[str]] = defaultdict(set)
    for r in result.records:
        compute, stall = _wafer_seconds(r)
        blocks = result.stands_for(r)  # with layer folding, a block's records count for the folded ones too
        for layer in blocks:
            name = layer + r.name[len(r.layer):] if r.name.startswith(f"{r.layer}.") else r.name
            k = {"kernel": name, "layer": layer}.get(group, keyf(r))
            members[k].add(name)
            n = r.repeats / steps / len(blocks)  # a folded run's repeated micro-batch counts once per copy
            acc[k]["compute_s"] += n * compute
            acc[k]["stall_s"] += n * stall
            if r.where != "wafer":
                acc[k]["update_s"] += n * (r.end_s - r.start_s)
    rows: list[dict[str, Any]] = [
        {"name": k, "kernels": len(members[k]), **v, "total_s": sum(v.values())} for k, v in acc.items()
    ]
    rows.sort(key=lambda d: (-d["total_s"], d["name"]))
    if len(rows) > top:
        rest = rows[top - 1:]
        other = {"name": f"other ({len(rest)})", "kernels": sum(d["kernels"] for d in rest)}
        for f in ("compute_s", "stall_s", "update_s", "total_s"):
            other[f] = sum(d[f] for d in rest)
        rows = rows[: top - 1] + [other]
    return rows


def kernel_breakdown_figure(result: Result, group: str = "auto", top: int = 20) -> Figure:
    """Stacked horizontal bars of :func:`kernel_breakdown`."""
    rows = kernel_breakdown(result, group, top)
    scale, unit = _time_unit(max((d["total_s"] for d in rows), default=0.0))
    fig = Figure(figsize=(10, 1.6 + 0.3 * len(rows)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    labels = [d["name"] for d in rows][::-1]
    left = [0.0] * len(rows)
    parts = (("compute_s", "wafer compute", CAUSE_COLOURS["compute"]),
             ("stall_s", "wafer exposed stall", CAUSE_COLOURS["stream"]),
             ("update_s", "MemoryX update / accumulate (overlaps the wafer)", PHASE_COLOURS["update"]))
    for field, label, colour in parts:
        vals = [d[field] * scale for d in rows][::-1]
        ax.barh(labels, vals, left=left, color=colour, label=label)
        left = [a + b for a, b in zip(left, vals)]
    ax.set_xlabel(f"time per step ({unit})")
    by = "kernel" if all(d["kernels"] == 1 for d in rows if not d["name"].startswith("other")) else "kernel group"
    ax.set_title(f"{result.scenario.name}: time per {by} (all phases)")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.9 / (1.2 + 0.3 * len(rows))), fontsize="small",
              frameon=False, ncols=3)
    ax.grid(axis="x", alpha=0.3)
    return fig


def utilisation_figure(result: Result) -> Figure:
    """Busy fraction of every part over the run, as horizontal bars."""
    items = sorted(result.utilisation.items(), key=lambda kv: (kv[1], kv[0]))
    fig = Figure(figsize=(8, 1.2 + 0.32 * len(items)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    names = [k for k, _ in items]
    vals = [100 * v for _, v in items]
    bars = ax.barh(names, vals, color=["#e45756" if v >= 90 else "#4c78a8" for v in vals])
    ax.bar_label(bars, labels=[f"{v:.1f}%" for v in vals], padding=3, fontsize="small")
    ax.set_xlim(0, 112)
    ax.set_xlabel("busy fraction of the run (%)")
    ax.set_title(f"{result.scenario.name}: utilisation of each part")
    ax.legend(handles=[Patch(facecolor="#e45756", label="≥ 90% busy"), Patch(facecolor="#4c78a8", label="< 90%")],
              loc="lower right", fontsize="small")
    ax.grid(axis="x", alpha=0.3)
    return fig


def memory_figure(result: Result) -> Figure:
    """Memory footprints against capacity: MemoryX DRAM and flash, wafer SRAM."""
    m = result.memory
    rows: list[tuple[str, float, float, float]] = []  # label, used, reserved, capacity
    rows.append(("MemoryX DRAM", m.memoryx_dram_bytes, m.memoryx_staging_bytes, m.memoryx_dram_capacity_bytes))
    if m.memoryx_flash_capacity_bytes > 0:
        rows.append(("MemoryX flash", m.memoryx_flash_bytes, 0.0, m.memoryx_flash_capacity_bytes))
    rows.append(("wafer SRAM", m.wafer_sram_activation_bytes, m.wafer_sram_total_bytes - m.wafer_sram_available_bytes,
                 m.wafer_sram_total_bytes))
    fig = Figure(figsize=(8, 1.4 + 0.55 * len(rows)), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    labels = [r[0] for r in rows][::-1]
    used = [100 * r[1] / r[3] if r[3] else 0.0 for r in rows][::-1]
    reserved = [100 * r[2] / r[3] if r[3] else 0.0 for r in rows][::-1]
    ax.barh(labels, used, color="#4c78a8", label="used (weights + optimizer state; activations)")
    ax.barh(labels, reserved, left=used, color="#bab0ac", hatch="//",
            label="reserved (flash staging; SRAM for code and buffers)")
    for y, r in enumerate(rows[::-1]):
        # The same "of" as the summary: what is usable once the reserved part is set aside.
        total = f" ({fmt_bytes(r[3])} in all)" if r[2] > 0 else ""
        ax.text(101, y, f"{fmt_bytes(r[1])} of {fmt_bytes(r[3] - r[2])}{total}", va="center", fontsize="small")
    ax.axvline(100, color="black", linewidth=1)
    ax.set_xlim(0, 160)
    ax.set_xlabel("% of capacity")
    fig.suptitle(f"{result.scenario.name}: memory footprint against capacity")
    ax.set_title(f"micro-batch {m.micro_batch} x {m.micro_batches}, activation checkpointing "
                 f"{m.activation_checkpointing}", fontsize="small")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), fontsize="small", frameon=False, ncols=1)
    return fig


def wafers_figure(result: Result) -> Figure:
    """An unfolded run: each wafer's mean seconds per step, its compute and its idle time by cause (stacked)."""
    if not result.wafers:
        raise ValueError("the run folded its wafers (one stood for all): there is no per-wafer time to draw")
    wafers = result.wafers
    fig = Figure(figsize=(min(16, max(8, 4 + 0.12 * len(wafers))), 4.2), dpi=100, layout="constrained")
    ax = fig.add_subplot()
    x = [w.wafer for w in wafers]
    scale, unit = _time_unit(result.step_time_s)
    bottom = [0.0] * len(wafers)
    causes = [c for c in BREAKDOWN_CATEGORIES if any(w.breakdown_s.get(c, 0.0) > 0 for w in wafers)]
    for cause in causes:
        vals = [w.breakdown_s.get(cause, 0.0) * scale for w in wafers]
        ax.bar(x, vals, bottom=bottom, width=0.85, color=CAUSE_COLOURS.get(cause, _FALLBACK), label=cause)
        bottom = [b + v for b, v in zip(bottom, vals)]
    cut = [w.wafer for w in wafers if w.samples == 0]  # below a SwarmX node that is down (faults.nodes)
    if cut:
        ax.bar(cut, [result.step_time_s * scale] * len(cut), width=0.85, color="none", edgecolor="#999999",
               hatch="//", label="cut off (node down)")
    ax.axhline(result.step_time_s * scale, color="black", linewidth=1, linestyle="--", label="step time")
    ax.set_xlabel("wafer")
    ax.set_ylabel(f"seconds per step ({unit})")
    most = max(wafers, key=lambda w: (w.idle_s, -w.wafer))
    fig.suptitle(f"{result.scenario.name}: each wafer's step, its compute and what it waited for")
    ax.set_title(f"idle (not computing): {min(w.idle_s for w in wafers) / result.step_time_s:.0%} to "
                 f"{most.idle_s / result.step_time_s:.0%} of the step; most idle: wafer {most.wafer}",
                 fontsize="small")
    ax.legend(loc="lower right", fontsize="small", ncols=2)
    ax.grid(axis="y", alpha=0.3)
    return fig


#: What would make two saves of one figure differ, byte for byte: the date a vector format records, and the ids
#: an SVG gives its clip paths and patterns (random unless salted).
_UNDATED = {"svg": {"Date": None}, "pdf": {"CreationDate": None, "ModDate": None}}


def save_figure(fig: Figure, stem: str | Path, formats: Sequence[str] = ("png", "svg"), dpi: int = 100) -> list[Path]:
    """Write ``stem.<format>`` for each format atomically; return the paths.  The same figure gives the same bytes
    every time (no date; an SVG's ids salted with the file's name, so two figures of one page differ)."""
    out = []
    for fmt in formats:
        buf = io.BytesIO()
        with matplotlib.rc_context({"svg.hashsalt": f"wss-{Path(stem).name}"}):
            fig.savefig(buf, format=fmt, dpi=dpi, metadata=_UNDATED.get(fmt))
        out.append(atomic_write_bytes(Path(f"{stem}.{fmt}"), buf.getvalue()))
    return out


def plot_all(result: Result, outdir: str | Path, cluster: Any | None = None, step: int | None = None,
             formats: Sequence[str] = ("png", "svg"), top: int = 20) -> list[Path]:
    """Write timeline, kernels, utilisation and memory figures into ``outdir``; return the files written.

    The timeline drawn from a cluster's spans (every part, one row each) is ``timeline``; drawn from a
    saved Result's records alone (three rows) it is ``timeline_records``, so that plotting a result.json
    into the folder ``wss simulate --plots`` wrote never replaces the detailed chart with the coarse one.
    """
    outdir = Path(outdir)
    figures = {
        "timeline" if cluster is not None else "timeline_records": gantt_figure(result, cluster, step),
        "kernels": kernel_breakdown_figure(result, top=top),
        "utilisation": utilisation_figure(result),
        "memory": memory_figure(result),
    }
    if result.wafers:
        figures["wafers"] = wafers_figure(result)
    paths: list[Path] = []
    for name, fig in figures.items():
        paths += save_figure(fig, outdir / name, formats)
    return paths
