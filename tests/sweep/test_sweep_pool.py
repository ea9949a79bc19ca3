"""The local pool's workers end with the sweep: at once when it stops early, not after the point they run."""

from __future__ import annotations

import os
import time

import pytest

from wss.studies.sweep.local_pool import local_pool

#: What a worker would spend on the point it runs if nothing stopped it.
POINT_S = 60.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_interrupted_pool_ends_its_workers_mid_point():
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), local_pool(1) as pool:
        pid = pool.submit(os.getpid).result(timeout=POINT_S)  # the worker is up
        pool.submit(time.sleep, POINT_S)  # and busy with a long point
        time.sleep(0.5)
        raise KeyboardInterrupt
    assert time.monotonic() - started < POINT_S / 2  # not waited for
    assert not _alive(pid)  # ended and reaped


def test_a_pool_left_normally_finishes_its_points():
    with local_pool(1) as pool:
        fut = pool.submit(sum, [1, 2, 3])
    assert fut.result(timeout=0) == 6


_UNGUARDED = """\
import wss
df = wss.sweep({scenario!r}, {{"hardware.wafers": [1, 2]}}, executor="process", workers=2, progress=False)
print(df["status"].tolist())
"""

_GUARDED = """\
import wss


def main():
    df = wss.sweep({scenario!r}, {{"hardware.wafers": [1, 2]}}, executor="process", workers=2, progress=False)
    print(df["status"].tolist())


if __name__ == "__main__":
    main()
"""


def test_a_script_without_the_main_guard_is_told_what_to_add_before_any_worker_starts(tmp_path):
    """Not two tracebacks per worker and every point 'failed': one line naming the guard, and a non-zero exit."""
    import subprocess
    import sys
    from pathlib import Path

    scenario = str(Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml")
    script = tmp_path / "unguarded.py"
    script.write_text(_UNGUARDED.format(scenario=scenario), encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith("wss.studies.sweep.errors.SweepError: ")
    assert f"{script}:2 starts a sweep's worker processes outside 'if __name__ == \"__main__\":'" in last
    assert "BrokenProcessPool" not in run.stderr and run.stderr.count("Traceback") == 1


def test_a_script_with_the_main_guard_runs_its_sweep(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    scenario = str(Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml")
    script = tmp_path / "guarded.py"
    script.write_text(_GUARDED.format(scenario=scenario), encoding="utf-8")
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "['ok', 'ok']"
