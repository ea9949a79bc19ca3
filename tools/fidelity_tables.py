"""Print the two tables of docs/fidelity.md that compare closed forms with the simulator.

* the planner's analytic level against the simulator on every shipped scenario (the chosen plan,
  its analytic step time, the simulated one, the error);
* the estimate (``wss estimate``) against the simulator (simulated, estimated, difference, what
  bounds the step, and the difference again with 64 GiB buffers where an effect is documented).

Both run each shipped scenario as ``tests/fidelity/fidelity_helpers.py`` says (the slow ones
reduced), so the printed rows are what the tests check; paste them into docs/fidelity.md and the
differences into ``CROSS_CHECK`` when the model changes::

    python tools/fidelity_tables.py            # about a minute
    python tools/fidelity_tables.py --full     # also the full-size slow rows (about a minute more)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import wss
from wss.model.plan import rank_candidates
from wss.studies.estimate import estimate
from wss.views.summary import fmt_time

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fidelity"))
from fidelity_helpers import CROSS_CHECK, DEEP_BUFFERS, FULL_SIZE  # noqa: E402


def _pct(a: float, b: float) -> str:
    return f"{a / b - 1:+.2%}"


def planner_rows() -> list[str]:
    """| scenario | chosen | analytic | simulated | error |"""
    rows = []
    for name in sorted(CROSS_CHECK):
        s = wss.load_scenario(ROOT / "scenarios" / f"{name}.yaml", CROSS_CHECK[name][0])
        best = rank_candidates(s)[0]
        sim = wss.simulate(s).step_time_s
        chosen = f"{best.checkpointing} x {len(best.micro_batches)}"
        rows.append(f"| {name} | {chosen} | {fmt_time(best.step_time_s)} | {fmt_time(sim)} | "
                    f"{_pct(best.step_time_s, sim)} |")
    return rows


def estimate_rows(full: bool) -> list[str]:
    """| scenario | simulated | estimated | difference | bound by | explanation | with 64 GiB buffers |"""
    rows = []
    runs = [(name, CROSS_CHECK[name][0], CROSS_CHECK[name][2]) for name in CROSS_CHECK]
    if full:
        runs += [(f"{name}, full size", {}, None) for name in FULL_SIZE]
    for label, overrides, effect in runs:
        path = ROOT / "scenarios" / f"{label.split(',')[0]}.yaml"
        s = wss.load_scenario(path, overrides)
        est, sim = estimate(s), wss.simulate(s)
        deep = ""
        if effect is not None:
            s2 = wss.load_scenario(path, {**overrides, **DEEP_BUFFERS})
            deep = _pct(estimate(s2).step_time_s, wss.simulate(s2).step_time_s)
        rows.append(f"| {label} | {fmt_time(sim.step_time_s)} | {fmt_time(est.step_time_s)} | "
                    f"{_pct(est.step_time_s, sim.step_time_s)} | {sim.bound_by} | {effect or '-'} | {deep} |")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="also the full-size rows of the slow scenarios")
    args = ap.parse_args(argv)
    print("The planner's analytic level:")
    print("\n".join(planner_rows()))
    print("\nCross-check of the estimate:")
    print("\n".join(estimate_rows(args.full)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
