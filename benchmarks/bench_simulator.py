"""Wall time, CPU time and simulated events per second of the timing simulator.

Cases: GPT-3 175B, one step, 192 wafers; the 120T brain-scale model on 192 wafers; and step
folding: fc_mnist for 1,000 steps, folded (steps 0-3 and the last simulated) and not
(``simulation.fold_micro_batches: false``, run once: it takes tens of seconds).  A bare SimPy
store-and-forward loop (``simpy_reference.py``) is timed in the same run as a baseline, so figures
can be compared across noisy machines as ratios; on a shared machine the CPU time is the steadier
figure.

``--ref DIR`` also runs the cases on another checkout of wss (e.g. ``git worktree add /tmp/before
<commit>``) in a fresh interpreter, in the same run, and prints its rows beside these: before and
after on the same machine at the same time.

Run: ``python benchmarks/bench_simulator.py [--repeats N] [--ref DIR] [--skip-unfolded]``.  Prints medians.

Measured on the 2-core development machine (load ~3.5), ``--repeats 5 --ref`` the commit before the
speed work (4239a65); CPU seconds, events per CPU second as a ratio to bare SimPy (669k events/s):

=================================  ==============  ==============  =========
case                               before          after           events
=================================  ==============  ==============  =========
GPT-3 175B, 1 step, 192 wafers     0.749 s, 0.57x  0.592 s, 0.72x    284,415
brain-120T, 1 step, 192 wafers     3.060 s, 0.53x  2.519 s, 0.64x  1,084,655
fc_mnist, 1,000 steps              0.713 s         0.010 s (folded; 0.554 s unfolded)
=================================  ==============  ==============  =========

The same events run with less Python each (``wss/model/engine.py``, ``ByteStore.put``/``get``), and
every shipped result is byte-identical.  Folding steps leaves 638 events of 125,013.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from simpy_reference import run_simpy_loop

CASES: dict[str, tuple[str, dict[str, object]]] = {
    "gpt3-175b, 1 step, 192 wafers": ("gpt3_175b.yaml", {}),
    "brain-120t, 1 step, 192 wafers": ("brain_120t.yaml", {}),
    "fc_mnist, 1,000 steps, folded": ("fc_mnist.yaml", {"training.steps": 1000}),
}
UNFOLDED = ("fc_mnist, 1,000 steps, unfolded",
            ("fc_mnist.yaml", {"training.steps": 1000, "simulation.fold_micro_batches": False}))


def simpy_baseline(n: int = 100_000) -> float:
    """Events per second of the bare SimPy loop (benchmarks/simpy_reference.py)."""
    seconds, events = run_simpy_loop(n)
    return events / seconds


def time_case(scenario_file: str, overrides: dict[str, object], repeats: int) -> dict[str, float]:
    """Median wall and CPU seconds of ``wss.simulate`` over ``repeats`` runs (after one warm-up when repeating)."""
    import wss

    root = Path(wss.__file__).resolve().parents[1]  # the scenarios of the checkout being timed
    scenario = wss.load_scenario(root / "scenarios" / scenario_file, overrides=overrides)
    if repeats > 1:
        wss.simulate(scenario)
    walls, cpus = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        result = wss.simulate(scenario)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
    return {"wall": statistics.median(walls), "cpu": statistics.median(cpus), "events": result.sim_events,
            "step": result.step_time_s}


def measure(repeats: int, unfolded: bool) -> dict[str, dict[str, float]]:
    cases = dict(CASES)
    if unfolded:
        cases[UNFOLDED[0]] = UNFOLDED[1]
    out = {}
    for label, (path, overrides) in cases.items():
        out[label] = time_case(path, overrides, 1 if label == UNFOLDED[0] else repeats)
    return out


def measure_ref(ref: Path, repeats: int, unfolded: bool) -> dict[str, dict[str, float]]:
    """The same cases on the checkout at ``ref``, in a fresh interpreter that imports wss from there."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ref), str(Path(__file__).parent)])}
    args = [sys.executable, __file__, "--worker", "--repeats", str(repeats)] + ([] if unfolded else ["--skip-unfolded"])
    out = subprocess.run(args, env=env, cwd=ref, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--ref", type=Path, help="another checkout of wss to time in the same run (before/after)")
    ap.add_argument("--skip-unfolded", action="store_true", help="skip the unfolded 1,000-step run")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    unfolded = not args.skip_unfolded
    if args.worker:  # print this checkout's figures as JSON for --ref
        print(json.dumps(measure(args.repeats, unfolded)))
        return 0
    base = statistics.median(simpy_baseline() for _ in range(args.repeats))
    rows = {"this checkout": measure(args.repeats, unfolded)}
    if args.ref is not None:
        rows[f"ref {args.ref}"] = measure_ref(args.ref.resolve(), args.repeats, unfolded)
    base = statistics.median([base, *(simpy_baseline() for _ in range(args.repeats))])
    print(f"bare SimPy baseline: {base:,.0f} events/s (median of {2 * args.repeats})")
    print(f"{'case':<34} {'code':<16} {'wall s':>9} {'cpu s':>9} {'events':>10} {'events/s (cpu)':>15} "
          f"{'vs SimPy':>9} {'step s':>11}")
    for label in rows["this checkout"]:
        for code, table in rows.items():
            if label not in table:
                continue
            r = table[label]
            rate = r["events"] / r["cpu"]
            print(f"{label:<34} {code[:16]:<16} {r['wall']:>9.3f} {r['cpu']:>9.3f} {int(r['events']):>10,} "
                  f"{rate:>15,.0f} {rate / base:>8.2f}x {r['step']:>11.6g}")
    mine = rows["this checkout"]
    if UNFOLDED[0] in mine:
        folded = mine["fc_mnist, 1,000 steps, folded"]
        print(f"step folding, fc_mnist x 1,000: {mine[UNFOLDED[0]]['cpu'] / folded['cpu']:,.0f}x less CPU; "
              f"step time {folded['step']:.12g} s folded, {mine[UNFOLDED[0]]['step']:.12g} s unfolded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
