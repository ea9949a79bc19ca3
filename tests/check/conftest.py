"""Fixtures of the timing-check tests; the helpers live in check_helpers.py.

(The pytester plugin is enabled in test_check_plugin.py: ``pytest_plugins`` is refused in a
conftest.py below the rootdir's top level when the suite runs from the repository root.)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from check_helpers import FC_MNIST, copy_scenario

from wss.studies.check import record_baseline


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    """A private copy of scenarios/fc_mnist.yaml in tmp_path."""
    return copy_scenario(tmp_path)


@pytest.fixture(scope="session")
def fc_baseline():
    """The baseline of scenarios/fc_mnist.yaml, recorded once per session (read-only)."""
    return record_baseline(FC_MNIST)
