"""``wss.simulate`` is pure and deterministic: byte-identical JSON for the same scenario."""

from __future__ import annotations

import numpy as np
import yaml
from core_helpers import SCENARIOS, dense_model, run_wss_parallel, scenario_dict

import wss

SPARSE = scenario_dict(
    model=dense_model(1024, 2048, 1024, name="sparse-mlp", activation="relu"),
    wafers=4,
    global_batch=64,
    steps=2,
    optimizer="adamw",
    workload={"sparsity": 0.8},
    training={"micro_batch": 4},
    seed=11,
)


def test_same_scenario_gives_byte_identical_json():
    a = wss.simulate(SPARSE)
    np.random.seed(1234)  # noqa: NPY002  (the legacy global state on purpose: it must not matter)
    b = wss.simulate(wss.load_scenario(SPARSE))
    assert a.to_json() == b.to_json()
    assert a.sim_events == b.sim_events > 0


def test_shipped_scenario_is_deterministic():
    path = SCENARIOS / "fc_mnist.yaml"
    assert wss.simulate(path).to_json() == wss.simulate(wss.load_scenario(path)).to_json()


def test_the_seed_is_the_only_source_of_randomness():
    other = wss.simulate(wss.load_scenario(SPARSE, {"seed": 12}))
    again = wss.simulate(wss.load_scenario(SPARSE, {"seed": 12}))
    assert other.to_json() == again.to_json()
    base = wss.simulate(SPARSE)
    assert other.cluster["nonzero_params"] != base.cluster["nonzero_params"]  # a different mask was drawn


def test_simulate_does_not_mutate_its_input():
    s = wss.load_scenario(SPARSE)
    dumped = s.model_dump_json()
    wss.simulate(s)
    assert s.model_dump_json() == dumped


def test_cli_runs_in_two_processes_write_identical_result_files(tmp_path):
    path = tmp_path / "sparse.yaml"
    path.write_text(yaml.safe_dump(SPARSE), encoding="utf-8")
    runs = run_wss_parallel(
        {i: (["simulate", path, "-o", tmp_path / f"out{i}", "--quiet"], tmp_path) for i in (1, 2)}
    )
    for run in runs.values():
        assert run.returncode == 0, run.stderr
    first = (tmp_path / "out1" / "result.json").read_bytes()
    second = (tmp_path / "out2" / "result.json").read_bytes()
    assert first == second
    # and the same bytes as the in-process API
    assert first.decode("utf-8") == wss.simulate(wss.load_scenario(path)).to_json()
