"""tools/suite_times.py: the per-test CPU record a pytest run writes with it, and its summary."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("suite_times", ROOT / "tools" / "suite_times.py")
suite_times = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite_times)


def test_summary_gives_total_per_worker_longest_and_the_idle_bound():
    rows = [{"id": "a", "cpu": 4.0, "wall": 9.0, "worker": "gw0"},
            {"id": "b", "cpu": 1.0, "wall": 2.0, "worker": "gw1"},
            {"id": "c", "cpu": 3.0, "wall": 3.0, "worker": "gw1"}]
    text = suite_times.summarise(rows, top=2, workers=2)
    assert "3 tests, 8.0 CPU s in tests; per worker: gw0 4.0, gw1 4.0" in text
    assert "max(8.0 / 2, 4.0) = 4.0 s" in text
    assert text.splitlines()[-2:] == ["    4.00 (   9.00)  a", "    3.00 (   3.00)  c"]
    assert "= 12.0 s" in suite_times.summarise([{**rows[0], "cpu": 12.0}, rows[1]], top=1, workers=2)


def test_the_plugin_records_each_test_with_its_cpu_seconds(tmp_path: Path) -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (tmp_path / "test_two.py").write_text(
        "def test_busy():\n    sum(i * i for i in range(3_000_000))\n\ndef test_idle():\n    pass\n", encoding="utf-8")
    out = tmp_path / "times.jsonl"
    # not this run's xdist worker: the inner run has none
    env = {**{k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}, "PYTHONPATH": str(ROOT / "tools")}
    argv = [sys.executable, "-m", "pytest", "-q", "-c", str(tmp_path / "pytest.ini"), "-p", "no:xdist", "-p", "no:wss",
            "-p", "no:cacheprovider", "-p", "suite_times", f"--suite-times={out}", str(tmp_path)]
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["id"].split("::")[1]: r for r in map(json.loads, out.read_text(encoding="utf-8").splitlines())}
    assert set(rows) == {"test_busy", "test_idle"}
    assert rows["test_busy"]["cpu"] > 0.05 > rows["test_idle"]["cpu"] >= 0
    assert all(r["wall"] > 0 and r["worker"] == "main" for r in rows.values())
