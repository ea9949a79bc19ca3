"""Wall time of ``wss.simulate`` at every cluster size against the nearest power of two, in the same run.

A sweep of wafer counts should cost about the same at every count.  A count that does not divide the
batch gives uneven shards: the wafers are unfolded into two classes (k and k+1 samples), which simulate
apart (docs/unfolded.md); folding micro-batches and identical blocks over the slots where every class
repeats keeps such a run near the folded cost of the power-of-two count beside it
(``wss/model/plan/micro_batching.py``, ``wss/model/folding/layer_fold.py``).

For GPT-3 175B (``scenarios/gpt3_175b.yaml``, batch 1536) and Cerebras-GPT 13B
(``scenarios/cerebras_gpt_13b.yaml``), one step each, it times every wafer count of ``--counts`` (default:
1 to 64, 96, 128 and 192) and prints each count's wall time, simulated events and its ratio to the
nearest power of two's wall time (the lower one on a tie).  Each count is timed in pairs with its power of
two, one run right after the other, each from a collected heap (no garbage of an earlier run collected on
its clock): a machine whose speed drifts moves both sides of a pair alike.  The table gives the medians over
``--repeats`` pairs, of each side and of the pairs' ratios, and beside them the ratio of the simulated events,
which does not move with the machine's load.  The issue's target is at most 3x everywhere; the worst ratio per
model is printed last.

``--study step`` times each count as the studies that read only the step run it (``wss size``, a sweep's point):
a count set apart only by its uneven shards with the busiest wafer standing for all, which gives the same step
(:func:`wss.studies.step_only.step_only`); the default, ``simulate``, times ``wss.simulate``
under ``auto``, which runs such a count apart for every wafer's own idle time.

Run: ``python benchmarks/bench_cluster_sizes.py [--repeats N] [--counts 8,9,16,17] [--models gpt3_175b]
[--study simulate|step]``.
The full sweep is about 130 simulations per repeat: minutes on one free core.  Quote ``--repeats 5``: a
power-of-two count's run takes 0.1 to 0.3 s, so one pair swings with the machine's load.  On the two-core
development machine one pair each put ten GPT-3 175B counts over 3x; five pairs each (about 9 minutes for GPT-3,
3 for Cerebras-GPT 13B), two: 51 wafers (4.1x; 3.7x in events) and 59 (3.0x; 3.4x in events), where fewer
larger shards than leaf nodes leave a lighter kind of wafer at more levels of the tree (docs/unfolded.md).
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import time
from pathlib import Path

import wss
from wss.studies.step_only import step_only

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"gpt3_175b": "GPT-3 175B", "cerebras_gpt_13b": "Cerebras-GPT 13B"}
COUNTS = [*range(1, 65), 96, 128, 192]
TARGET = 3.0


def nearest_power_of_two(n: int) -> int:
    """The power of two closest to ``n`` (the lower one on a tie)."""
    lo = 1 << (n.bit_length() - 1)
    hi = lo * 2
    return lo if n - lo <= hi - n else hi


def _once(scenario: wss.Scenario) -> tuple[float, int]:
    """One run's wall time and events, from a collected heap."""
    gc.collect()
    t = time.perf_counter()
    events = wss.simulate(scenario).sim_events
    return time.perf_counter() - t, events


def _paired(scenario: wss.Scenario, base: wss.Scenario, repeats: int) -> tuple[float, int, float, float, int]:
    """``scenario`` timed right after ``base``, ``repeats`` times: the medians of its wall time, of the base's
    and of the pairs' ratios, and its events and the base's."""
    walls, bases, ratios, events, base_events = [], [], [], 0, 0
    for _ in range(repeats):
        b, base_events = _once(base)
        w, events = _once(scenario)
        walls.append(w)
        bases.append(b)
        ratios.append(w / b)
    return statistics.median(walls), events, statistics.median(bases), statistics.median(ratios), base_events


def _scenario(path: Path, n: int, study: str) -> wss.Scenario:
    """The scenario on ``n`` wafers as ``study`` runs it."""
    s = wss.load_scenario(path, {"hardware.wafers": n})
    return step_only(s) if study == "step" else s


def sweep(model: str, counts: list[int], repeats: int, study: str = "simulate") -> float:
    """Print one model's table; return its worst ratio to the nearest power of two."""
    path = ROOT / "scenarios" / f"{model}.yaml"
    scenarios = {n: _scenario(path, n, study) for n in sorted(set(counts) | {nearest_power_of_two(n) for n in counts})}
    _once(scenarios[min(scenarios)])  # warm-up: imports, caches
    timed = {n: _paired(scenarios[n], scenarios[nearest_power_of_two(n)], repeats) for n in counts}
    print(f"{MODELS.get(model, model)}, 1 step, as "
          f"{'wss.simulate runs' if study == 'simulate' else 'the step studies run'} it")
    print(f"{'wafers':>7} {'wall s':>9} {'events':>12} {'2^k':>5} {'2^k wall s':>11} {'ratio':>7} "
          f"{'events ratio':>13}")
    worst = 0.0
    for n in counts:
        p = nearest_power_of_two(n)
        wall, events, base, ratio, base_events = timed[n]
        worst = max(worst, ratio)
        print(f"{n:>7} {wall:>9.3f} {events:>12,} {p:>5} {base:>11.3f} {ratio:>6.2f}x {events / base_events:>12.2f}x")
    verdict = "meets" if worst <= TARGET else "misses"
    print(f"worst ratio {worst:.2f}x ({verdict} the target of at most {TARGET:g}x)")
    return worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--counts", default=",".join(map(str, COUNTS)), help="wafer counts, comma-separated")
    ap.add_argument("--models", default=",".join(MODELS), help="scenario names under scenarios/, comma-separated")
    ap.add_argument("--study", choices=("simulate", "step"), default="simulate",
                    help="simulate: wss.simulate under auto; step: as wss size and sweeps run a count")
    args = ap.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    if any(c < 1 or not math.isfinite(c) for c in counts):
        ap.error("wafer counts are positive integers")
    for model in args.models.split(","):
        sweep(model, counts, args.repeats, args.study)
    return 0


if __name__ == "__main__":
    sys.exit(main())
