"""Studies that read only the step (a size of ``wss size``, a sweep's point) run a cluster set apart by uneven shards
alone with the busiest wafer for all, and one set apart by stragglers alone with every wafer as slow as the
slowest: the same row as the wafers run apart, for a fraction of the events."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import wss
from wss.studies.step_only import step_only
from wss.studies.sweep.rows import metrics

REPO = Path(__file__).resolve().parents[2]
#: GPT-3 1.3B, a batch of 60: on 6 wafers every wafer has 10 samples.
BASE = {"workload.model": "gpt3-1.3b", "training.global_batch": 60, "hardware.wafers": 6, "job": "none"}


def _load(**overrides: object) -> wss.Scenario:
    return wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml", {**BASE, **overrides})


def _differs(a: wss.Result, b: wss.Result) -> dict[str, tuple[object, object]]:
    ra, rb = metrics(a), metrics(b)

    def same(x: object, y: object) -> bool:
        if isinstance(x, float) and isinstance(y, float):
            return (math.isnan(x) and math.isnan(y)) or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-15)
        return x == y

    return {k: (ra[k], rb[k]) for k in ra if not same(ra[k], rb[k])}


@pytest.mark.parametrize("stragglers", [
    [{"wafer": 2, "slowdown": 1.2}],
    [{"wafer": 0, "slowdown": 1.1}, {"wafer": 4, "slowdown": 1.3}, {"wafer": 4, "slowdown": 1.05}],
], ids=["one", "several"])
def test_stragglers_alone_run_as_every_wafer_as_slow_as_the_slowest(stragglers):
    s = _load(**{"faults.stragglers": stragglers})
    step = step_only(s)
    slowest = max(s.faults.slowdowns().values())
    assert step.faults.slowdowns() == dict.fromkeys(range(6), slowest)
    apart, alike = wss.simulate(s), wss.simulate(step)
    assert alike.sim_events < apart.sim_events
    assert _differs(alike, apart) == {}


@pytest.mark.parametrize(("overrides", "why"), [
    ({"faults.links": [{"edge": "swarmx.l1.1", "bandwidth_factor": 0.5}]}, "a slow edge sets a subtree apart"),
    ({"faults.jitter": {"sigma": 0.05}}, "jitter draws per wafer"),
    ({"training.global_batch": 61}, "uneven shards: the pace could pass between wafers"),
    ({"training.activation_checkpointing": "offload", "hardware.activation_store.location": "memoryx"},
     "MemoryX keeps every wafer's block inputs at its own times"),
    ({"simulation.fold_wafers": False}, "asked for"),
    ({"simulation.wafer_classes": False}, "every wafer its own process: nothing to gain"),
])
def test_a_straggler_with_more_apart_runs_as_auto_would(overrides, why):
    s = _load(**{"faults.stragglers": [{"wafer": 2, "slowdown": 1.2}], **overrides})
    assert step_only(s) == s, why


def test_a_uniform_or_unfaulted_cluster_is_left_as_it_is():
    s = _load()
    assert step_only(s) is s
