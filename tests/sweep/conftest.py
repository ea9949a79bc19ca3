"""Fixtures of the sweep tests: tiny scenarios and an executor that counts what it runs.

Tests use these only as fixtures (never ``import conftest``), so they run under any import mode.
"""

from __future__ import annotations

import concurrent.futures as cf
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"


def tiny_base(**training: Any) -> dict:
    """The FC-MNIST network on the CS-2 cluster preset: a point simulates in a few milliseconds."""
    return {
        "name": "tiny",
        "hardware": {"preset": "cs2-cluster", "wafers": 1},
        "workload": {"model": "fc-mnist"},
        "training": {"global_batch": 64, "optimizer": "sgd", "steps": 1, **training},
    }


class CountingExecutor:
    """Runs each submitted call at once in this process and counts the calls (an object with ``submit``)."""

    def __init__(self, fail_with: BaseException | None = None):
        self.calls = 0
        self.fail_with = fail_with

    def submit(self, fn, *args, **kwargs) -> cf.Future:
        self.calls += 1
        fut: cf.Future = cf.Future()
        if self.fail_with is not None:
            fut.set_exception(self.fail_with)
        else:
            fut.set_result(fn(*args, **kwargs))
        return fut


@pytest.fixture
def base() -> dict:
    return tiny_base()


@pytest.fixture
def make_base():
    """``make_base(**training)``: the tiny base with training fields changed."""
    return tiny_base


@pytest.fixture
def scenarios() -> Path:
    return SCENARIOS


@pytest.fixture
def repo() -> Path:
    return REPO


@pytest.fixture
def counting_executor():
    """The CountingExecutor class, to build one that fails."""
    return CountingExecutor


@pytest.fixture
def counting() -> CountingExecutor:
    return CountingExecutor()
