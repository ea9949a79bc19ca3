"""Wall time of one unfolded GPT-3 175B step on 192 wafers against the folded run, in the same process.

Folded, one wafer and one SwarmX path stand for all 192 (``simulation.fold_wafers: true``); unfolded
(``false``), every wafer has its own timeline and record, and every tree edge its own link in each
direction (docs/unfolded.md).  By default an unfolded run simulates one wafer per class of identical
wafers and one link per class of identical edges (``simulation.wafer_classes``), so the benchmark
times the cases that make classes differ:

* ``unfolded, uniform``: every wafer alike (the same step time as folded: the classes collapse the
  tree to one path);
* ``unfolded, 1 straggler``: wafer 17 computes 1.1x slower (its path and its siblings apart);
* ``unfolded, uneven shards``: 8 more samples than 8 per wafer, so eight wafers have 9 (spread over the tree:
  0, 16, 32, 64, 80, 96, 128 and 144, ``wss/model/scenario/shards.py``);
* ``unfolded, 1 slow edge``: the root's edge ``swarmx.l1.1`` at half rate;
* ``unfolded, 1 node down``: the second node of the level above the wafers (``swarmx.l<D>.n1``) out of service,
  its wafers cut off and the batch split over the others (uneven shards);
* with ``--apart``, ``unfolded, every wafer apart`` (``wafer_classes: false``: one process per wafer and
  per edge, what jitter needs since it draws a factor per wafer); minutes at 192 wafers.

For each it reports wall time, simulated events, events per second and, as in bench_simulator.py,
that rate against a bare SimPy store-and-forward loop timed in the same run.  The targets: a straggler,
a slow edge and a node down at most 3x the uniform (folded) run, and any unfolded run at most 10x.

The cases run in rounds: each round times every case once, in turn, each right after a folded run of its
own, and each case's ratio is taken to that folded run.  A machine whose speed drifts (a shared one swings 2x
within minutes) then moves both sides of a ratio alike; the table gives the median wall time and the median of the
per-round ratios over ``--repeats`` rounds (after one warm-up round when there are several).  Each run
starts from a collected heap.  Both fold runs of identical blocks where the blocks repeat
(``wss/model/folding/layer_fold.py``); the folded run is also timed with every block simulated
(``fold_layers=False``), the cost before layer folding, for comparison.

Run: ``python benchmarks/bench_unfolded.py [--repeats N] [--wafers N] [--apart] [--store BYTES_PER_S]``.  Prints
medians (of ``--repeats`` rounds).
``--wafers 16`` (8 samples per wafer, as at full size) gives a quick look.  ``--store 2.5e10`` puts every wafer's
block inputs on a host store of that rate of its own (the ``activation-servers`` preset's) in every case, folded one
included: limited stores drift-fold as the default one does.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

from simpy_reference import run_simpy_loop

import wss
from wss.model.simulate import simulate_detailed

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "gpt3_175b.yaml"
TARGET = 10.0
#: A straggler, a slow edge and a node down against the uniform run (the folded one), at most.
FAULT_TARGET = 3.0
FAULT_CASES = ("unfolded, 1 straggler", "unfolded, 1 slow edge", "unfolded, 1 node down")


def _once(scenario: wss.Scenario, fold_layers: bool) -> tuple[float, wss.Result]:
    """One run's wall time, from a collected heap: the cyclic garbage an earlier run left (its processes and
    parts) is not collected on this run's clock."""
    gc.collect()
    t = time.perf_counter()
    result = simulate_detailed(scenario, record=False, fold_layers=fold_layers)[0]
    return time.perf_counter() - t, result


def _rounds(cases: list[tuple[str, wss.Scenario]], repeats: int
            ) -> tuple[dict[str, float], dict[str, float], dict[str, wss.Result]]:
    """Time every case once per round, ``repeats`` rounds (plus a warm-up round when repeating: imports,
    caches), each case right after a folded run of its own; return each case's median wall time, the median of
    its ratio to that folded run, and its Result.  A shared machine's speed drifts within a round's seconds, so
    a case is set against the folded run just before it, not against one timed at the round's start."""
    walls: dict[str, list[float]] = {label: [] for label, _ in cases}
    ratios: dict[str, list[float]] = {label: [] for label, _ in cases}
    results: dict[str, wss.Result] = {}
    folded = dict(cases)["folded"]
    for r in range(repeats + (1 if repeats > 1 else 0)):
        this: dict[str, tuple[float, float]] = {}
        for label, scenario in cases:
            base = _once(folded, True)[0] if label != "folded" else None
            wall, results[label] = _once(scenario, label != "folded, every block")
            this[label] = (wall, wall / base if base is not None else 1.0)
        if repeats > 1 and r == 0:
            continue
        for label, (wall, ratio) in this.items():
            walls[label].append(wall)
            ratios[label].append(ratio)
    return ({k: statistics.median(v) for k, v in walls.items()},
            {k: statistics.median(v) for k, v in ratios.items()}, results)


def _cases(wafers: int, apart: bool, store: float | None = None) -> list[tuple[str, list[str]]]:
    size = [f"hardware.wafers={wafers}", f"training.global_batch={8 * wafers}"]
    if store is not None:
        size.append(f"hardware.activation_store.bandwidth_Bps={store:g}")
    unfolded = [*size, "simulation.fold_wafers=false"]
    straggler = min(17, wafers - 1)
    depth = wss.load_scenario(SCENARIO).hardware.swarmx.levels(wafers)
    cases = [
        ("folded", [*size, "simulation.fold_wafers=true"]),
        ("folded, every block", [*size, "simulation.fold_wafers=true"]),
        ("unfolded, uniform", unfolded),
        ("unfolded, 1 straggler", [*unfolded, f"faults.stragglers=[{{wafer: {straggler}, slowdown: 1.1}}]"]),
        ("unfolded, uneven shards", [*unfolded, f"training.global_batch={8 * wafers + 8}"]),
        ("unfolded, 1 slow edge", [*unfolded, "faults.links=[{edge: swarmx.l1.1, bandwidth_factor: 0.5}]"]),
        ("unfolded, 1 node down", [*unfolded, f"faults.nodes=[{{node: swarmx.l{depth}.n1}}]"]),
    ]
    if apart:
        cases.append(("unfolded, every wafer apart", [*unfolded, "simulation.wafer_classes=false"]))
    return cases


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--wafers", type=int, default=192)
    ap.add_argument("--apart", action="store_true", help="also time every wafer apart (minutes at 192 wafers)")
    ap.add_argument("--store", type=float, default=None, metavar="BYTES_PER_S",
                    help="every wafer's block inputs on a host store of this rate of its own (e.g. 2.5e10)")
    args = ap.parse_args(argv)
    seconds, events = run_simpy_loop(100_000)
    base = events / seconds
    print(f"bare SimPy baseline: {base:,.0f} events/s")
    print("(a slow MemoryX shard does not set wafers apart: it runs folded, as the folded case)")
    if args.store is not None:
        print(f"(every wafer's block inputs on a host store of {args.store:g} B/s of its own)")
    print(f"{'GPT-3 175B, 1 step, ' + str(args.wafers) + ' wafers':<34} {'wall s':>10} {'events':>12} "
          f"{'events/s':>12} {'vs baseline':>12} {'step s':>12} {'/ folded':>9}")
    cases = [(label, wss.load_scenario(SCENARIO, overrides))
             for label, overrides in _cases(args.wafers, args.apart, args.store)]
    walls, ratios, results = _rounds(cases, args.repeats)
    for label, _ in cases:
        result, wall = results[label], walls[label]
        rate = result.sim_events / wall
        print(f"{label:<34} {wall:>10.3f} {result.sim_events:>12,} {rate:>12,.0f} {rate / base:>11.2f}x "
              f"{result.step_time_s:>12.6g} {ratios[label]:>8.2f}x")
    faults = [ratios[k] for k in FAULT_CASES if k in ratios]
    worst_fault = max(faults)
    verdict = "meets" if worst_fault <= FAULT_TARGET else "misses"
    print(f"straggler, slow edge, node down / the uniform (folded) run: at most {worst_fault:.2f}x ({verdict} the "
          f"target of at most {FAULT_TARGET:g}x; events at most "
          f"{max(results[k].sim_events for k in FAULT_CASES) / results['folded'].sim_events:.2f}x)")
    unfolded = [k for k in ratios if k.startswith("unfolded") and k != "unfolded, every wafer apart"]
    for against in ("folded", "folded, every block"):
        worst = max(ratios[k] for k in unfolded) / ratios[against]
        verdict = "meets" if worst <= TARGET else "misses"
        print(f"unfolded (classes) / {against} wall time: at most {worst:.1f}x ({verdict} the target of at most "
              f"{TARGET:g}x)")
    print("(both fold identical blocks where they repeat, wss/model/folding/layer_fold.py; an unfolded run whose "
          "blocks do not repeat in both directions simulates more of them; 'folded, every block' is the folded run "
          "without layer folding)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
