"""Wall time and simulated events per second of the timing simulator.

Cases (issue 2): GPT-3 175B, one step, 192 wafers; the 120T brain-scale model
on 192 wafers.  A bare SimPy store-and-forward loop is timed in the same run
as a baseline, so figures can be compared across noisy machines as ratios.

Run: ``python benchmarks/bench_simulator.py [--repeats N]``.  Prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from simpy_reference import run_simpy_loop

import wss

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "gpt3-175b, 1 step, 192 wafers": ROOT / "scenarios" / "gpt3_175b.yaml",
    "brain-120t, 1 step, 192 wafers": ROOT / "scenarios" / "brain_120t.yaml",
}


def simpy_baseline(n: int = 100_000) -> float:
    """Events per second of the bare SimPy loop (benchmarks/simpy_reference.py)."""
    seconds, events = run_simpy_loop(n)
    return events / seconds


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args(argv)
    base = statistics.median(simpy_baseline() for _ in range(args.repeats))
    print(f"bare SimPy baseline: {base:,.0f} events/s (median of {args.repeats})")
    print(f"{'case':<34} {'wall s (median)':>16} {'events':>10} {'events/s':>12} {'vs baseline':>12} {'step s':>12}")
    for label, path in CASES.items():
        scenario = wss.load_scenario(path)
        walls = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            result = wss.simulate(scenario)
            walls.append(time.perf_counter() - t)
        wall = statistics.median(walls)
        rate = result.sim_events / wall
        print(
            f"{label:<34} {wall:>16.3f} {result.sim_events:>10,} {rate:>12,.0f} {rate / base:>11.2f}x "
            f"{result.step_time_s:>12.4g}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
