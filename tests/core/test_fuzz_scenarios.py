"""A fast subset of the scenario fuzzer (``benchmarks/fuzz_scenarios.py``): no tracebacks, no hangs, no nonsense.

Hypothesis draws mutated shipped scenarios (wrong types, unknown keys, extreme and non-finite numbers,
YAML bombs, huge repeat counts, bad overrides) and runs each through ``wss validate``, ``wss simulate``
or the Python API in a worker process with a time limit.  Every case must end accepted (with a finite,
positive step time) or cleanly rejected (a wss error, one short message).  The full run of 10,000
cases is ``WSS_SLOW=1 pytest -k fuzz_10000`` or ``nice python benchmarks/fuzz_scenarios.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest
from core_helpers import run_wss_here
from hypothesis import HealthCheck, Phase, given, settings

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("fuzz_scenarios", REPO / "benchmarks" / "fuzz_scenarios.py")
assert _spec is not None and _spec.loader is not None
fuzz = importlib.util.module_from_spec(_spec)
sys.modules["fuzz_scenarios"] = fuzz
_spec.loader.exec_module(fuzz)

#: Seconds one case may take here (the bases simulate in about a second; a hang would take forever).
CASE_TIMEOUT_S = 30.0
#: The alarm of the worker that must report a hang, and then still answer an ordinary case.  The hanging case
#: computes until it goes off (CPU seconds of the suite), and the ordinary one takes milliseconds.
HANG_TIMEOUT_S = 2.5


@pytest.fixture(scope="module")
def worker():
    w = fuzz.Worker(CASE_TIMEOUT_S)
    yield w
    w.close()


@settings(max_examples=40, database=None, deadline=None, phases=[Phase.generate], derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(case=fuzz._strategies())
def test_fuzzed_scenarios_are_accepted_or_cleanly_rejected(worker, case):
    kind, detail = worker.run(case)
    assert kind in fuzz.GOOD, f"{kind}: {detail}"


@pytest.mark.parametrize("text_mutation", ["laughs", "merge_bomb", "deep", "deep_map", "big_int", "list_doc", "empty"])
@pytest.mark.parametrize("channel", fuzz.CHANNELS)
def test_every_yaml_bomb_is_rejected_quickly_by_every_channel(worker, channel, text_mutation):
    case = {"base": "fc_mnist.yaml", "channel": channel, "sets": [], "overrides": [],
            "text_mutation": text_mutation, "text": fuzz._text(fuzz_base(), text_mutation, fuzz.random.Random(0))}
    start = time.perf_counter()
    kind, detail = worker.run(case)
    assert kind == "rejected", detail
    assert time.perf_counter() - start < 5.0


def fuzz_base() -> dict:
    import yaml

    return yaml.safe_load((REPO / "scenarios" / "fc_mnist.yaml").read_text())


def test_a_traceback_a_hang_and_nonsense_are_told_apart(worker, tmp_path):
    """The classifier itself: a case that raises, one that never ends, one with a bad step time."""
    assert fuzz._step_outcome(float("nan"))[0] == "nonsense"
    assert fuzz._step_outcome(None)[0] == "nonsense"
    assert fuzz._step_outcome(0.0)[0] == "nonsense"
    assert fuzz._step_outcome(1.5)[0] == "accepted"
    assert fuzz._classify_rejection("x" * 2001)[0] == "nonsense"
    assert fuzz._classify_rejection("Traceback (most recent call last):\n")[0] == "nonsense"
    # The alarm leaves a loaded machine ample time for the case that must answer (milliseconds), and the case
    # that must hang takes about a second a step on an idle one: 100 steps (near the work bound) run far past it.
    slow = fuzz.Worker(HANG_TIMEOUT_S)
    try:  # a scenario the work bound admits but that takes far longer than the alarm: reported as a hang
        case = {"base": "gpt3_175b.yaml", "channel": "api", "sets": [], "text_mutation": "none",
                "overrides": [["training.steps", 100], ["simulation.fold_micro_batches", False]],
                "data": __import__("yaml").safe_load(
                    (REPO / "scenarios" / "gpt3_175b.yaml").read_text())}
        assert slow.run(case)[0] == "hang"
        # and the worker is usable again afterwards
        ok = {**case, "overrides": [], "base": "fc_mnist.yaml", "data": fuzz_base()}
        assert slow.run(ok)[0] == "accepted"
    finally:
        slow.close()


@pytest.mark.parametrize("sets, words", [
    (["hardware.wafer.clock_Hz=yes"], "must be a number, got True"),
    (["hardware.wafers=true"], "must be an integer, got True"),
    (["training.global_batch=1e9"], "must be at most 1,000,000"),
    (["training.steps=1000000"], "must be at most 100,000"),
    (["workload.model.layers.0.repeat=1000000"], "must be at most 10,000"),
])
def test_the_real_command_rejects_what_fuzzing_found(tmp_path, sets, words):
    """``wss simulate --set`` through the console script's entry point (``wss.cli.main``) in this process: its
    exit code and stderr are the real program's (tests/core/test_cli.py checks that, byte for byte, on a bad
    scenario), without a fresh interpreter's second of start-up for each."""
    argv = ["simulate", REPO / "scenarios" / "fc_mnist.yaml", "-o", tmp_path / "o"]
    for s in sets:
        argv += ["--set", s]
    out = run_wss_here(argv, REPO)
    assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.skipif(os.environ.get("WSS_SLOW") != "1", reason="10,000 fuzz cases take about half an hour; WSS_SLOW=1")
def test_fuzz_10000_cases():
    results = list(fuzz.fuzz(10_000, seed=0, timeout_s=120.0))
    print(fuzz.report(results, 0.0))
    assert len(results) >= 10_000
    assert [r for r in results if r[1] not in fuzz.GOOD] == []
