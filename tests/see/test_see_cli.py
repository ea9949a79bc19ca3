"""wss plot / wss report / wss simulate --trace --plots --verdict, through see_cli's argparse wiring."""

from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

import pytest

import wss
from wss.cli.see import COMMANDS, SeeInputError, add_commands, after_simulate, extend_simulate, run, simulate
from wss.errors import WssError

ROOT = Path(__file__).resolve().parents[2]
FC_MNIST = ROOT / "scenarios" / "fc_mnist.yaml"


def _parser() -> argparse.ArgumentParser:
    """The wiring cli.py gets: plot and report sub-commands, simulate extended."""
    ap = argparse.ArgumentParser(prog="wss")
    sub = ap.add_subparsers(dest="command", required=True)
    sim = sub.add_parser("simulate")
    sim.add_argument("scenario", type=Path)
    sim.add_argument("--quiet", action="store_true")
    extend_simulate(sim)
    add_commands(sub)
    return ap


@pytest.fixture(scope="module")
def result_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("run") / "result.json"
    wss.simulate(FC_MNIST).save(path)
    return path


def _run(argv) -> tuple[int, str]:
    args = _parser().parse_args(argv)
    assert args.command in COMMANDS
    out = io.StringIO()
    return run(args, out), out.getvalue()


def test_plot_command(result_file, tmp_path):
    code, text = _run(["plot", str(result_file), "-o", str(tmp_path / "figs"), "--format", "png"])
    assert code == 0
    written = sorted(p.name for p in (tmp_path / "figs").iterdir())
    assert written == ["kernels.png", "memory.png", "timeline_records.png", "utilisation.png"]
    assert text.count("wrote ") == 4


def test_plot_default_folder_is_beside_the_result(result_file):
    code, _ = _run(["plot", str(result_file), "--step", "0", "--format", "svg", "--quiet"])
    assert code == 0
    assert (result_file.parent / "plots" / "timeline_records.svg").stat().st_size > 0


def test_report_command_table_and_csv(result_file, tmp_path):
    csv_path = tmp_path / "k.csv"
    code, text = _run(["report", str(result_file), "--limit", "3", "--sort", "stall", "--csv", str(csv_path)])
    assert code == 0
    lines = text.splitlines()
    assert lines[0].startswith("step")
    assert "more rows" in lines[5]
    assert lines[-1] == f"wrote {csv_path}"
    with csv_path.open(newline="", encoding="utf-8") as fh:
        assert len(list(csv.DictReader(fh))) == len(wss.Result.load(result_file).records)


def test_report_group_and_totals(result_file, tmp_path):
    csv_path = tmp_path / "phases.csv"
    code, text = _run(["report", str(result_file), "--group", "phase", "--csv", str(csv_path)])
    assert code == 0
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["where", "phase", "kernels"]
    assert lines[-2].startswith("per step, from the records: compute")
    with csv_path.open(newline="", encoding="utf-8") as fh:
        assert {r["phase"] for r in csv.DictReader(fh)} == {"forward", "backward", "norm", "update"}


def test_report_by_layer_and_group_alias(result_file, tmp_path, capsys):
    from wss.cli import main

    csv_path = tmp_path / "layers.csv"
    assert main(["report", str(result_file), "--by", "layer", "--limit", "0", "--csv", str(csv_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:4] == ["where", "layer", "kernels", "phases"]
    layers = {r.layer for r in wss.Result.load(result_file).records if r.where == "wafer"}
    assert {line.split()[1] for line in lines[2:] if line.startswith("wafer")} == layers
    with csv_path.open(newline="", encoding="utf-8") as fh:
        assert {r["layer"] for r in csv.DictReader(fh) if r["where"] == "wafer"} == layers
    outputs = []
    for option in ("--by", "--group"):
        assert main(["report", str(result_file), option, "kernel"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].split()[:3] == ["where", "kernel", "phases"]


def test_report_verdict(result_file):
    code, text = _run(["report", str(result_file), "--limit", "1", "--verdict"])
    assert code == 0
    assert "verdict: bound by wafer compute" in text
    assert "best: doubling the wafer clock would cut the step by" in text


@pytest.mark.parametrize(
    "argv, message",
    [
        (["report", "missing.json"], "no such file"),
        (["plot", "{bad}", "--step", "0"], "not a wss result"),
        (["plot", "{good}", "--step", "9"], "--step 9"),
        (["report", "{good}", "--limit", "-1"], "--limit -1"),
    ],
)
def test_bad_input_is_a_wss_error(argv, message, result_file, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"step_time_s": 1}), encoding="utf-8")
    argv = [a.format(bad=bad, good=result_file) for a in argv]
    with pytest.raises(SeeInputError, match=message.replace("-", r"\-")) as info:
        _run(argv)
    assert isinstance(info.value, WssError)


def test_simulate_with_trace_plots_and_verdict(tmp_path):
    args = _parser().parse_args(["simulate", str(FC_MNIST), "--trace", "--plots", str(tmp_path / "p"), "--verdict"])
    assert args.trace == "" and args.verdict
    scenario = wss.load_scenario(FC_MNIST)
    result, recorded = simulate(scenario, args)
    assert result.to_json() == wss.simulate(scenario).to_json()
    assert recorded is not None and recorded.cluster.memoryx.stream_spans  # spans were recorded for the trace
    out = io.StringIO()
    assert after_simulate(args, result, recorded, outdir=tmp_path, out=out) == 0
    text = out.getvalue()
    assert (tmp_path / "trace.json").stat().st_size > 0
    assert len(list((tmp_path / "p").glob("*.png"))) == 4
    assert "trace.json" in text and "figures in" in text and "verdict: bound by" in text


def test_a_run_whose_fold_check_fails_is_traced_in_full(tmp_path):
    # 8 micro-batches of one sample: the queues still differ at micro-batches 2 and 3, so the fold's check
    # fails and the run (recording or not) simulates every micro-batch.
    scenario = wss.load_scenario({
        "name": "folding",
        "workload": {"model": {"name": "m", "input": "features", "layers": [
            {"kind": "dense", "in_features": 1024, "out_features": 1024, "repeat": 2, "activation": "relu"}]}},
        "hardware": {"preset": "cs2-cluster", "wafers": 1},
        "training": {"global_batch": 8, "micro_batch": 1, "optimizer": "sgd", "steps": 1},
    })
    args = _parser().parse_args(["simulate", "x.yaml", "--trace", str(tmp_path / "t.json")])
    result, recorded = simulate(scenario, args)
    assert result.to_json() == wss.simulate(scenario).to_json()
    assert recorded is not None and recorded.result is result and recorded.cluster.folding.fold is None
    assert after_simulate(args, result, recorded, out=io.StringIO()) == 0
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert max(e["ts"] + e["dur"] for e in spans) <= result.total_time_s * 1e6 + 1e-2
    passes = {e["args"]["micro_batch"] for e in spans if e["name"].startswith("dense.0 forward")}
    assert passes == set(range(8))  # every micro-batch is in the trace
    assert not [e for e in spans if e["cat"] == "folded"]


def test_a_traced_run_of_folded_steps_is_one_run_with_the_plain_result(tmp_path, monkeypatch):
    """12 steps of FC-MNIST fold steps: --trace runs the scenario once, folded, and result.json is unchanged."""
    from wss.model import simulate as simulate_module
    from wss.model.simulate import would_fold

    scenario = wss.load_scenario(FC_MNIST, {"training.steps": 12})
    assert would_fold(scenario)
    runs = []
    real = simulate_module.run_cluster
    monkeypatch.setattr(simulate_module, "run_cluster", lambda *a, **k: runs.append(k) or real(*a, **k))
    args = _parser().parse_args(["simulate", "x.yaml", "--trace", str(tmp_path / "t.json")])
    result, recorded = simulate(scenario, args)
    assert [k["record"] for k in runs] == [True]
    assert recorded is not None and recorded.cluster.folding.step_fold is not None
    monkeypatch.undo()
    assert result.to_json() == wss.simulate(scenario).to_json()
    assert after_simulate(args, result, recorded, out=io.StringIO()) == 0
    doc = json.loads((tmp_path / "t.json").read_text(encoding="utf-8"))
    folded = {e["name"] for e in doc["traceEvents"] if e.get("cat") == "folded"}
    assert folded == {"x7 folded copies of step 3"}


def test_simulate_without_extras_records_nothing():
    args = _parser().parse_args(["simulate", str(FC_MNIST), "--quiet"])
    result, recorded = simulate(wss.load_scenario(FC_MNIST), args)
    assert recorded is None
    out = io.StringIO()
    assert after_simulate(args, result, recorded, out=out) == 0
    assert out.getvalue() == ""


def test_real_cli(result_file, tmp_path, capsys):
    """End to end through wss.cli: plot, report and simulate with every output."""
    from wss import cli

    with pytest.raises(SystemExit) as exc:
        cli.main(["plot", "--help"])
    assert exc.value.code == 0
    capsys.readouterr()
    assert cli.main(["report", str(result_file), "--limit", "2"]) == 0
    assert cli.main(["report", str(tmp_path / "nope.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    out = tmp_path / "sim"
    code = cli.main(["simulate", str(FC_MNIST), "-o", str(out), "--trace", "--plots", "--verdict", "--quiet"])
    assert code == 0
    for name in ("result.json", "trace.json", "plots/timeline.png"):
        assert (out / name).exists(), name


def test_plot_after_simulate_plots_keeps_the_detailed_timeline(tmp_path):
    """docs/timeline.md's own steps: ``simulate --plots`` then ``wss plot`` on the same folder used to replace
    the every-part timeline with the three-row one drawn from records."""
    from wss.cli import main

    out = tmp_path / "out"
    assert main(["simulate", str(FC_MNIST), "-o", str(out), "--plots", "--quiet"]) == 0
    detailed = (out / "plots" / "timeline.png").read_bytes()
    assert main(["plot", str(out / "result.json"), "--quiet"]) == 0
    assert (out / "plots" / "timeline.png").read_bytes() == detailed
    assert (out / "plots" / "timeline_records.png").stat().st_size > 0
