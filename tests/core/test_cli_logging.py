"""``wss -v`` says what the run decided and why on stderr through ``logging``; by default it says nothing."""

from __future__ import annotations

import logging
from pathlib import Path

from wss.cli import main

REPO = Path(__file__).resolve().parents[2]
FC_MNIST = REPO / "scenarios" / "fc_mnist.yaml"


def _run(capsys, *argv: str) -> str:
    assert main([*argv]) == 0
    return capsys.readouterr().err


def test_verbose_logs_the_plan_and_the_folding(tmp_path, capsys):
    err = _run(capsys, "-v", "simulate", str(FC_MNIST), "-o", str(tmp_path))
    lines = err.splitlines()
    assert any(line.startswith("wss: INFO: fc-mnist: none checkpointing, 1 micro-batch") for line in lines)
    assert any("wafers folded (auto: the cluster is uniform" in line for line in lines)
    assert not any("DEBUG" in line for line in lines)
    err = _run(capsys, "-vv", "simulate", str(FC_MNIST), "-o", str(tmp_path))
    assert any(line.startswith("wss: DEBUG: fc-mnist: ") and "SimPy events" in line for line in err.splitlines())


def test_by_default_and_with_q_nothing_is_logged(tmp_path, capsys):
    assert _run(capsys, "simulate", str(FC_MNIST), "-o", str(tmp_path), "--quiet") == ""
    assert _run(capsys, "-q", "-v", "simulate", str(FC_MNIST), "-o", str(tmp_path), "--quiet") == ""
    # -q prints nothing but errors wherever it stands, -v or not
    assert _run(capsys, "-v", "simulate", str(FC_MNIST), "-o", str(tmp_path), "-q") == ""


def test_a_fold_fallback_is_logged(capsys, tmp_path):
    """A run whose micro-batches do not repeat says so with -v (the optimizer falls further behind)."""
    import yaml

    raw = {"name": "falls-behind", "hardware": {"preset": "cs2-cluster", "wafers": 1,
                                                "memoryx": {"optimizer_flops": 1e5}},
           "workload": {"model": {"name": "m", "input": "features", "layers": [
               {"kind": "dense", "in_features": 1024, "out_features": 1024, "repeat": 2}]}},
           "training": {"global_batch": 8, "micro_batch": 1, "optimizer": "sgd", "steps": 1}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    err = _run(capsys, "-v", "simulate", str(path), "-o", str(tmp_path / "out"))
    assert "simulating 5 of 8 micro-batches per step" in err
    assert "the fold's check failed" in err


def test_main_leaves_logging_as_it_found_it(tmp_path, capsys):
    logger = logging.getLogger("wss")
    handlers, level = list(logger.handlers), logger.level
    _run(capsys, "-v", "validate", str(FC_MNIST))
    assert logger.handlers == handlers and logger.level == level
