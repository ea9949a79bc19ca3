"""Figures of sweep DataFrames (from :func:`wss.studies.sweep.sweep`): scaling, sparsity, MemoryX bandwidth.

Each function takes the DataFrame and returns a :class:`matplotlib.figure.Figure`
drawn on an Agg canvas: no pyplot, no global state, no window.  Save with
``fig.savefig("scaling.png")``; in Jupyter, ``display(fig)`` shows it.  Only rows
with ``status == "ok"`` are drawn; one line per value of ``group``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, PercentFormatter

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.axes import Axes

__all__ = ["plot_scaling", "plot_sparsity", "plot_memoryx_bandwidth"]


def _figure(ncols: int, title: str) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(5.2 * ncols, 4.2), layout="constrained")
    FigureCanvasAgg(fig)
    axes = [fig.add_subplot(1, ncols, i + 1) for i in range(ncols)]
    fig.suptitle(title)
    return fig, axes


def _ok(df: pd.DataFrame, needed: Sequence[str]) -> pd.DataFrame:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise KeyError(f"the sweep frame has no column {', '.join(map(repr, missing))}")
    rows = df[df["status"] == "ok"] if "status" in df.columns else df
    return rows.dropna(subset=list(needed))


def _groups(df: pd.DataFrame, group: str | None) -> Iterator[tuple[str | None, pd.DataFrame]]:
    """(label, rows) per group value, in order of first appearance."""
    if group is None or group not in df.columns:
        yield None, df
        return
    for value in dict.fromkeys(df[group].tolist()):
        yield f"{value}", df[df[group] == value]


def _xy(rows: pd.DataFrame, x: str, y: str) -> tuple[np.ndarray, np.ndarray]:
    rows = rows.sort_values(x)
    return rows[x].to_numpy(dtype=float), rows[y].to_numpy(dtype=float)


def _legend(ax: Axes, title: str | None) -> None:
    if ax.get_legend_handles_labels()[0]:
        ax.legend(title=title, fontsize="small", title_fontsize="small")


def plot_scaling(
    df: pd.DataFrame, x: str = "wafers", group: str | None = "model", title: str | None = None
) -> Figure:
    """Speed-up and scaling efficiency against cluster size, one line per ``group``.

    Uses the sweep's ``speedup`` and ``efficiency`` columns (against the smallest
    cluster of each group).  Larger models stay near the ideal line to larger
    clusters because their per-layer weight streaming hides the fixed costs.
    """
    rows = _ok(df, [x, "speedup", "efficiency"])
    fig, (ax_s, ax_e) = _figure(2, title or "Cluster scaling (weight streaming, data parallel)")
    top = 1.0
    for label, part in _groups(rows, group):
        xs, sp = _xy(part, x, "speedup")
        _, eff = _xy(part, x, "efficiency")
        ax_s.plot(xs, sp, marker="o", label=label)
        ax_e.plot(xs, eff, marker="o", label=label)
        if len(xs):
            top = max(top, xs.max() / xs.min())
    if len(rows):
        lo, hi = float(rows[x].min()), float(rows[x].max())
        ax_s.plot([lo, hi], [1.0, hi / lo], "k--", lw=1, label="linear (ideal)")
    for ax in (ax_s, ax_e):
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("CS-2 systems in the cluster (wafers)")
        ax.grid(True, which="both", alpha=0.3)
    ax_s.set_yscale("log", base=2)
    ax_s.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_s.set_ylabel("speed-up over the smallest cluster (x)")
    ax_s.set_title("Throughput speed-up")
    ax_e.set_ylim(0, 1.05)
    ax_e.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax_e.set_ylabel("scaling efficiency (speed-up / wafer ratio, %)")
    ax_e.set_title("Scaling efficiency")
    _legend(ax_s, group)
    _legend(ax_e, group)
    return fig


def plot_sparsity(
    df: pd.DataFrame, x: str = "sparsity", group: str | None = "model", title: str | None = None
) -> Figure:
    """Step time and speed-up over the densest point against weight sparsity, one line per ``group``.

    The dotted line is the weight-bound ideal ``1 / (1 - sparsity)``; the simulated
    speed-up falls below it and saturates (per-output-feature overhead and the
    dense non-weight work do not shrink with sparsity).
    """
    rows = _ok(df, [x, "step_time_s"])
    fig, (ax_t, ax_s) = _figure(2, title or "Unstructured weight sparsity")
    for label, part in _groups(rows, group):
        xs, t = _xy(part, x, "step_time_s")
        ax_t.plot(xs, t, marker="o", label=label)
        if len(xs):
            ax_s.plot(xs, t[0] / t, marker="o", label=label)
    if len(rows):
        grid = np.linspace(float(rows[x].min()), float(rows[x].max()), 200)
        ideal = (1 - grid[0]) / (1 - grid)
        ax_s.plot(grid, ideal, "k:", lw=1, label="ideal 1/(1-s)")
    for ax in (ax_t, ax_s):
        ax.set_xlabel("weight sparsity (fraction of zero weights)")
        ax.xaxis.set_major_formatter(PercentFormatter(1.0))
        ax.grid(True, which="both", alpha=0.3)
    ax_t.set_yscale("log")
    ax_t.set_ylabel("step time (s)")
    ax_t.set_title("Step time")
    ax_s.set_yscale("log")
    ax_s.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax_s.set_ylabel("speed-up over the densest point (x)")
    ax_s.set_title("Speed-up saturates")
    _legend(ax_t, group)
    _legend(ax_s, group)
    return fig


def plot_memoryx_bandwidth(
    df: pd.DataFrame,
    x: str = "hardware.memoryx.flash_read_bandwidth_Bps",
    group: str | None = None,
    stalls: Sequence[str] = ("stream", "flash"),
    title: str | None = None,
) -> Figure:
    """Exposed stall and step time against a MemoryX bandwidth (bytes/s per node), one line per ``group``.

    The stall is the sum of the step-time breakdown categories ``stalls``
    (waiting for weights from the links/MemoryX and for flash prefetch by
    default): the time the wafer sits idle because MemoryX cannot keep up.
    """
    cols = [f"breakdown_{c}_s" for c in stalls]
    rows = _ok(df, [x, "step_time_s", *cols])
    fig, (ax_st, ax_t) = _figure(2, title or "MemoryX bandwidth against stall")
    for label, part in _groups(rows, group):
        part = part.assign(_stall=part[cols].sum(axis=1))
        xs, stall = _xy(part, x, "_stall")
        _, t = _xy(part, x, "step_time_s")
        ax_st.plot(xs / 1e9, stall, marker="o", label=label)
        ax_t.plot(xs / 1e9, t, marker="o", label=label)
    name = x.rsplit(".", 1)[-1].removesuffix("_Bps").replace("_", " ")
    for ax in (ax_st, ax_t):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel(f"MemoryX {name} per node (GB/s)")
        ax.grid(True, which="both", alpha=0.3)
    ax_st.set_ylabel(f"exposed stall per step (s): {' + '.join(stalls)}")
    ax_st.set_title("Wafer waiting on MemoryX")
    ax_t.set_ylabel("step time (s)")
    ax_t.set_title("Step time")
    ax_t.set_yscale("log")
    _legend(ax_st, group)
    _legend(ax_t, group)
    return fig
