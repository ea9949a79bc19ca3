"""Calibrate the model's unpublished parameters on published measured training runs.

No public document states the runtime's fixed costs or the fraction of the cycle model's ideal
that weight kernels achieve.  This script fits them to the published measured runs that ship as
``wss reproduce`` cases (``scenarios/validation/measured_*.yaml``): the cases marked
``calibration: calibrated on`` are fitted, those marked ``held out`` only checked.  It prints the
fitted values (to two significant digits, as they go into ``configs/``) and every row's error at
those values, so the fit can be re-run and audited whenever the model changes::

    python tools/calibrate.py                       # fit the default parameters with the simulator
    python tools/calibrate.py --analytic            # the same with the planner's analytic level (fast)
    python tools/calibrate.py --params hardware.runtime.step_overhead_s,hardware.runtime.kernel_switch_s
    python tools/calibrate.py --at                  # no fit: the errors at the shipped values
    python tools/calibrate.py --on m1,m4,m6 --params ...   # try other calibration rows (a hypothesis test)
    python tools/calibrate.py --params hardware.wafer.kernel_efficiency@wse2,\
hardware.wafer.kernel_efficiency@wse3,hardware.runtime.step_overhead_s

A key with ``@WAFER`` (a wafer preset's name) moves the parameter only in the rows run on that wafer: one value
per chip generation.  An input pipeline's cost (``hardware.input_pipeline.*``) moves only in the rows whose
pipeline pays it (the rows of that kind)::

    python tools/calibrate.py --on m4 --params hardware.input_pipeline.prepare_s_per_token     # masked tokens
    python tools/calibrate.py --on m12 --params hardware.input_pipeline.prepare_s_per_sample   # image decoding

The fit minimises the sum of squared log errors of the calibration rows' throughput (a factor of
two too fast weighs as much as a factor of two too slow) with Nelder-Mead on each parameter's
scale (log for costs, logit for fractions), starting from the shipped values.  Every row is
re-planned at each trial point, so ``auto`` plans follow the parameters as they would in use.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from wss.model.plan import rank_candidates
from wss.model.scenario import Scenario, load_scenario
from wss.model.simulate import simulate
from wss.studies.validation import Case, load_cases, measured_rows

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "scenarios" / "validation").glob("measured_*.yaml"))


@dataclass(frozen=True)
class Parameter:
    """A scenario field the fit may move, and the scale it is searched on."""

    key: str
    scale: str  # "log" (positive cost) or "logit" (fraction in (0, 1])

    def to_x(self, value: float) -> float:
        if self.scale == "log":
            return math.log(max(value, 1e-9))
        v = min(max(value, 1e-6), 1 - 1e-6)
        return math.log(v / (1 - v))

    def from_x(self, x: float) -> float:
        return math.exp(x) if self.scale == "log" else 1.0 / (1.0 + math.exp(-x))


KNOWN = {
    "hardware.runtime.step_overhead_s": Parameter("hardware.runtime.step_overhead_s", "log"),
    "hardware.runtime.micro_batch_overhead_s": Parameter("hardware.runtime.micro_batch_overhead_s", "log"),
    "hardware.runtime.kernel_switch_s": Parameter("hardware.runtime.kernel_switch_s", "log"),
    "hardware.wafer.kernel_efficiency": Parameter("hardware.wafer.kernel_efficiency", "logit"),
    "hardware.wafer.nonweight_efficiency": Parameter("hardware.wafer.nonweight_efficiency", "logit"),
    # The input pipeline's preparation cost of the row's kind (configs/input_pipeline): fit it on a row whose
    # scenario states its pipeline (--on m4 for masked tokens, --on m12 for image decoding).
    "hardware.input_pipeline.prepare_s_per_token": Parameter("hardware.input_pipeline.prepare_s_per_token", "log"),
    "hardware.input_pipeline.prepare_s_per_sample": Parameter("hardware.input_pipeline.prepare_s_per_sample", "log"),
}
DEFAULT = ("hardware.runtime.step_overhead_s", "hardware.wafer.kernel_efficiency")


def _split(key: str) -> tuple[str, str | None]:
    """``field@wafer`` -> (field, wafer); a plain key applies to every row."""
    field, _, wafer = key.partition("@")
    return field, wafer or None


def _for_case(values: dict[str, float], scenario: Scenario) -> dict[str, float]:
    """The values that apply to a row: plain keys, and ``@wafer`` keys of the wafer it runs on."""
    out = {}
    for key, v in values.items():
        field, wafer = _split(key)
        if field.startswith("hardware.input_pipeline.") and not _shipped(scenario, field):
            continue  # a cost the row's input pipeline does not pay (another kind, or none stated) stays zero
        if wafer is None or wafer == scenario.hardware.wafer.name:
            out[field] = v
    return out


def _shipped(scenario: Scenario, key: str) -> float:
    node: object = scenario
    for part in _split(key)[0].split("."):
        node = getattr(node, part)
    return float(node)  # type: ignore[arg-type]


def _one(case: Case) -> Scenario:
    (scenario,) = case.scenarios.values()
    return scenario


def throughput(scenario: Scenario, analytic: bool) -> float:
    """Samples per second: simulated, or the planner's analytic step time of its chosen plan."""
    if analytic:
        return scenario.training.global_batch / rank_candidates(scenario)[0].step_time_s
    return simulate(scenario).samples_per_s


def errors_at(cases: Sequence[Case], values: dict[str, float], analytic: bool) -> dict[str, float]:
    """Each case's log error ln(simulated / published) with the parameters set to ``values``."""
    out = {}
    for case in cases:
        own = _for_case(values, _one(case))
        scenario = load_scenario(_one(case), own) if own else _one(case)
        out[case.name] = math.log(throughput(scenario, analytic) / case.spec.published)
    return out


def fit(cases: Sequence[Case], params: Sequence[Parameter], analytic: bool,
        log: Callable[[str], None] = print) -> dict[str, float]:
    """The parameter values minimising the calibration rows' squared log errors."""
    def shipped(key: str) -> float:
        wafer = _split(key)[1]
        row = next((_one(c) for c in cases if wafer in (None, _one(c).hardware.wafer.name)), None)
        if row is None:
            raise ValueError(f"{key}: no calibration row runs on wafer {wafer!r}")
        return _shipped(row, key)

    x0 = np.array([p.to_x(shipped(p.key)) for p in params])

    def loss(x: np.ndarray) -> float:
        values = {p.key: p.from_x(float(v)) for p, v in zip(params, x)}
        err = errors_at(cases, values, analytic)
        total = float(sum(e * e for e in err.values()))
        log("  " + ", ".join(f"{k.rsplit('.', 1)[-1]}={v:.4g}" for k, v in values.items()) + f"  loss {total:.5f}")
        return total

    res = minimize(loss, x0, method="Nelder-Mead",
                   options={"xatol": 0.01, "fatol": 1e-4, "maxiter": 60 if not analytic else 400})
    return {p.key: float(f"{p.from_x(float(v)):.2g}") for p, v in zip(params, res.x)}


def report(cases: Sequence[Case], values: dict[str, float], analytic: bool) -> str:
    """One line per row: role, published, model, error, tolerance, within it or not."""
    err = errors_at(cases, values, analytic)
    lines = [f"{'case':<28} {'role (file)':<14} {'published':>10} {'model':>10} {'error':>8}  tolerance"]
    for case in cases:
        e = math.exp(err[case.name]) - 1.0
        tol = case.spec.tolerance or 0.0
        lines.append(f"{case.name:<28} {case.spec.calibration or '-':<14} {case.spec.published:>10.4g} "
                     f"{case.spec.published * (1 + e):>10.4g} {e:>+8.1%}  ±{tol:.0%} "
                     f"{'within' if abs(e) <= tol else 'OUTSIDE'}")
    return "\n".join(lines)


def _paced_by_inputs(scenario: Scenario) -> bool:
    """Does the row state an input pipeline that costs something (it was calibrated on that cost)?"""
    pipe = scenario.hardware.input_pipeline
    return bool(pipe.prepare_s_per_sample or pipe.prepare_s_per_token)


def _fits(case: Case, keys: Sequence[str]) -> bool:
    """Is a row marked 'calibrated on' one to fit these keys on?  A row calibrated on its input pipeline's cost
    fits that cost only, and the other parameters only the rows without one: an input-bound row's rate is its
    input workers', which tells nothing of the runtime's costs or the wafer's efficiency."""
    inputs = any(_split(k)[0].startswith("hardware.input_pipeline.") for k in keys)
    return _paced_by_inputs(_one(case)) == inputs


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--params", default=",".join(DEFAULT),
                    help=f"comma-separated scenario keys to fit (known: {', '.join(KNOWN)})")
    ap.add_argument("--analytic", action="store_true", help="use the planner's analytic level instead of simulating")
    ap.add_argument("--at", action="store_true", help="no fit: print the errors at the shipped values")
    ap.add_argument("--on", default="",
                    help="comma-separated row ids to fit instead of the cases marked 'calibrated on' (e.g. m1,m4,m6)")
    args = ap.parse_args(argv)
    cases = load_cases(CASES)
    keys = [k for k in args.params.split(",") if k]
    calibration = [c for c in cases if c.spec.calibration == "calibrated on" and _fits(c, keys)]
    if args.on:
        picked = measured_rows(cases, args.on)
        if picked is None:
            print(f"error: --on: rows {args.on!r} do not all name a measured case", file=sys.stderr)
            return 2
        calibration = picked
    unknown = [k for k in keys if _split(k)[0] not in KNOWN]
    if unknown:
        print(f"error: --params: unknown {', '.join(unknown)}; known: {', '.join(KNOWN)}", file=sys.stderr)
        return 2
    values: dict[str, float] = {}
    if not args.at:
        print(f"fitting {', '.join(keys)} on {', '.join(c.name for c in calibration)}")
        try:
            values = fit(calibration, [Parameter(k, KNOWN[_split(k)[0]].scale) for k in keys], args.analytic)
        except ValueError as exc:
            print(f"error: --params: {exc}", file=sys.stderr)
            return 2
        print("fitted (two significant digits):")
        for k, v in values.items():
            print(f"  {k}: {v:g}")
    print(report(cases, values, args.analytic))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
