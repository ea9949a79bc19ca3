"""Which extra cost could close the measured rows' gaps?  Bounds from the rows' own tolerances.

The published measured runs (``scenarios/validation/measured_*.yaml``) that wss misses are too slow
in reality: some cost the model leaves out.  This script asks, for each candidate kind of cost
charged once per unit of work (per step, per sample, per token, per token per layer, per token per
attention head, per attention score, ...), which per-unit prices keep a row inside its tolerance,
and whether one price fits every row::

    python tools/gap_bounds.py                 # at the model's floor: kernel_efficiency 1, no runtime costs
    python tools/gap_bounds.py --shipped       # on top of the shipped (calibrated) parameters
    python tools/gap_bounds.py --rows m1,m4,m5,m6

A row with published throughput ``p``, tolerance ``t``, global batch ``B`` and simulated step ``T0``
stays within tolerance with an added serial cost ``x * f`` (``f`` units of the kind per step) iff
``B / (p (1 + t)) <= T0 + x f <= B / (p (1 - t))``.  Each row gives an interval of ``x``; a kind of
cost that could close every gap at one price has intervals that overlap.  The floor (every
calibrated cost undone) leaves the most room for a new cost; ``--shipped`` asks the stricter
question of adding it to today's model.  Overlap is necessary, not sufficient: a cost also needs a
mechanism that a public document describes before it goes into the model.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from wss.model.scenario import Scenario, TransformerBlock, load_scenario
from wss.model.simulate import simulate
from wss.studies.validation import Case, load_cases, measured_rows

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "scenarios" / "validation").glob("measured_*.yaml"))
FLOOR = {"hardware.wafer.kernel_efficiency": 1.0, "hardware.runtime.preset": "ideal"}


@dataclass(frozen=True)
class Row:
    """One measured run: what it published and what the model simulates."""

    name: str
    published: float
    tolerance: float
    scenario: Scenario
    step_s: float


def _blocks(s: Scenario) -> list:
    layers = s.workload.model.layers
    # Every transformer block, a DiT block (a transformer block with adaLN) included.
    return [layer for layer in layers if isinstance(layer, TransformerBlock) for _ in range(layer.repeat)]


def _scores(s: Scenario) -> float:
    """Attention scores per sample per step (heads x query x key pairs over every block; causal halves)."""
    seq = s.seq_len
    return sum(b.n_heads * seq * seq * (0.5 if b.causal else 1.0) for b in _blocks(s))


def _weights(s: Scenario) -> float:
    """Weights streamed per pass (the cost of a lower achieved efficiency is proportional to these)."""
    from wss.model.plan import make_plan

    return float(sum(k.kernel.nnz for k in make_plan(s).kernels))


#: Kinds of cost: the units of each in one step of a scenario.
UNITS: dict[str, Callable[[Scenario], float]] = {
    "per step": lambda s: 1.0,
    "per sample": lambda s: s.training.global_batch,
    "per token": lambda s: s.training.global_batch * s.seq_len,
    "per token per block": lambda s: s.training.global_batch * s.seq_len * len(_blocks(s)),
    "per token per head": lambda s: s.training.global_batch * s.seq_len * sum(b.n_heads for b in _blocks(s)),
    "per sample per head": lambda s: s.training.global_batch * sum(b.n_heads for b in _blocks(s)),
    "per attention score": lambda s: s.training.global_batch * _scores(s),
    "per token per weight": lambda s: s.training.global_batch * s.seq_len * _weights(s),
}


def rows(cases: Sequence[Case], overrides: dict[str, object]) -> list[Row]:
    out = []
    for case in cases:
        (scenario,) = case.scenarios.values()
        scenario = load_scenario(scenario, overrides) if overrides else scenario
        step = scenario.training.global_batch / simulate(scenario).samples_per_s
        out.append(Row(case.name, case.spec.published, case.spec.tolerance or 0.0, scenario, step))
    return out


def window(row: Row, units: float) -> tuple[float, float]:
    """The per-unit prices that keep ``row`` within its tolerance (lo > hi: none does)."""
    batch = row.scenario.training.global_batch
    lo = (batch / (row.published * (1 + row.tolerance)) - row.step_s) / units
    hi = (batch / (row.published * (1 - row.tolerance)) - row.step_s) / units if row.tolerance < 1 else math.inf
    return max(lo, 0.0), hi


def table(rs: Sequence[Row]) -> str:
    """One line per kind of cost: each row's window of prices, and their overlap."""
    short = [r.name.split("_")[1] for r in rs]
    lines = ["floor of each row (simulated step, published step):"]
    lines += [f"  {n}: {r.step_s:.4g} s vs {r.scenario.training.global_batch / r.published:.4g} s"
              for n, r in zip(short, rs)]
    lines.append(f"{'cost':<22}" + "".join(f"{n:>22}" for n in short) + f"{'every row':>22}")
    for kind, units_of in UNITS.items():
        ws = [window(r, units_of(r.scenario)) for r in rs]
        lo, hi = max(w[0] for w in ws), min(w[1] for w in ws)
        cells = "".join(f"{_fmt(w):>22}" for w in ws)
        lines.append(f"{kind:<22}{cells}{(_fmt((lo, hi)) if lo <= hi else 'none'):>22}")
    return "\n".join(lines)


def _fmt(w: tuple[float, float]) -> str:
    lo, hi = w
    if lo > hi:
        return "none"
    return f"{lo:.3g}..{hi:.3g} s"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shipped", action="store_true", help="add the cost to the shipped parameters, not the floor")
    ap.add_argument("--rows", default="", help="comma-separated row ids (default: every measured row)")
    args = ap.parse_args(argv)
    cases = load_cases(CASES)
    if args.rows:
        picked = measured_rows(cases, args.rows)
        if picked is None:
            print(f"error: --rows: {args.rows!r} do not all name a measured case", file=sys.stderr)
            return 2
        cases = picked
    print(table(rows(cases, {} if args.shipped else dict(FLOOR))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
