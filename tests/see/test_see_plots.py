"""Figures render without a display and are written as non-empty PNG and SVG files."""

from __future__ import annotations

from pathlib import Path

import pytest

import wss
from wss.model.simulate import simulate_detailed
from wss.views.plots import gantt_figure, kernel_breakdown, plot_all, save_figure, utilisation_figure

ROOT = Path(__file__).resolve().parents[2]
FC_MNIST = ROOT / "scenarios" / "fc_mnist.yaml"
REPEATED = {
    "name": "repeated",
    "workload": {"model": {"name": "m", "input": "features", "layers": [
        {"kind": "dense", "in_features": 512, "out_features": 512, "repeat": 12, "activation": "relu"}]}},
    "hardware": {"preset": "cs2-cluster", "wafers": 2},
    "training": {"global_batch": 16, "steps": 1},
}


@pytest.fixture(scope="module")
def fc_run():
    return simulate_detailed(FC_MNIST, record=True)


def _check_files(paths, names):
    assert sorted(p.name for p in paths) == sorted(f"{n}.{ext}" for n in names for ext in ("png", "svg"))
    for p in paths:
        data = p.read_bytes()
        assert len(data) > 1000, p
        if p.suffix == ".png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert b"<svg" in data[:2000]


def test_plot_all_from_cluster_spans(fc_run, tmp_path):
    result, cluster = fc_run
    paths = plot_all(result, tmp_path / "plots", cluster)
    _check_files(paths, ("timeline", "kernels", "utilisation", "memory"))
    assert not [p for p in (tmp_path / "plots").iterdir() if p.name.startswith(".")]  # no temp files left


def test_plot_all_from_result_records_only(fc_run, tmp_path):
    result, _ = fc_run
    loaded = wss.Result.load(result.save(tmp_path / "result.json"))
    paths = plot_all(loaded, tmp_path / "plots", formats=("png",))
    # the coarse timeline from records has its own name: it never replaces the one drawn from every part's spans
    assert sorted(p.name for p in paths) == ["kernels.png", "memory.png", "timeline_records.png", "utilisation.png"]


def test_gantt_rows_and_titles(fc_run):
    result, cluster = fc_run
    fig = gantt_figure(result, cluster, step=1)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert {"MemoryX weights out", "SwarmX l1 down", "wafer compute", "wafer stalls", "optimizer"} <= set(labels)
    assert "step 1" in ax.get_title()
    assert "(µs)" in ax.get_xlabel()
    assert ax.get_legend() is not None
    fig_records = gantt_figure(result, None)
    top_down = [t.get_text() for t in fig_records.axes[0].get_yticklabels()][::-1]
    assert top_down == ["wafer passes (phase)", "wafer passes (bound by)", "MemoryX optimizer"]
    with pytest.raises(ValueError, match="step 7"):
        gantt_figure(result, cluster, step=7)


def test_kernel_breakdown_groups_repeated_layers():
    result = wss.simulate(wss.load_scenario(REPEATED))
    by_kernel = kernel_breakdown(result, group="kernel", top=100)
    assert len(by_kernel) == 25  # 12 matmuls, 12 activations, the loss
    by_role = kernel_breakdown(result, group="auto", top=10)
    assert {d["name"] for d in by_role} == {"dense.*", "dense.*.relu", "dense.*.softmax_loss"}
    assert sum(d["total_s"] for d in by_role) == pytest.approx(sum(d["total_s"] for d in by_kernel), rel=1e-12)
    capped = kernel_breakdown(result, group="kernel", top=5)
    assert len(capped) == 5 and capped[-1]["name"] == "other (21)"
    assert sum(d["total_s"] for d in capped) == pytest.approx(sum(d["total_s"] for d in by_kernel), rel=1e-12)


def test_save_figure_formats(fc_run, tmp_path):
    result, _ = fc_run
    paths = save_figure(utilisation_figure(result), tmp_path / "u", formats=("png", "svg", "pdf"))
    assert [p.suffix for p in paths] == [".png", ".svg", ".pdf"]
    assert all(p.stat().st_size > 0 for p in paths)


def test_saved_figures_are_the_same_bytes_every_time(fc_run, tmp_path):
    """The same scenario gives the same plots, byte for byte (an SVG's clip-path ids were random, a PDF's date
    the moment it was written)."""
    result, cluster = fc_run
    one = plot_all(result, tmp_path / "one", cluster=cluster)
    two = plot_all(result, tmp_path / "two", cluster=cluster)
    assert [p.name for p in one] == [p.name for p in two] and any(p.suffix == ".svg" for p in one)
    assert [p.read_bytes() for p in one] == [p.read_bytes() for p in two]
    pdfs = [save_figure(utilisation_figure(result), tmp_path / name, formats=("pdf",))[0] for name in ("a", "b")]
    assert pdfs[0].read_bytes() == pdfs[1].read_bytes()


def test_memory_figure_says_what_the_summary_says(fc_run):
    """The SRAM bar's "of" is the usable SRAM, as in the summary's memory line (the total follows it)."""
    from wss.views.plots import memory_figure
    from wss.views.summary import fmt_bytes, format_result

    result = fc_run[0]
    m = result.memory
    texts = [t.get_text() for t in memory_figure(result).axes[0].texts]
    usable, total = fmt_bytes(m.wafer_sram_available_bytes), fmt_bytes(m.wafer_sram_total_bytes)
    expected = f"{fmt_bytes(m.wafer_sram_activation_bytes)} of {usable} ({total} in all)"
    assert expected in texts
    assert f"wafer SRAM {fmt_bytes(m.wafer_sram_activation_bytes)} of {usable}" in format_result(result)
