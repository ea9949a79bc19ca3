"""The fuzzer (``benchmarks/fuzz_scenarios.py``) beyond validate, simulate and the API: faults, bounds, the
other commands that take a scenario, and mutated result files.

A fast sample of each runs here; ``nice python benchmarks/fuzz_scenarios.py --cases 10000`` runs them all
(``--channels`` picks some).  Every case must end accepted (a finite, positive step time where there is
one) or cleanly rejected (one ``error:`` line, exit 2); a traceback, a hang or nonsense fails.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings

REPO = Path(__file__).resolve().parents[2]
if "fuzz_scenarios" in sys.modules:
    fuzz = sys.modules["fuzz_scenarios"]
else:
    _spec = importlib.util.spec_from_file_location("fuzz_scenarios", REPO / "benchmarks" / "fuzz_scenarios.py")
    assert _spec is not None and _spec.loader is not None
    fuzz = importlib.util.module_from_spec(_spec)
    sys.modules["fuzz_scenarios"] = fuzz
    _spec.loader.exec_module(fuzz)

#: Seconds one case may take (a plot of a mutated result takes a few seconds, a size two simulations).
CASE_TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def worker():
    w = fuzz.Worker(CASE_TIMEOUT_S)
    yield w
    w.close()


_FAST = dict(database=None, deadline=None, phases=[Phase.generate], derandomize=True,
             suppress_health_check=list(HealthCheck))


@settings(max_examples=15, **_FAST)
@given(case=fuzz.strategy(fuzz.COMMAND_CHANNELS))
def test_estimate_size_and_sweep_accept_or_cleanly_reject(worker, case):
    kind, detail = worker.run(case)
    assert kind in fuzz.GOOD, f"{kind}: {detail}"


def _result_case(channel: str, **over) -> dict:
    return {"channel": channel, "base": "fc_mnist.yaml", "mutations": [], "shape": None, "text_mutation": "none",
            "options": [], "seed": 0, **over}


@settings(max_examples=12, **{**_FAST, "phases": [Phase.explicit, Phase.generate]})
@given(case=fuzz.strategy(fuzz.RESULT_CHANNELS))
@example(case=_result_case("plot", base="bert_large.yaml"))
def test_mutated_results_through_report_diff_plot_and_check(worker, case):
    """12 drawn cases reach every reader (report, diff, plot, check), both results (FC-MNIST's and BERT-large's)
    and both outcomes (accepted, rejected); 25 drew mostly more of the same, at twice the worker's CPU.  The
    BERT-large result plotted whole (the example) is a case the draws may miss: the most the readers take in."""
    kind, detail = worker.run(case)
    assert kind in fuzz.GOOD, f"{kind}: {detail}"


@pytest.mark.parametrize("channel", fuzz.RESULT_CHANNELS)
@pytest.mark.parametrize("text_mutation", [m for m in fuzz.RESULT_TEXT if m != "garbage"])  # junk in a string is fine
def test_every_damaged_file_is_refused_in_one_line_by_every_reader(worker, channel, text_mutation):
    start = time.perf_counter()
    kind, detail = worker.run(_result_case(channel, text_mutation=text_mutation))
    assert kind == "rejected", detail
    assert time.perf_counter() - start < 30.0


@pytest.mark.parametrize("channel", ["report", "diff", "plot"])
@pytest.mark.parametrize("shape", fuzz.RESULT_SHAPES)
def test_every_result_shape_is_read_or_refused(worker, channel, shape):
    kind, detail = worker.run(_result_case(channel, shape=shape))
    assert kind == ("rejected" if shape == "empty_steps" else "accepted"), detail


@pytest.mark.parametrize("channel", fuzz.RESULT_CHANNELS)
def test_the_intact_files_are_accepted(worker, channel):
    """The baseline of the classes: the unmutated result (and baseline) pass through every reader."""
    assert worker.run(_result_case(channel))[0] == "accepted"


@pytest.mark.parametrize("channel", ["report", "diff", "plot"])
@pytest.mark.parametrize("field", ["energy", "plan_choice", "numerics"])
def test_a_documented_null_in_a_result_is_accepted(worker, channel, field):
    """``null`` is what these optional fields hold when a run has no such data: a valid result."""
    case = _result_case(channel, mutations=[("set", _shallow_index(field), None, True)])
    assert worker.run(case) == ("accepted", "exit 0")


def _shallow_index(field: str) -> int:
    """The pick that makes a focused mutation land on top-level ``field`` of the fc_mnist result."""
    doc, _ = fuzz._result_docs("fc_mnist.yaml")
    shallow = [p for p in fuzz._paths(doc) if 0 < len(p) <= 3 and p[0] not in ("scenario", "records")]
    return shallow.index((field,))


@pytest.mark.parametrize("faults", [
    {"jitter": None, "flash": None, "failures": None},
    {"failures": {"mtbf_hours_per_wafer": 1000.0, "checkpoint_every_steps": "auto", "restart_s": 60}},
    {"failures": {"mtbf_hours_per_wafer": None, "checkpoint_every_steps": 5, "restart_s": 60}},
    {"links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 1e-3}], "shards": [{"shard": 0, "dram_factor": 1e3}]},
])
@pytest.mark.parametrize("channel", ["validate", "simulate", "api", "estimate"])
def test_documented_nulls_and_auto_in_faults_are_accepted(worker, channel, faults):
    case = _scenario_case(channel, faults)
    kind, detail = worker.run(case)
    assert kind == "accepted", detail


@pytest.mark.parametrize("faults", [
    {"links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 5e-324}]},
    {"shards": [{"shard": 0, "dram_factor": 5e-324}]},
    {"stragglers": [{"wafer": 1, "slowdown": 1e-300}]},
    {"jitter": {"sigma": 0}},
    {"failures": {"checkpoint_every_steps": "auto", "restart_s": 60}},
])
@pytest.mark.parametrize("channel", ["validate", "simulate", "api", "estimate", "sweep"])
def test_faults_out_of_range_are_rejected_by_every_command(worker, channel, faults):
    kind, detail = worker.run(_scenario_case(channel, faults))
    assert kind == "rejected", detail


def _scenario_case(channel: str, faults: dict) -> dict:
    import yaml

    data = yaml.safe_load((REPO / "scenarios" / "fc_mnist.yaml").read_text())
    data["faults"] = faults
    case = {"base": "fc_mnist.yaml", "channel": channel, "sets": [], "vary": [], "text_mutation": "none",
            "overrides": []}
    if channel == "api":
        return {**case, "data": data}
    return {**case, "text": yaml.safe_dump(data, sort_keys=False)}


def test_the_ranges_the_bounds_come_from_cover_faults_and_upper_bounds():
    keys = {key: (low, high) for key, low, high, _ in fuzz._ranges()}
    assert keys["faults.links.0.bandwidth_factor"] == (1e-3, 1e3)
    assert keys["faults.shards.0.dram_factor"] == (1e-3, 1e3)
    assert keys["hardware.wafers"][1] == 100_000 and keys["training.steps"][1] == 100_000


def test_size_and_sweep_outcomes_are_classed_by_what_ran(tmp_path):
    """Nulls in ``size --json`` (no target, no recommendation, no power figure) are answers, not nonsense;
    a sweep whose every point is invalid is a rejection; a point with a non-finite step is nonsense."""
    row = {"wafers": 1, "status": "ok", "step_time_s": 0.5, "days": 2.0, "energy_per_token_J": None, "error": ""}
    doc = {"target": None, "recommended": None, "reachable": None, "rows": [row]}
    assert fuzz._size_outcome(json.dumps(doc))[0] == "accepted"
    doc["rows"] = [{**row, "days": float("inf")}]
    assert fuzz._size_outcome(json.dumps(doc, allow_nan=True))[0] == "nonsense"
    table = tmp_path / "t.csv"
    table.write_text("status,step_time_s,error\nerror,,\"x.yaml: hardware.wafers: must be at least 1\"\n")
    assert fuzz._sweep_outcome(table) == ("rejected", "x.yaml: hardware.wafers: must be at least 1")
    table.write_text("status,step_time_s,error\nok,nan,\n")
    assert fuzz._sweep_outcome(table)[0] == "nonsense"
