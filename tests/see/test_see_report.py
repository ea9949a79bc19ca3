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
    assert all(tuple(r) == (*COLUMNS, "stands_for") for r in rows)  # stands_for: the blocks it counts for
    assert [r["start_s"] for r in rows] == sorted(r["start_s"] for r in rows)
    wafer = [r for r in rows if r["where"] == "wafer"]
    mx = [r for r in rows if r["where"] == "memoryx"]
    assert {r["phase"] for r in wafer} == {"forward", "backward"}
    assert {r["phase"] for r in mx} == {"norm", "update"}  # fc_mnist clips: a norm job, then the update
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
                                                             ("memoryx", "norm"), ("memoryx", "update")}
    assert group_rows(rows, "pass") == rows
    with pytest.raises(ValueError):
        group_rows(rows, "role")
    text = format_table(by_phase, limit=0, group="phase")
    assert text.splitlines()[0].split()[:4] == ["where", "phase", "kernels", "passes"]
    assert table_csv(by_kernel, "kernel").splitlines()[0] == ",".join(GROUP_COLUMNS)
    assert "per step, from the records: compute" in format_totals(result)


def test_layer_groups_sum_their_kernels(result):
    from wss.views.report import GROUP_COLUMNS, group_rows

    rows = kernel_table(result)
    steps = len(result.steps)
    by_layer = group_rows(rows, "layer", steps=steps)
    by_kernel = group_rows(rows, "kernel", steps=steps)
    assert all(tuple(g) == GROUP_COLUMNS for g in by_layer)
    assert len({(g["where"], g["layer"]) for g in by_layer}) == len(by_layer)
    for g in by_layer:
        members = [k for k in by_kernel if (k["where"], k["layer"]) == (g["where"], g["layer"])]
        assert members, g
        assert g["passes"] == sum(k["passes"] for k in members)
        assert g["duration_s"] == pytest.approx(sum(k["duration_s"] for k in members), rel=1e-12)
        assert g["kernel"] == (members[0]["kernel"] if len(members) == 1 else f"{len(members)} kernels")
    text = format_table(by_layer, limit=0, group="layer")
    assert text.splitlines()[0].split()[:4] == ["where", "layer", "kernels", "phases"]


def test_a_block_layer_groups_its_matmuls():
    result = wss.simulate(wss.load_scenario(ROOT / "scenarios" / "bert_large.yaml",
                                            overrides={"workload.model.layers.1.repeat": 2, "training.steps": 1}))
    from wss.views.report import group_rows

    rows = kernel_table(result)
    by_layer = group_rows(rows, "layer", steps=1)
    block = next(g for g in by_layer if g["where"] == "wafer" and g["layer"] == "block.0")
    kernels = {r["kernel"] for r in rows if r["where"] == "wafer" and r["layer"] == "block.0"}
    assert {f"block.0.{m}" for m in ("qkv", "attn_out", "ffn_up", "ffn_down")} <= kernels
    assert block["kernel"] == f"{len(kernels)} kernels" and {"forward", "backward"} <= set(block["phase"].split("+"))
    assert block["duration_s"] == pytest.approx(
        sum(r["duration_s"] * r["repeats"] for r in rows if r["where"] == "wafer" and r["layer"] == "block.0"))


def test_records_as_a_dataframe(result):
    df = result.to_pandas()
    assert list(df.columns) == [*result.to_records()[0], "blocks"] and (df["blocks"] == 1).all()
    assert len(df) == len(result.records)
    assert str(df["step"].dtype) == "int64" and str(df["repeats"].dtype) == "int64"
    assert str(df["start_s"].dtype) == "float64" and str(df["compute_s"].dtype) == "float64"
    assert str(df["where"].dtype) == "category" and set(df["where"].cat.categories) == {"wafer", "memoryx"}
    assert df["name"].tolist() == [r.name for r in result.records]
    assert df.attrs == {"scenario": result.scenario.name, "steps": len(result.steps),
                        "step_time_s": result.step_time_s}


def test_to_pandas_imports_pandas_only_when_called(result, tmp_path):
    import json
    import subprocess
    import sys

    path = result.save(tmp_path / "result.json")
    code = ("import json, sys, wss\n"
            "r = wss.Result.load(sys.argv[1])\n"
            "before = 'pandas' in sys.modules\n"
            "df = r.to_pandas()\n"
            "print(json.dumps([before, 'pandas' in sys.modules, len(df)]))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [False, True, len(result.records)]
