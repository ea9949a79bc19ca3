"""Wall time of a 64-point sweep: the process pool against one point after another.

The sweep: 8 GPT-3 sizes (125M to 175B) x 8 cluster sizes (1 to 128 CS-2s) at a
fixed 8 sequences per wafer (cluster size and global batch zipped), on the
GPT-3 175B scenario's hardware.  No cache, so every point is simulated.

* ``serial``: ``wss.studies.sweep.sweep(..., executor="serial")``, every point in this process;
* ``process``: ``executor="process"`` with N spawned workers (default: all cores),
  including the pool's start-up (spawn and import of wss in each worker);
* ``machine ceiling``: N identical pure-Python CPU jobs at once against in turn, which
  is what the machine can give any executor (below N where cores are shared).

Run: ``python benchmarks/bench_sweep.py [--workers N] [--repeats R]``.  Prints medians.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing
import os
import statistics
import time
from pathlib import Path

from wss.studies.sweep import sweep

ROOT = Path(__file__).resolve().parent.parent
BASE = ROOT / "scenarios" / "gpt3_175b.yaml"
MODELS = ["gpt3-125m", "gpt3-350m", "gpt3-760m", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b", "gpt3-175b"]
WAFERS = [1, 2, 4, 8, 16, 32, 64, 128]
PER_WAFER_BATCH = 8
VARY = {
    ("hardware.wafers", "training.global_batch"): [(w, PER_WAFER_BATCH * w) for w in WAFERS],
    "workload.model": MODELS,
}


def spin(n: int) -> float:
    """A fixed pure-Python CPU job; returns its own wall time."""
    t = time.perf_counter()
    x = 0
    for i in range(n):
        x += i
    return time.perf_counter() - t


def machine_ceiling(workers: int, n: int = 5_000_000) -> float:
    """What the machine gives ``workers`` identical CPU jobs at once, against one after another.

    On a machine whose cores are shared (a VM with CPU steal, other jobs) this
    is well below ``workers``, and no executor can beat it.
    """
    with cf.ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(spin, [1000] * workers))  # start and warm the workers
        t = time.perf_counter()
        list(pool.map(spin, [n] * workers))
        parallel = time.perf_counter() - t
    t = time.perf_counter()
    for _ in range(workers):
        spin(n)
    return (time.perf_counter() - t) / parallel


def timed(executor: str, workers: int | None) -> tuple[float, int]:
    t = time.perf_counter()
    df = sweep(BASE, VARY, executor=executor, workers=workers)
    wall = time.perf_counter() - t
    return wall, int((df["status"] == "ok").sum())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=None, help="process-pool workers (default: all cores)")
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args(argv)
    workers = args.workers or os.cpu_count() or 1
    sweep(BASE, {"workload.model": ["gpt3-125m"]}, executor="serial")  # warm imports and preset caches
    load_before = os.getloadavg()[0]
    serial, pool, ceiling = [], [], []
    for _ in range(args.repeats):  # interleaved, so drifting load on the machine hits both alike
        serial.append(timed("serial", None))
        pool.append(timed("process", workers))
        ceiling.append(machine_ceiling(workers))
    s = statistics.median(w for w, _ in serial)
    p = statistics.median(w for w, _ in pool)
    c = statistics.median(ceiling)
    points = len(MODELS) * len(WAFERS)
    print(f"{points}-point sweep ({len(MODELS)} models x {len(WAFERS)} cluster sizes), "
          f"{os.cpu_count()} cores, median of {args.repeats}")
    print(f"{'executor':<22} {'wall s':>8} {'points/s':>9} {'speed-up':>9} {'ok points':>10}")
    print(f"{'serial (one process)':<22} {s:>8.2f} {points / s:>9.2f} {1.0:>9.2f} {serial[0][1]:>10}")
    print(f"{f'process ({workers} workers)':<22} {p:>8.2f} {points / p:>9.2f} {s / p:>9.2f} {pool[0][1]:>10}")
    print(f"parallel efficiency: {s / p / workers:.0%} of linear in {workers} workers")
    print(f"machine ceiling: {workers} identical pure-Python CPU jobs run {c:.2f}x faster at once than in turn "
          f"(the sweep reaches {s / p / c:.0%} of that)")
    print(f"1-minute load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f} "
          "(other work on the machine skews both figures)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
