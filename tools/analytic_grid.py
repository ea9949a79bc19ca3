"""The planner's analytic level against the simulator on a grid of models x wafers x batches.

For each point the planner ranks every candidate (checkpointing x micro-batch split) with the
analytic level (``wss.model.plan.analytic``, through ``wss.model.plan.search``); the simulator then
runs the candidate it chose.  The table gives both step times and the analytic level's error, and is
what docs/fidelity.md quotes ("A grid of models, wafers and batches")::

    python tools/analytic_grid.py            # the grid, as a Markdown table
    python tools/analytic_grid.py --quick    # a smaller grid (1 and 4 wafers)
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

import wss
from wss.model.plan import rank_candidates

ROOT = Path(__file__).resolve().parents[1]
BASE = ROOT / "scenarios" / "cerebras_gpt_13b.yaml"

#: Model, and two global batches: the paper's (Cerebras-GPT: Dey et al. 2023; GPT-3: Brown et al. 2020)
#: and an odd one that does not divide evenly over the wafers.
MODELS = {
    "cerebras-gpt-111m": (120, 67),
    "cerebras-gpt-1.3b": (264, 131),
    "cerebras-gpt-6.7b": (528, 131),
    "cerebras-gpt-13b": (720, 131),
    "gpt3-175b": (1536, 1031),
}
WAFERS = (1, 4, 16, 64)


def point(model: str, wafers: int, batch: int) -> tuple[float, float, str]:
    """(analytic step time of the chosen candidate, simulated step time of it, the candidate)."""
    s = wss.load_scenario(BASE, {"workload.model": model, "hardware.wafers": wafers,
                                 "training.global_batch": batch, "training.steps": 2})
    best = rank_candidates(s)[0]
    return best.step_time_s, wss.simulate(s).step_time_s, best.short()


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="1 and 4 wafers only")
    args = ap.parse_args(argv)
    wafers = WAFERS[:2] if args.quick else WAFERS
    print("| model | wafers | batch | chosen | analytic | simulated | error |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    worst = 0.0
    t0 = time.perf_counter()
    for model, batches in MODELS.items():
        for n in wafers:
            for batch in batches:
                if batch < n:
                    continue
                a, sim, chosen = point(model, n, batch)
                err = a / sim - 1.0
                worst = max(worst, abs(err))
                print(f"| {model} | {n} | {batch} | {chosen} | {a:.4g} s | {sim:.4g} s | {err:+.2%} |", flush=True)
    print(f"\nworst |error| {worst:.2%}; {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
