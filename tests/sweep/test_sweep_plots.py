"""Figures of sweep frames: titles, labelled axes with units, legends, and they render."""

from __future__ import annotations

import io

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from wss.studies.sweep import add_scaling, sweep
from wss.views.sweep_plots import plot_memoryx_bandwidth, plot_scaling, plot_sparsity


def scaling_frame():
    rows = []
    for model, per_doubling in (("small", 1.6), ("big", 1.98)):
        for k, w in enumerate([1, 2, 4, 8]):
            rows.append({"model": model, "wafers": w, "tokens_per_s": 100 * per_doubling**k, "status": "ok"})
    rows.append({"model": "big", "wafers": 16, "tokens_per_s": float("nan"), "status": "error"})
    return add_scaling(pd.DataFrame(rows), by="model")


def assert_complete(fig, n_axes=2):
    assert isinstance(fig.canvas, FigureCanvasAgg)
    assert fig.get_suptitle()
    axes = fig.get_axes()
    assert len(axes) == n_axes
    for ax in axes:
        assert ax.get_title() and ax.get_xlabel() and ax.get_ylabel()
        assert ax.get_legend() is not None
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=40)
    assert png.getvalue().startswith(b"\x89PNG")


def test_scaling_figure():
    fig = plot_scaling(scaling_frame())
    assert_complete(fig)
    speedup_ax, efficiency_ax = fig.get_axes()
    assert "wafers" in speedup_ax.get_xlabel() and "%" in efficiency_ax.get_ylabel()
    labels = [t.get_text() for t in speedup_ax.get_legend().get_texts()]
    assert labels == ["small", "big", "linear (ideal)"]
    assert len(speedup_ax.get_lines()[1].get_xdata()) == 4  # the error row is not drawn


def test_sparsity_figure():
    df = pd.DataFrame({
        "model": ["m"] * 4,
        "sparsity": [0.0, 0.5, 0.9, 0.99],
        "step_time_s": [1.0, 0.9, 0.3, 0.2],
        "status": ["ok"] * 4,
    })
    fig = plot_sparsity(df)
    assert_complete(fig)
    time_ax, speedup_ax = fig.get_axes()
    assert "(s)" in time_ax.get_ylabel()
    assert list(speedup_ax.get_lines()[0].get_ydata()) == pytest.approx([1.0, 1 / 0.9, 1 / 0.3, 5.0])


def test_memoryx_figure_from_a_real_sweep(base):
    df = sweep(
        base,
        {"workload.sparsity": [0.0, 0.5], "hardware.memoryx.network_bandwidth_Bps": [1e8, 1e9, 1e10]},
        executor="serial",
    )
    fig = plot_memoryx_bandwidth(df, x="hardware.memoryx.network_bandwidth_Bps", group="workload.sparsity")
    assert_complete(fig)
    stall_ax, _ = fig.get_axes()
    assert "GB/s" in stall_ax.get_xlabel() and "network bandwidth" in stall_ax.get_xlabel()
    xs = stall_ax.get_lines()[0].get_xdata()
    assert list(xs) == pytest.approx([0.1, 1.0, 10.0])
    stalls = stall_ax.get_lines()[0].get_ydata()
    assert stalls[0] >= stalls[-1]  # less bandwidth, more waiting


def test_missing_columns_are_named():
    with pytest.raises(KeyError, match="speedup"):
        plot_scaling(pd.DataFrame({"wafers": [1], "status": ["ok"]}))
