"""Numerics through wss.model.simulate: real training alongside the timing, real masks in the cycle model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import wss
from wss.model.numerics.bridge import numerics_spec, run_numerics
from wss.model.plan import make_plan

REPO = Path(__file__).resolve().parents[2]


def scenario(steps: int = 60, **numerics) -> dict:
    return {
        "hardware": {"preset": "cs2-cluster", "wafers": 4},
        "workload": {"model": "fc-mnist", "sparsity": 0.5},
        "training": {"global_batch": 128, "optimizer": "adamw", "steps": steps},
        "numerics": {"enabled": True, "learning_rate": 2e-3, **numerics},
        "seed": 3,
    }


def test_simulate_trains_and_reports_the_loss_per_step():
    result = wss.simulate(scenario())
    losses = result.numerics.losses
    assert len(losses) == len(result.steps) == 60
    assert [s.loss for s in result.steps] == losses
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10])
    assert result.numerics.accuracies[-1] > 0.3  # 10 classes: chance is ~0.1


def test_the_timing_reads_the_real_masks():
    s = wss.load_scenario(scenario(steps=2))
    outcome, profiles = run_numerics(s)
    plan = make_plan(s, profiles)
    for kp, cols, rows in zip(plan.kernels, outcome.col_nnz, outcome.row_nnz):
        np.testing.assert_array_equal(kp.profile.col_counts, cols)
        np.testing.assert_array_equal(kp.profile.row_counts, rows)
        assert kp.nnz == int(np.sum(outcome.masks[kp.index]))
    # A different seed gives different masks, so different per-feature counts in the cycle model.
    other = wss.load_scenario({**scenario(steps=2), "seed": 4})
    other_plan = make_plan(other, run_numerics(other)[1])
    assert not np.array_equal(plan.kernels[0].profile.col_counts, other_plan.kernels[0].profile.col_counts)


def test_spec_follows_the_scenario():
    s = wss.load_scenario(scenario(steps=5, prune="magnitude", dataset="gaussian_mixture"))
    spec = numerics_spec(s)
    assert spec.layer_sizes == (784, 256, 256, 10)
    assert spec.densities == (0.5, 0.5, 0.5)
    assert (spec.wafers, spec.global_batch, spec.steps, spec.seed) == (4, 128, 5, 3)
    assert (spec.prune, spec.dataset) == ("magnitude", "gaussian_mixture")
    assert (spec.optimizer, spec.stream_dtype) == ("adamw", "float16")


def test_numerics_do_not_depend_on_blas_threads():
    code = (
        "import hashlib, wss;"
        "r = wss.simulate({'hardware': {'preset': 'cs2-cluster', 'wafers': 2}, 'workload': {'model': 'fc-mnist'},"
        "'training': {'global_batch': 64, 'steps': 5}, 'numerics': {'enabled': True}});"
        "print(hashlib.sha256(r.to_json().encode()).hexdigest())"
    )
    digests = set()
    for threads in ("1", "2"):
        env = {**os.environ, "OPENBLAS_NUM_THREADS": threads, "OMP_NUM_THREADS": threads}
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1


def test_the_cli_shows_the_loss_curve(tmp_path, capsys):
    """Through ``wss.cli.main``, the console script's entry point, in this process (what it prints is the real
    program's: tests/core/test_cli.py)."""
    import yaml

    from wss.cli import main

    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(scenario(steps=20)))
    assert main(["simulate", str(path), "-o", str(tmp_path / "o")]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.strip().startswith("loss"))
    assert "over 20 steps" in line and "accuracy" in line


def test_a_diverging_run_is_a_result_that_reads_back(tmp_path):
    """Too high a learning rate: losses turn non-finite, stored as None, and result.json reads back."""
    raw = scenario(steps=4, learning_rate=100.0)  # the largest learning rate a scenario may give
    raw["training"]["optimizer"] = "sgd"  # Adam's steps are bounded by the rate; plain SGD's blow up
    raw["training"]["gradient_clipping"] = "none"  # clipped gradients would keep even SGD's steps bounded
    result = wss.simulate(raw)
    losses = result.numerics.losses
    assert losses[0] is not None and None in losses
    assert [s.loss for s in result.steps] == losses
    path = tmp_path / "result.json"
    result.save(path)
    again = wss.Result.load(path)
    assert again.numerics.losses == losses
    from wss.cli import main

    assert main(["report", str(path)]) == 0  # the real program's entry point, in this process


def test_a_node_down_trains_on_the_wafers_it_leaves():
    """16 wafers under four level-2 nodes; node 1 down cuts off wafers 4-7.  The batch splits over the 12 left,
    and the tree sums only theirs, in the same order as a 12-wafer cluster's tree (whose level-2 nodes hold
    wafers 0-3, 4-7 and 8-11: the same groups, renumbered).  So the run is that cluster's, bit for bit."""
    down = {**scenario(steps=4), "hardware": {"preset": "cs2-cluster", "wafers": 16},
            "training": {"global_batch": 192, "optimizer": "adamw", "steps": 4},
            "faults": {"nodes": [{"node": "swarmx.l2.n1", "kind": "down"}]}}
    spec = numerics_spec(wss.load_scenario(down))
    assert spec.cut_off == (4, 5, 6, 7) and spec.wafers == 16
    twelve = {**down, "hardware": {"preset": "cs2-cluster", "wafers": 12}}
    del twelve["faults"]
    assert wss.simulate(down).numerics.losses == wss.simulate(twelve).numerics.losses


def test_tree_reduce_skips_wafers_cut_off():
    from wss.model.numerics.swarmx import tree_reduce

    assert tree_reduce([1.0, None, 2.0, None, None, None, 4.0], fan_out=2) == (1.0 + 2.0) + 4.0
    assert tree_reduce([None, None, 3.0], fan_out=2) == 3.0
    with pytest.raises(ValueError, match="not None"):
        tree_reduce([None, None], fan_out=2)
