"""How much of the chip's peak each measured run's weight kernels reached, against what wss's cycle model allows.

One achieved fraction per chip (``hardware.wafer.kernel_efficiency``) is what the calibration fits.  This
script shows, row by row, what that one number would have to be: it reads the published step, takes away
what wss puts outside the weight kernels (the fixed costs, the non-weight work, waits for the input or the
weights), and divides the weight kernels' FLOPs at the chip's peak by what is left::

    python tools/achieved_fractions.py            # every measured row (about a minute)
    python tools/achieved_fractions.py --rows m7,m8,m10

Columns, per row (times per step, on the analytic level, ``wss estimate``'s):

* ``kernels``: the weight kernels' time in wss; ``at 1``: the same at ``kernel_efficiency`` 1, the cycle model's
  own schedule (lanes, partial sums, SIMD rounding); ``flops``: their FLOPs (forward, backward data, weight
  gradients: ``6 x nnz`` a token) at the chip's peak;
* ``ideal``: ``flops / at 1``, the fraction of peak the cycle model's schedule reaches;
* ``logged``: ``flops`` over the published step less wss's other terms, the fraction the run's kernels reached
  if wss's other terms are right; ``wss``: the fraction wss gives them (``ideal x kernel_efficiency``);
* ``needed``: ``logged / ideal``, the ``kernel_efficiency`` that would put this row on its log.

A row whose step is set by something else (its input workers) gives no reading of its kernels; its
``logged`` is then meaningless and is marked ``-``.  The spread of ``needed`` over rows of one chip and
release is what one fitted efficiency cannot follow.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from wss.model.plan import make_plan
from wss.model.scenario import Scenario, load_scenario
from wss.model.workload.builder import expand_model
from wss.model.workload.ops import StreamedKernel
from wss.studies.estimate import estimate
from wss.studies.validation import Case, load_cases

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "scenarios" / "validation").glob("measured_*.yaml"))


@dataclass(frozen=True)
class Reading:
    """One measured row's weight kernels: wss's times, their FLOPs' time at peak, and the published step."""

    row: str
    kernels_s: float  # the weight kernels' time per step in wss
    ideal_s: float  # the same at kernel_efficiency 1
    flops_s: float  # their FLOPs at the chip's peak
    other_s: float  # wss's step less its weight kernels
    published_step_s: float
    input_bound: bool

    @property
    def ideal(self) -> float:
        return self.flops_s / self.ideal_s

    @property
    def wss(self) -> float:
        return self.flops_s / self.kernels_s

    @property
    def logged(self) -> float | None:
        left = self.published_step_s - self.other_s
        return None if self.input_bound or left <= 0 else self.flops_s / left

    @property
    def needed(self) -> float | None:
        logged = self.logged
        return None if logged is None else logged / self.ideal


def _pinned(scenario: Scenario) -> dict[str, Any]:
    """The scenario with its plan's micro-batch size and checkpointing fixed, so that changing an efficiency
    below changes only the time of the work it prices, not the plan the planner would choose for it."""
    plan = make_plan(scenario)
    return {"training.micro_batch": max(plan.micro_batches),
            "training.activation_checkpointing": plan.checkpointing}


def _with(scenario: Scenario, pinned: dict[str, Any], key: str, value: float) -> Scenario:
    return load_scenario(scenario.model_dump(mode="json"), {**pinned, key: value})


def weight_flops(scenario: Scenario) -> float:
    """FLOPs of one wafer's weight kernels per step, as the Result counts the executed ones (recompute aside):
    forward, backward data and weight gradients, 2 each per non-zero weight per input it multiplies."""
    ops = expand_model(scenario.workload.model, scenario.workload.sparsity, scenario.seq_len)
    tokens = scenario.training.global_batch / scenario.hardware.wafers * scenario.seq_len
    return 3.0 * sum(op.executed_flops(tokens) for op in ops if isinstance(op, StreamedKernel)
                     and op.kind == "matmul")


def reading(case: Case) -> Reading:
    """The weight kernels of one measured row, wss against its log."""
    (scenario,) = case.scenarios.values()
    est = estimate(scenario)
    pinned = _pinned(scenario)
    # Non-weight work runs at nonweight_efficiency of its peak: halving the efficiency doubles its time.
    nw = scenario.hardware.wafer.nonweight_efficiency
    slower = estimate(_with(scenario, pinned, "hardware.wafer.nonweight_efficiency", nw / 2))
    nonweight_s = slower.breakdown_s["compute"] - est.breakdown_s["compute"]
    kernels_s = est.breakdown_s["compute"] - nonweight_s
    at_one = estimate(_with(scenario, pinned, "hardware.wafer.kernel_efficiency", 1.0))
    ideal_s = at_one.breakdown_s["compute"] - nonweight_s
    published_step = scenario.training.global_batch / float(case.spec.published)
    return Reading(case.name, kernels_s, ideal_s, weight_flops(scenario) / scenario.hardware.wafer.peak_flops,
                   est.step_time_s - kernels_s, published_step, est.bound_by == "input"
                   or est.breakdown_s.get("input", 0.0) > 0.05 * est.step_time_s)


def _fmt(x: float | None, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def table(readings: Sequence[Reading]) -> str:
    lines = [f"{'row':38s} {'kernels':>9s} {'at 1':>9s} {'flops':>9s} {'ideal':>6s} {'logged':>7s} {'wss':>6s} "
             f"{'needed':>7s}"]
    for r in readings:
        lines.append(f"{r.row.removeprefix('measured_'):38s} {r.kernels_s:9.4g} {r.ideal_s:9.4g} {r.flops_s:9.4g} "
                     f"{r.ideal:6.2f} {_fmt(r.logged, '7.3f'):>7s} {r.wss:6.3f} {_fmt(r.needed, '7.2f'):>7s}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="", help="comma-separated row ids (m7, m14): every measured row if omitted")
    args = ap.parse_args(argv)
    wanted = [r.strip().lower() for r in args.rows.split(",") if r.strip()]
    cases: list[Any] = [c for c in load_cases(CASES)
                        if not wanted or c.name.split("_")[1] in wanted]
    if not cases:
        print(f"error: no measured row matches --rows {args.rows!r}", file=sys.stderr)
        return 2
    print(table([reading(c) for c in cases]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
