"""Wall time of the planner's search over checkpointing x micro-batch candidates.

Cases: GPT-3 175B on 192 wafers (the case the search must keep well under 0.5 s), Cerebras-GPT 13B
on 16 wafers and BERT-Large on one wafer (256 samples: the most candidates of the shipped scenarios).
For each it times, as medians over ``--repeats``:

* ``search``: :func:`wss.model.plan.search.rank` alone on fresh analytic models, every candidate
  priced by the analytic level (what ``training.*: auto`` adds to a plan), the models' per-plan
  part (pass schedules) included;
* ``rank_candidates``: the plan's steps before the choice (model expansion, profiles, stream
  formats, candidates against SRAM, MemoryX placement) plus the search;
* ``make_plan``: the whole plan, search included.

Evaluations of one candidate per second are ``benchmarks/bench_analytic.py``'s.

A bare SimPy store-and-forward loop of 10,000 events is timed in the same run, so the figures can
be compared across noisy machines as ratios (search time / bare loop time).

Run: ``python benchmarks/bench_planner.py [--repeats N]``.  Prints medians.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from simpy_reference import run_simpy_loop

import wss
from wss.model.plan import make_plan, plan_inputs, rank_candidates
from wss.model.plan.analytic import StepModel
from wss.model.plan.search import Costing, rank

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "gpt3-175b, 192 wafers": ROOT / "scenarios" / "gpt3_175b.yaml",
    "cerebras-gpt-13b, 16 wafers": ROOT / "scenarios" / "cerebras_gpt_13b.yaml",
    "bert-large, 1 wafer": ROOT / "scenarios" / "bert_large.yaml",
}


def simpy_loop(n: int = 10_000) -> float:
    """Seconds of the bare SimPy loop over ``n`` items (benchmarks/simpy_reference.py)."""
    return run_simpy_loop(n)[0]


def median_s(fn: Callable[[], object], repeats: int) -> float:
    """Median wall seconds of ``fn()`` over ``repeats`` calls."""
    walls = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def fresh(costing: Costing) -> Costing:
    """The costing with new analytic models: nothing built or swept yet."""
    def anew(m: StepModel) -> StepModel:
        return StepModel(m.scenario, m.ops, m.kernels, m.wafer_samples, m.jobs.optimizer)

    return Costing(costing.scenario, anew(costing.model), anew(costing.single) if costing.single else None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    base = median_s(simpy_loop, args.repeats)
    print(f"bare SimPy loop (10,000 items): {base * 1e3:.1f} ms (median of {args.repeats})")
    print(f"{'case':<30} {'candidates':>10} {'search ms':>10} {'vs loop':>8} "
          f"{'rank_candidates ms':>19} {'make_plan ms':>13}")
    for label, path in CASES.items():
        scenario = wss.load_scenario(path)
        inp = plan_inputs(scenario, None)
        search = median_s(lambda: rank(fresh(inp.costing), inp.candidates), args.repeats)
        ranked = median_s(lambda: rank_candidates(scenario), args.repeats)
        plan = median_s(lambda: make_plan(scenario), args.repeats)
        print(f"{label:<30} {len(inp.candidates):>10} {search * 1e3:>10.2f} {search / base:>7.2f}x "
              f"{ranked * 1e3:>19.1f} {plan * 1e3:>13.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
