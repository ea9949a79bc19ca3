"""Evaluations per second of the analytic level (:mod:`wss.model.plan.analytic`): one candidate's step time.

The planner evaluates every candidate of a plan with one :class:`~wss.model.plan.analytic.StepModel`, built
once per plan (each kernel's way, the pass schedules with and without recompute, the optimizer's jobs).
What a candidate then costs depends on what earlier candidates already built, so three figures, as medians
over ``--repeats``:

* ``build ms``: the per-plan part (the model and its schedules: without and with recompute, and with offload);
* ``cold evals/s``: every candidate evaluated once on a freshly built model: each new micro-batch size costs
  its cycles (the cycle model), its passes' seconds and its sweeps; this is what a search pays;
* ``warm evals/s``: the same candidates evaluated again (every sweep already made): the step's own
  arithmetic (micro-batches, optimizer queue, flash channel, input, fixed costs) per candidate.

The case the task names is GPT-3 175B on 192 wafers (scenarios/gpt3_175b.yaml), where at least 1,000 cold
evaluations per second are asked for.

Run: ``python benchmarks/bench_analytic.py [--repeats N]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from bench_planner import fresh, median_s

import wss
from wss.model.plan import plan_inputs
from wss.model.plan.analytic import StepModel
from wss.model.plan.micro_batching import Candidate
from wss.model.plan.search import Costing

ROOT = Path(__file__).resolve().parent.parent
CASES = {
    "gpt3-175b, 192 wafers": ROOT / "scenarios" / "gpt3_175b.yaml",
    "cerebras-gpt-13b, 16 wafers": ROOT / "scenarios" / "cerebras_gpt_13b.yaml",
    "bert-large, 1 wafer": ROOT / "scenarios" / "bert_large.yaml",
}


def built(costing: Costing) -> list[StepModel]:
    """A fresh copy of the costing's models with their per-plan part built (nothing per candidate yet): the
    pass schedules without and with recompute, and with offload (block inputs coming back)."""
    again = fresh(costing)
    models = [m for m in (again.model, again.single) if m is not None]
    for m in models:
        m.schedule(False)
        m.schedule(True)
        m.schedule(True, offload=True)
    return models


def evaluate_all(models: list[StepModel], candidates: list[Candidate]) -> None:
    """Every candidate on its model (the single-placement one for one micro-batch, where there is one)."""
    for c in candidates:
        m = models[-1] if len(models) > 1 and len(c.micro_batches) == 1 else models[0]
        m.evaluate(c.micro_batches, c.checkpointing)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args(argv)
    print(f"{'case':<30} {'candidates':>10} {'build ms':>9} {'cold evals/s':>13} {'warm evals/s':>13}")
    for label, path in CASES.items():
        inp = plan_inputs(wss.load_scenario(path), None)
        n = len(inp.candidates)
        build = median_s(lambda: built(inp.costing), args.repeats)
        colds = []
        for _ in range(args.repeats):
            models = built(inp.costing)
            t = time.perf_counter()
            evaluate_all(models, inp.candidates)
            colds.append(time.perf_counter() - t)
        cold = statistics.median(colds)
        warm = median_s(lambda: evaluate_all(models, inp.candidates), args.repeats)
        print(f"{label:<30} {n:>10} {build * 1e3:>9.1f} {n / cold:>13,.0f} {n / warm:>13,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
