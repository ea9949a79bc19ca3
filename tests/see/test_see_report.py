"""Per-kernel table: rows, text and CSV."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import wss
from wss.views.report import COLUMNS, format_table, kernel_table, sort_rows, table_csv, write_csv

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def result():
    return wss.simulate(ROOT / "scenarios" / "fc_mnist.yaml")


def test_rows_cover_every_record(result):
    rows = kernel_table(result)
    assert len(rows) == len(result.records)
    assert all(tuple(r) == COLUMNS for r in rows)
    assert [r["start_s"] for r in rows] == sorted(r["start_s"] for r in rows)
    wafer = [r for r in rows if r["where"] == "wafer"]
    mx = [r for r in rows if r["where"] == "memoryx"]
    assert {r["phase"] for r in wafer} == {"forward", "backward"}
    assert {r["phase"] for r in mx} == {"update"}
    fc1 = next(r for r in wafer if r["kernel"] == "fc1" and r["phase"] == "forward")
    assert fc1["bytes_in"] > 0 and fc1["cycles"] > 0
    assert fc1["duration_s"] == pytest.approx(fc1["end_s"] - fc1["start_s"], rel=1e-12)


def test_sorting(result):
    rows = kernel_table(result)
    by_stall = sort_rows(rows, "stall")
    assert by_stall[0]["exposed_stall_s"] == max(r["exposed_stall_s"] for r in rows)
    by_dur = sort_rows(rows, "duration")
    assert by_dur[0]["duration_s"] == max(r["duration_s"] for r in rows)
    with pytest.raises(ValueError):
        sort_rows(rows, "name")


def test_text_table(result):
    rows = kernel_table(result)
    text = format_table(rows, limit=5)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["step", "mb", "kernel", "phase"]
    assert set(lines[1]) <= {"-", " "}
    assert len(lines) == 2 + 5 + 1
    assert lines[-1].startswith(f"... {len(rows) - 5} more rows")
    assert len(format_table(rows, limit=0).splitlines()) == 2 + len(rows)


def test_csv_round_trip(result, tmp_path):
    rows = kernel_table(result)
    path = write_csv(tmp_path / "out" / "kernels.csv", rows)
    with path.open(newline="", encoding="utf-8") as fh:
        back = list(csv.DictReader(fh))
    assert len(back) == len(rows)
    assert tuple(back[0]) == COLUMNS
    for a, b in zip(rows, back):
        assert float(b["start_s"]) == a["start_s"]  # full precision
        assert b["kernel"] == a["kernel"] and int(b["step"]) == a["step"]
    assert table_csv(rows) == path.read_text(encoding="utf-8")


def test_grouped_tables_and_totals(result):
    from wss.views.report import GROUP_COLUMNS, format_totals, group_rows

    rows = kernel_table(result)
    steps = len(result.steps)
    by_kernel = group_rows(rows, "kernel", steps=steps)
    assert all(tuple(g) == GROUP_COLUMNS for g in by_kernel)
    fc1 = next(g for g in by_kernel if g["where"] == "wafer" and g["kernel"] == "fc1")
    assert fc1["phase"] == "forward+backward" and fc1["passes"] == 2 * steps
    assert fc1["bytes_in"] == pytest.approx(sum(r["bytes_in"] for r in rows if r["kernel"] == "fc1"
                                                and r["where"] == "wafer") / steps, rel=1e-12)
    by_phase = group_rows(rows, "phase", steps=steps)
    assert {(g["where"], g["phase"]) for g in by_phase} == {("wafer", "forward"), ("wafer", "backward"),
                                                             ("memoryx", "update")}
    assert group_rows(rows, "pass") == rows
    with pytest.raises(ValueError):
        group_rows(rows, "layer")
    text = format_table(by_phase, limit=0, group="phase")
    assert text.splitlines()[0].split()[:4] == ["where", "phase", "kernels", "passes"]
    assert table_csv(by_kernel, "kernel").splitlines()[0] == ",".join(GROUP_COLUMNS)
    assert "per step, from the records: compute" in format_totals(result)
