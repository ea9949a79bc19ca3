"""``wss sweep`` through ``wss.sweep_cli`` (own argparse) and, once wired, the real ``wss`` entry point."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
import pytest

from wss.cli import main
from wss.cli import sweep as sweep_cli
from wss.studies.sweep import SweepError


def run_cli(argv: list[str]) -> int:
    """``wss sweep ...`` in-process through the real entry point."""
    return main([str(a) for a in argv])


def test_parse_vary_reads_yaml_scalars():
    vary = sweep_cli.parse_vary(["hardware.wafers=1,2,4", "workload.model=gpt3-1.3b,gpt3-6.7b", "x.bw=1e11,2.5e10"])
    assert vary == {"hardware.wafers": [1, 2, 4], "workload.model": ["gpt3-1.3b", "gpt3-6.7b"], "x.bw": [1e11, 2.5e10]}
    assert sweep_cli.parse_vary(['a=[1, 2],"x,y"']) == {"a": [[1, 2], "x,y"]}


@pytest.mark.parametrize("item", ["hardware.wafers", "=1,2", "a=", "a=1,,2"])
def test_parse_vary_rejects_malformed(item):
    with pytest.raises(SweepError):
        sweep_cli.parse_vary([item])


def test_csv_output_table_and_cache(scenarios, tmp_path, capsys):
    out = tmp_path / "results.csv"
    argv = ["sweep", str(scenarios / "fc_mnist.yaml"), "--vary", "hardware.wafers=1,2,4",
            "--vary", "training.global_batch=16,32,64", "--zip", "-o", str(out), "--executor", "serial"]
    assert run_cli(argv) == 0
    printed = capsys.readouterr()
    assert printed.err == ""  # no progress line when stderr is not a terminal
    assert "hardware.wafers" in printed.out and "speedup" in printed.out and "3 points: 3 ok" in printed.out
    df = pd.read_csv(out)
    assert df["hardware.wafers"].tolist() == [1, 2, 4] and df["training.global_batch"].tolist() == [16, 32, 64]
    assert (df["status"] == "ok").all() and (df["step_time_s"] > 0).all()
    assert len(list((tmp_path / "results.csv.points").glob("*.json"))) == 3
    assert run_cli(argv) == 0
    assert "3 from cache" in capsys.readouterr().out


def test_parquet_output_with_error_rows(scenarios, tmp_path, capsys):
    import pyarrow  # noqa: F401  (in the [test] extra: without it this test fails, never skips)
    out = tmp_path / "sub" / "results.parquet"
    cache = tmp_path / "points"
    argv = ["sweep", str(scenarios / "fc_mnist.yaml"), "--vary", "workload.model=fc-mnist,no-such-model",
            "--set", "training.steps=1", "-o", str(out), "--cache", str(cache), "--workers", "2"]
    assert run_cli(argv) == 0
    df = pd.read_parquet(out)
    assert df["status"].tolist() == ["ok", "error"]
    assert "no-such-model" in df["error"][1]
    printed = capsys.readouterr().out
    assert "no-such-model" in printed
    first_line = df["error"][1].splitlines()[0]
    assert len(first_line) > 60 and first_line in printed  # the whole line, suggestion and all, not cut short
    assert len(list(cache.glob("*.json"))) == 1
    assert not (tmp_path / "sub" / "results.parquet.points").exists()


def test_failed_points_exit_non_zero_and_say_how_many(scenarios, tmp_path, capsys, monkeypatch):
    """A point that raises unexpectedly (a model bug, a dead worker) fails the command, with the count."""
    import wss.model.simulate

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug in the model")

    monkeypatch.setattr(wss.model.simulate, "simulate", broken)
    argv = ["sweep", str(scenarios / "fc_mnist.yaml"), "--vary", "hardware.wafers=1,2", "--executor", "serial"]
    assert run_cli(argv) == 1
    printed = capsys.readouterr()
    assert "RuntimeError: a bug in the model" in printed.out and "2 points: 0 ok, 0 error, 2 failed" in printed.out
    assert printed.err.strip() == ("error: 2 of 2 points failed unexpectedly (see the error column); re-run to "
                                   "retry them")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--vary", "hardware.wafers=1,2", "--vary", "workload.sparsity=0", "--zip"], "equal length"),
        (["--vary", "hardware.wafers"], "KEY=V1,V2"),
        (["--vary", "hardware.wafers=1", "-o", "results.xlsx"], ".csv or .parquet"),
        (["--vary", "hardware.wafers=1", "--address", "tcp://127.0.0.1:1"], "needs --executor dask"),
        (["--vary", "hardware.wafers=1", "--set", "nonsense"], "dotted.key=value"),
        (["--vary", "hardware.wafers=1,2", "--baseline", "workload.sparsity"], "not a varied key"),
    ],
)
def test_bad_input_exits_2_with_one_message(scenarios, extra, message, capsys):
    assert run_cli(["sweep", str(scenarios / "fc_mnist.yaml"), *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err


def test_baseline_flag_sets_the_speedup_reference(scenarios, tmp_path):
    out = tmp_path / "r.csv"
    argv = ["sweep", str(scenarios / "fc_mnist.yaml"), "--executor", "serial", "--quiet", "-o", str(out),
            "--vary", "workload.sparsity=0,0.9", "--vary", "training.global_batch=64,128"]
    assert run_cli([*argv, "--baseline", "training.global_batch"]) == 0
    df = pd.read_csv(out)
    refs = df[df["training.global_batch"] == 64]
    assert refs["speedup"].tolist() == [1.0, 1.0]  # one reference per sparsity, not the dense point
    assert (df[df["training.global_batch"] == 128]["speedup"] != 1.0).all()


def test_missing_scenario_exits_2(tmp_path, capsys):
    assert run_cli(["sweep", str(tmp_path / "nope.yaml"), "--vary", "hardware.wafers=1"]) == 2
    assert "no such scenario file" in capsys.readouterr().err


def test_real_entry_point(scenarios, tmp_path):
    """``wss sweep`` in a fresh interpreter with a pool of two workers.  The CSV table only: the Parquet one,
    with the same pool, is test_parquet_output_with_error_rows's."""
    out = tmp_path / "results.csv"
    code = "import sys; from wss.cli import main; sys.exit(main(sys.argv[1:]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, "sweep", str(scenarios / "fc_mnist.yaml"),
         "--vary", "hardware.wafers=1,2", "--vary", "workload.sparsity=0,0.5", "-o", str(out), "--workers", "2"],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    df = pd.read_csv(out)
    assert len(df) == 4 and (df["status"] == "ok").all()
    assert "4 points: 4 ok" in proc.stdout
