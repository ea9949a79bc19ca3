"""``wss sweep --executor dask --address`` with no scheduler there: one error line, exit 2, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import distributed  # noqa: F401  (in the [test] extra: without it this test fails, never skips)
import pytest


def _closed_port() -> int:
    """A localhost port nobody listens on (bound, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wss() -> list[str]:
    script = Path(sys.executable).with_name("wss")
    return [str(script)] if script.is_file() and os.access(script, os.X_OK) else [sys.executable, "-m", "wss"]


def test_unreachable_scheduler_is_bad_input(scenarios, tmp_path):
    address = f"tcp://127.0.0.1:{_closed_port()}"
    out = tmp_path / "sub" / "r.csv"
    started = time.monotonic()
    proc = subprocess.run(
        [*_wss(), "sweep", str(scenarios / "fc_mnist.yaml"), "--vary", "hardware.wafers=1,2",
         "--executor", "dask", "--address", address, "-o", str(out)],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: cannot connect to the Dask scheduler at {address}: ")
    assert elapsed < 20  # a 10 s connect timeout, not distributed's default 30 s
    assert list(tmp_path.iterdir()) == []  # no table, no cache folder, not even the folder made for them


def test_malformed_address_is_bad_input(scenarios, tmp_path):
    from wss.studies.sweep import SweepError, sweep

    with pytest.raises(SweepError, match="cannot connect to the Dask scheduler at foo://x:1"):
        sweep(scenarios / "fc_mnist.yaml", {"hardware.wafers": [1]}, executor="dask", address="foo://x:1")
