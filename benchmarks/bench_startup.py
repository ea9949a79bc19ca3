"""Benchmark how long ``wss`` takes to start: ``wss --help`` and ``wss validate``.

Run ``python benchmarks/bench_startup.py`` from the checkout (``--repeats N``, default 5).

Each command is run ``N`` times as a fresh process, interleaved with the references so that a busy
machine slows them alike; the table gives the median wall time and its ratio to two references
measured in the same run: ``python -c pass`` (the interpreter alone) and ``python -c "import numpy"``.
The targets are ``wss --help`` and ``wss validate`` (fc_mnist, and GPT-3 175B on 192 wafers) under
0.3 s on a quiet machine; on a busy one, compare the ratios.  ``python -X importtime -m wss --help``
shows what is imported.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wss_command() -> list[str]:
    """The ``wss`` console script beside this Python, else ``python -m wss``."""
    script = Path(sys.executable).parent / "wss"
    if script.exists():
        return [str(script)]
    found = shutil.which("wss")
    return [found] if found else [sys.executable, "-m", "wss"]


def commands() -> dict[str, list[str]]:
    wss = wss_command()
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        'python -c "import numpy"': [sys.executable, "-c", "import numpy"],
        "wss --help": [*wss, "--help"],
        "wss validate scenarios/fc_mnist.yaml": [*wss, "validate", str(ROOT / "scenarios" / "fc_mnist.yaml")],
        "wss validate scenarios/gpt3_175b.yaml": [*wss, "validate", str(ROOT / "scenarios" / "gpt3_175b.yaml")],
    }


def wall_time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    return time.perf_counter() - start


def measure(cmds: dict[str, list[str]], repeats: int) -> dict[str, float]:
    """Median wall time of each command over ``repeats`` interleaved rounds (after one warm-up round)."""
    times: dict[str, list[float]] = {name: [] for name in cmds}
    for cmd in cmds.values():  # warm the file cache and the .pyc files
        wall_time(cmd)
    for _ in range(repeats):
        for name, cmd in cmds.items():
            times[name].append(wall_time(cmd))
    return {name: statistics.median(ts) for name, ts in times.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="runs of each command (default 5)")
    args = ap.parse_args(argv)
    medians = measure(commands(), max(args.repeats, 1))
    bare, numpy = medians["python -c pass"], medians['python -c "import numpy"']
    width = max(len(name) for name in medians)
    print(f"{'command':<{width}}  {'median':>8}  {'/ pass':>7}  {'/ numpy':>7}   (median of {args.repeats})")
    for name, t in medians.items():
        print(f"{name:<{width}}  {t:>7.3f}s  {t / bare:>6.1f}x  {t / numpy:>6.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
