"""``wss diff A.json B.json``: two results side by side, through the real entry point, and the view behind it.

The two runs are FC-MNIST as shipped and with the wafer clock at 0.6x: a compute-bound step, so its
step time and compute grow by about 1/0.6 while the MemoryX state stays put.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import wss
from wss.cli import main
from wss.views.diff import MARK, MIN_STEP_FRACTION, compare_results, layer_seconds

ROOT = Path(__file__).resolve().parents[2]
FC_MNIST = ROOT / "scenarios" / "fc_mnist.yaml"


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, wss.Result, wss.Result]:
    folder = tmp_path_factory.mktemp("diff")
    scenario = wss.load_scenario(FC_MNIST)
    slow = wss.load_scenario(FC_MNIST, {"hardware.wafer.clock_Hz": 0.6 * scenario.hardware.wafer.clock_Hz})
    a, b = wss.simulate(scenario), wss.simulate(slow)
    return a.save(folder / "a.json"), b.save(folder / "b.json"), a, b


def _line(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if line.strip().startswith(name))


def test_diff_prints_both_runs_and_marks_what_moved(runs, capsys):
    pa, pb, a, b = runs
    assert main(["diff", str(pa), str(pb)]) == 0
    captured = capsys.readouterr()
    text = captured.out
    assert captured.err == ""
    assert text.startswith(f"A  {pa}  (fc-mnist)\nB  {pb}  (fc-mnist)\n")
    assert "scenario: hardware.wafer.clock_Hz: " in text
    step = _line(text, "step time")
    assert f"{b.step_time_s / a.step_time_s - 1:+.1%}" in step and step.endswith(f"  {MARK}")
    assert _line(text, "samples/s").endswith(MARK)
    state = _line(text, "MemoryX state")
    assert "0.0%" in state and not state.endswith(MARK)
    for section in ("step", "throughput", "breakdown", "pacing", "memory", "layer (wafer time per step)"):
        assert f"\n{section}\n" in text, section
    for layer in ("fc1", "fc2", "fc3"):
        assert _line(text, layer)
    assert text.rstrip().splitlines()[-1].endswith(f"rows changed by more than 5.0% (marked {MARK})")


def test_identical_results_flag_nothing(runs, capsys):
    pa, _, _, _ = runs
    assert main(["diff", str(pa), str(pa)]) == 0
    text = capsys.readouterr().out
    assert "scenario: the same" in text
    assert not any(line.rstrip().endswith(MARK) for line in text.splitlines()[:-1])
    assert text.rstrip().splitlines()[-1].startswith("0 of ")


def test_diff_json_is_one_document_with_every_row(runs, capsys):
    pa, pb, a, b = runs
    assert main(["diff", str(pa), str(pb), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"] == str(pa) and data["b"] == str(pb) and data["threshold"] == 0.05
    rows = {(r["section"], r["name"]): r for r in data["rows"]}
    step = rows[("step", "step time")]
    assert step["a"] == a.step_time_s and step["b"] == b.step_time_s
    assert step["change"] == pytest.approx(b.step_time_s / a.step_time_s - 1, rel=1e-12) and step["flagged"]
    assert rows[("breakdown", "compute")]["b"] == b.breakdown_s["compute"]
    assert rows[("pacing", "compute")]["a"] == a.pacing_s["compute"]
    assert rows[("memory", "MemoryX state")]["change"] == 0.0
    assert {name for section, name in rows if section == "layer"} == set(layer_seconds(a))
    assert data["flagged"] == sum(r["flagged"] for r in data["rows"])


def test_the_threshold_sets_what_is_marked(runs, capsys):
    pa, pb, _, _ = runs
    assert main(["diff", str(pa), str(pb), "--json", "--threshold", "10"]) == 0
    data = json.loads(capsys.readouterr().out)
    numeric_flagged = [r for r in data["rows"] if r["flagged"] and r["change"] is not None]
    assert numeric_flagged == []
    assert main(["diff", str(pa), str(pb), "--threshold", "0.6"]) == 0
    text = capsys.readouterr().out
    assert _line(text, "compute").endswith(MARK) and not _line(text, "step time").endswith(MARK)  # +67% vs +55%
    assert "by more than 60.0%" in text


def test_layers_are_capped_to_those_that_moved_most(runs, capsys):
    pa, pb, a, b = runs
    assert main(["diff", str(pa), str(pb), "--layers", "1"]) == 0
    text = capsys.readouterr().out
    la, lb = layer_seconds(a), layer_seconds(b)
    most = max(la, key=lambda n: abs(lb[n] - la[n]))
    shown = text.split("layer (wafer time per step)\n")[1].splitlines()
    assert shown[0].split()[0] == most
    assert shown[1] == f"  ... {len(la) - 1} more layers moved less (--layers 0 for all)"


def test_a_tiny_time_category_does_not_flag_noise(runs):
    _, _, run, _ = runs
    a = run.model_copy(update={"breakdown_s": {**run.breakdown_s, "optimizer": 0.0}})  # no optimizer wait
    tiny = MIN_STEP_FRACTION * a.step_time_s / 10
    b = a.model_copy(update={"breakdown_s": {**a.breakdown_s, "optimizer": tiny}})
    c = a.model_copy(update={"breakdown_s": {**a.breakdown_s, "optimizer": 100 * tiny}})
    row_b = next(r for r in compare_results(a, b).rows if (r.section, r.name) == ("breakdown", "optimizer"))
    row_c = next(r for r in compare_results(a, c).rows if (r.section, r.name) == ("breakdown", "optimizer"))
    assert not row_b.flagged and row_c.flagged


@pytest.mark.parametrize(("make", "message"), [
    (None, "no such file"),
    ('{"hello": 1}', "not a wss result"),
    ("not json at all", "not a wss result"),
])
def test_a_missing_file_or_not_a_result_is_exit_2(runs, tmp_path, capsys, make, message):
    pa, _, _, _ = runs
    other = tmp_path / "other.json"
    if make is not None:
        other.write_text(make)
    for argv in (["diff", str(pa), str(other)], ["diff", str(other), str(pa), "--json"]):
        assert main(argv) == 2
        captured = capsys.readouterr()
        assert captured.out == ""
        assert captured.err.startswith(f"error: {other}: {message}") and "Traceback" not in captured.err


@pytest.mark.parametrize("argv", [["--threshold", "-1"], ["--threshold", "nan"], ["--layers", "-2"]])
def test_bad_options_are_usage_errors(runs, argv, capsys):
    pa, pb, _, _ = runs
    with pytest.raises(SystemExit) as exc:
        main(["diff", str(pa), str(pb), *argv])
    assert exc.value.code == 2
    assert "Traceback" not in capsys.readouterr().err


def test_goodput_and_checkpoints_are_compared_when_a_run_has_failures():
    """A shorter restart raises the goodput and shortens the expected time to train; the checkpoint stays."""
    raw = {"name": "fa", "hardware": {"preset": "cs2-cluster", "wafers": 4}, "workload": {"model": "gpt3-125m"},
           "training": {"global_batch": 16, "seq_len": 512, "steps": 1},
           "faults": {"failures": {"mtbf_hours_per_wafer": 100, "restart_s": 600, "train_steps": 100000}}}
    a = wss.simulate(raw)
    b = wss.simulate(wss.load_scenario(raw, {"faults.failures.restart_s": 60}))
    rows = {r.name: r for r in compare_results(a, b, threshold=0.001).rows if r.section == "failures"}
    assert rows["goodput"].b > rows["goodput"].a and rows["goodput"].flagged
    assert rows["expected time to train"].b < rows["expected time to train"].a
    assert rows["checkpoint"].a == rows["checkpoint"].b and not rows["checkpoint"].flagged
    plain = wss.simulate({**raw, "faults": {}})
    assert not [r for r in compare_results(plain, plain).rows if r.section == "failures"]
