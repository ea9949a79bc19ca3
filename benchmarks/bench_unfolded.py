"""Wall time of one unfolded GPT-3 175B step on 192 wafers against the folded run, in the same process.

Folded, one wafer and one SwarmX path stand for all 192 (``simulation.fold_wafers: true``); unfolded
(``false``), every wafer is its own process and every tree edge its own link in each direction
(docs/unfolded.md).  Both give the same step time on this uniform scenario; the benchmark reports
the price of unfolding: wall time, simulated events, events per second and, as in
bench_simulator.py, that rate against a bare SimPy store-and-forward loop timed in the same run.
The issue's target is an unfolded run at most 10x the folded wall time.

Run: ``python benchmarks/bench_unfolded.py [--repeats N] [--wafers N]``.  Prints medians.  With
192 wafers the unfolded run takes minutes; ``--wafers 16`` (8 samples per wafer, as at full size)
gives a quick look.
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
SCENARIO = ROOT / "scenarios" / "gpt3_175b.yaml"
TARGET = 10.0


def _time(scenario: wss.Scenario, repeats: int) -> tuple[float, wss.Result]:
    walls = []
    result = None
    for _ in range(repeats):
        t = time.perf_counter()
        result = wss.simulate(scenario)
        walls.append(time.perf_counter() - t)
    assert result is not None
    return statistics.median(walls), result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--wafers", type=int, default=192)
    args = ap.parse_args(argv)
    size = [f"hardware.wafers={args.wafers}", f"training.global_batch={8 * args.wafers}"]
    seconds, events = run_simpy_loop(100_000)
    base = events / seconds
    print(f"bare SimPy baseline: {base:,.0f} events/s")
    print(f"{'GPT-3 175B, 1 step, ' + str(args.wafers) + ' wafers':<34} {'wall s':>10} {'events':>12} "
          f"{'events/s':>12} {'vs baseline':>12} {'step s':>12}")
    walls = {}
    for mode in ("true", "false"):
        scenario = wss.load_scenario(SCENARIO, [*size, f"simulation.fold_wafers={mode}"])
        wall, result = _time(scenario, args.repeats)
        walls[mode] = wall
        rate = result.sim_events / wall
        label = "folded" if mode == "true" else "unfolded"
        print(f"{label:<34} {wall:>10.3f} {result.sim_events:>12,} {rate:>12,.0f} {rate / base:>11.2f}x "
              f"{result.step_time_s:>12.6g}")
    ratio = walls["false"] / walls["true"]
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"unfolded / folded wall time: {ratio:.1f}x ({verdict} the target of at most {TARGET:g}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
