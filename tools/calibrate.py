"""Calibrate the model's unpublished parameters on published measured training runs.

No public document states the runtime's fixed costs, the fraction of the cycle model's ideal that a
chip's weight kernels achieve, or how much slower an older software release ran the same work.  This
script fits them to the published measured runs that ship as ``wss reproduce`` cases
(``scenarios/validation/measured_*.yaml``): the cases marked ``calibration: calibrated on`` are
fitted, those marked ``held out`` only checked.  The refit, after any change to a mechanism, is::

    python tools/calibrate.py --write     # fit DEFAULT on the 'calibrated on' rows, write configs/, report

``python tools/refit.py`` runs it and then re-records the baselines and regenerates the generated docs: the
whole refit, one command.  Other uses::

    python tools/calibrate.py                 # fit and report; configs/ untouched
    python tools/calibrate.py --at            # no fit: every row's error at the shipped values
    python tools/calibrate.py --analytic      # report on the planner's analytic level (fast) instead of simulating
    python tools/calibrate.py --on m7,m8,m11 --params hardware.wafer.kernel_efficiency@wse2,...   # a hypothesis
    python tools/calibrate.py --hold hardware.runtime.kernel_switch_s=8e-4   # fit the rest with a cost held
    python tools/calibrate.py --analytic --hold hardware.activation_store.bandwidth_Bps=2.5e10   # a store rate held

``--hold KEY=VALUE`` (repeatable) sets a parameter the fit does not move, in every row it applies to, before the
fit and in the report and the leave-one-out refits: a mechanism's cost at a trial value.  A local fit cannot find
a cost whose shipped value is zero (at zero its rows do not feel it, so the search has no slope to follow), so a
scan of such a cost is a loop over ``--hold`` values, each fitting the rest::

    for v in 0 3e-4 8e-4; do python tools/calibrate.py --hold hardware.runtime.kernel_switch_s=$v; done

``--start KEY=VALUE`` (repeatable) starts the search of a fitted parameter there instead of at its shipped value:
with a scan's best value, the fit can then move such a cost both ways (``--write`` takes it for a cost that ships
at zero, the first refit that moves it, and records where it started).  A cost or bandwidth that ships at zero or
unset in every row it would fit (``kernel_switch_s``; an activation store's ``bandwidth_Bps`` where the rows' store
is unlimited) is fitted only from a ``--start``.  ``--no-loo`` skips the leave-one-out
refits (most of a fit's time) for a quick look at a hypothesis; the refit always makes them.

A key ``FIELD@WAFER`` (a wafer preset's name) moves the field only in the rows run on that wafer: one
value per chip generation.  A key ``FIELD@RELEASE`` (e.g. ``@R1.8``, a runtime preset's ``release``)
moves it only in that release's rows and is fitted on that release's rows alone, after the other
parameters are fitted on the rows of the releases no key names.  An input pipeline's preparation cost
(``hardware.input_pipeline.*``) moves only in the rows whose pipeline pays it (the rows of that kind) and is
fitted on those rows alone, after the rest; the other parameters are fitted on the rows whose pipeline does not
lengthen their step (an input-bound row's rate is its input workers', which tells nothing of the runtime or the
wafer; a row whose costed pipeline never keeps its wafer waiting tells as much as a row without one)::

    python tools/calibrate.py --at    # M4 (masked tokens), M12 (image decoding), M14 b8k (tokenising text) as shipped

The script refuses to fit more parameters than half the rows it fits them on.

It prints, per row, its error at the fitted values and its leave-one-out error: the error when the row is
left out of the fit (its group refitted without it) and then predicted.  A release parameter that only
one row sets cannot be checked that way; its row's leave-one-out figure is then the prediction of the
newest release (``compute_efficiency`` 1), marked ``*``.  Likewise a parameter that only one row of its group
feels (``felt_by``: the activation store's rate, where one row offloads): the refit without that row leaves it
where the full fit put it, so the row's leave-one-out figure is no prediction of it; the fit says so and marks it
``*``.  Rows whose reading is uncertain (M6: the log does not give the sequence length) are shown under each
reading (``READINGS``).

The fit minimises the sum of squared log errors of the calibration rows' throughput (a factor of two
too fast weighs as much as a factor of two too slow), on each parameter's scale (log for costs, logit
for fractions), by trust-region least squares from the shipped values.  Fits run on the planner's
analytic level (within 3% of the simulator on every shipped scenario; fast enough to refit once per
left-out row); every row is re-planned at each trial point, so ``auto`` plans follow the parameters
as they would in use.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import re
import sys
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from wss.model.plan import rank_candidates
from wss.model.scenario import Scenario, load_scenario
from wss.model.simulate import simulate
from wss.studies.estimate import estimate
from wss.studies.validation import Case, load_cases

ROOT = Path(__file__).resolve().parents[1]
CASES = sorted((ROOT / "scenarios" / "validation").glob("measured_*.yaml"))
#: The last refit's record: values before and after, the rows that set them, leave-one-out errors.
RECORD = ROOT / "docs" / "calibration.json"


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
    "hardware.runtime.kernel_pass_min_s": Parameter("hardware.runtime.kernel_pass_min_s", "log"),
    "hardware.runtime.update_overhead_s": Parameter("hardware.runtime.update_overhead_s", "log"),
    "hardware.runtime.compute_efficiency": Parameter("hardware.runtime.compute_efficiency", "logit"),
    "hardware.wafer.kernel_efficiency": Parameter("hardware.wafer.kernel_efficiency", "logit"),
    "hardware.wafer.nonweight_efficiency": Parameter("hardware.wafer.nonweight_efficiency", "logit"),
    # The input pipeline's preparation cost of the row's kind (configs/input_pipeline), fitted on the rows whose
    # scenario states a pipeline that pays it (M4 for masked tokens, M12 for image decoding, M14 b8k for text).
    "hardware.input_pipeline.prepare_s_per_token": Parameter("hardware.input_pipeline.prepare_s_per_token", "log"),
    "hardware.input_pipeline.prepare_s_per_sample": Parameter("hardware.input_pipeline.prepare_s_per_sample", "log"),
    # Each wafer's activation store's bandwidth (a host store: the cluster presets' activation servers), in every row
    # that names such a store; rows that offload no block inputs do not feel it.
    "hardware.activation_store.bandwidth_Bps": Parameter("hardware.activation_store.bandwidth_Bps", "log"),
}
INPUTS = "hardware.input_pipeline."
#: The activation store the cluster presets name (configs/activation_store): where a fitted rate is written.
STORE = "activation-servers"
#: A row is paced by its inputs when its pipeline lengthens its step by more than this fraction (a pipeline that
#: only overlaps the wafer's work changes the step by rounding, if at all).
PACED_BY_INPUTS = 1e-3

#: A parameter's value that says "as the newest release": a release parameter's prediction when no row is left
#: to fit it (leave-one-out of the only row of its release).
NEUTRAL = {"hardware.runtime.compute_efficiency": 1.0}
#: What the refit moves: the newest release's fixed cost per step, each chip's achieved kernel efficiency,
#: and each older release's achieved fraction of the newest release's rate (one row each).  Not the activation
#: servers' rate (the cluster presets' store): of the newest release's rows one offloads (DiT-2B on a CS-2, M10),
#: and GPT-J on R1.7 (M9), which does too, has a factor of its own that would absorb any rate, so a fitted rate
#: would be M10's alone, with no held-out check; it ships as an assumption that row checks.  The input
#: pipelines' preparation costs are not in it: each was read off its one input-bound calibration row (M4, M12,
#: M14 b8k), and with them the fit would move 9 parameters on 15 rows, more than half; the report shows those
#: rows' errors.
DEFAULT = (
    "hardware.runtime.step_overhead_s",
    "hardware.wafer.kernel_efficiency@wse2",
    "hardware.wafer.kernel_efficiency@wse3",
    "hardware.runtime.compute_efficiency@R1.7",
    "hardware.runtime.compute_efficiency@R1.8",
    "hardware.runtime.compute_efficiency@R1.9",
)
#: Rows whose published setting is uncertain: each reading (label, scenario overrides) is shown.  M6: the log
#: gives neither the sequence length nor a configuration file; 4,096 is Llama-2's context, 2,048 the other
#: LLM runs' (shared measurement notes: "treat M6 as uncertain").
READINGS: dict[str, tuple[tuple[str, dict[str, object]], ...]] = {
    "measured_m6_llama2_7b_cs3": (("seq 4096", {}), ("seq 2048", {"training.seq_len": 2048})),
}


def _split(key: str) -> tuple[str, str | None]:
    """``field@selector`` -> (field, selector); a plain key applies to every row."""
    field, _, sel = key.partition("@")
    return field, sel or None


def _release(scenario: Scenario) -> str | None:
    return scenario.hardware.runtime.release


def _selects(sel: str, scenario: Scenario) -> bool:
    """Does ``@sel`` (a wafer preset or a release) name this row's wafer or release?"""
    release = _release(scenario) or ""
    return sel == scenario.hardware.wafer.name or sel.lower() == release.lower()


def _for_case(values: dict[str, float], scenario: Scenario) -> dict[str, float]:
    """The values that apply to a row: plain keys, and ``@`` keys of its wafer or release."""
    out = {}
    for key, v in values.items():
        field, sel = _split(key)
        if field.startswith(INPUTS) and not _shipped(scenario, field):
            continue  # a cost the row's input pipeline does not pay (another kind, or none stated) stays zero
        if sel is None or _selects(sel, scenario):
            out[field] = v
    return out


def _applies(key: str, case: Case) -> bool:
    """Does a key (plain, or ``@`` a wafer or release) reach this row?"""
    sel = _split(key)[1]
    return sel is None or _selects(sel, _one(case))


def _paced_by_inputs(scenario: Scenario) -> bool:
    """Does the row's input pipeline lengthen its step at the shipped values (the row then fits only that cost)?

    A row whose pipeline costs something but never keeps the wafer waiting (BERT-large's SST-2 rows, whose
    wafer is slower than the tokeniser) says as much about the runtime and the wafer as a row without one, so
    it stays with them; the analytic level answers, with the pipeline's costs and without them."""
    pipe = scenario.hardware.input_pipeline
    if not (pipe.prepare_s_per_sample or pipe.prepare_s_per_token):
        return False
    return _lengthens(json.dumps(scenario.model_dump(mode="json"), sort_keys=True))


@functools.cache
def _lengthens(scenario_json: str) -> bool:
    """:func:`_paced_by_inputs` of a scenario given as JSON (cached: each row is asked once per group and fit)."""
    costed = json.loads(scenario_json)
    free = json.loads(scenario_json)
    free["hardware"]["input_pipeline"].update(prepare_s_per_sample=0.0, prepare_s_per_token=0.0)
    return bool(estimate(costed).step_time_s > estimate(free).step_time_s * (1 + PACED_BY_INPUTS))


def _shipped(scenario: Scenario, key: str) -> float:
    """The row's value of a parameter; a field the row leaves unset (an unlimited store's bandwidth) reads 0."""
    node: object = scenario
    for part in _split(key)[0].split("."):
        node = getattr(node, part)
    return 0.0 if node is None else float(node)  # type: ignore[arg-type]


def _limits(key: str, scenario: Scenario) -> tuple[float, float]:
    """The range the scenario's schema accepts for a parameter (its field's bounds): the fit searches within it,
    so a trial value is never one the scenario would refuse."""
    *path, name = _split(key)[0].split(".")
    node: object = scenario
    for part in path:
        node = getattr(node, part)
    low, high = -math.inf, math.inf
    for bound in type(node).model_fields[name].metadata:  # type: ignore[attr-defined]
        if getattr(bound, "ge", None) is not None:
            low = float(bound.ge)
        if getattr(bound, "gt", None) is not None:
            low = math.nextafter(float(bound.gt), math.inf)
        if getattr(bound, "le", None) is not None:
            high = float(bound.le)
        if getattr(bound, "lt", None) is not None:
            high = math.nextafter(float(bound.lt), -math.inf)
    return low, high


def _one(case: Case) -> Scenario:
    (scenario,) = case.scenarios.values()
    return scenario


def row_label(case: Case) -> str:
    """``measured_m14_bert_base_sst2_b1k`` -> ``M14 b1k``; ``measured_m8_gptj_...`` -> ``M8``; a run the
    measurement table does not number, ``measured_fc_mnist_floor_cs2`` -> ``FC-MNIST-FLOOR``."""
    m = re.match(r"measured_(m\d+)_", case.name)
    batch = re.search(r"_(b\d+k?)$", case.name)
    if m is None:
        return "-".join(case.name.split("_")[1:-1]).upper()
    return m.group(1).upper() + (f" {batch.group(1)}" if batch else "")


def throughput(scenario: Scenario, analytic: bool) -> float:
    """Samples per second: simulated, or the planner's analytic step time of its chosen plan."""
    if analytic:
        return scenario.training.global_batch / rank_candidates(scenario)[0].step_time_s
    return simulate(scenario).samples_per_s


_SEEN: dict[tuple[str, bool, str], float] = {}


def error_of(case: Case, values: dict[str, float], analytic: bool, reading: dict[str, object] | None = None) -> float:
    """A row's log error ln(model / published) with the parameters set to ``values`` (and a reading's overrides).

    Remembered per row and the values that apply to it, so moving another chip's or release's parameter
    costs nothing."""
    base = _one(case)
    own: dict[str, object] = {**_for_case(values, base), **(reading or {})}
    key = (case.name, analytic, repr(sorted(own.items())))
    if key not in _SEEN:
        scenario = load_scenario(base, own) if own else base
        _SEEN[key] = math.log(throughput(scenario, analytic) / case.spec.published)
    return _SEEN[key]


def errors_at(cases: Sequence[Case], values: dict[str, float], analytic: bool) -> dict[str, float]:
    """Each case's log error ln(simulated / published) with the parameters set to ``values``."""
    return {case.name: error_of(case, values, analytic) for case in cases}


@dataclass(frozen=True)
class Group:
    """Parameters fitted together, and the calibration rows that fit them."""

    params: tuple[Parameter, ...]
    rows: tuple[Case, ...]
    release: str | None  # None: the rows of the releases no key names (or an input pipeline's cost)


def _pays(case: Case, field: str) -> bool:
    """Does the row's input pipeline pay this preparation cost (its shipped value is not zero)?"""
    return bool(_shipped(_one(case), field))


def groups(keys: Sequence[str], calibration: Sequence[Case]) -> list[Group]:
    """The base group (plain and ``@wafer`` keys, on the rows of unnamed releases), then one group per release,
    then one per input pipeline's cost.  Rows bound by a costed input pipeline fit only that cost."""
    params = [Parameter(k, KNOWN[_split(k)[0]].scale) for k in keys]
    inputs = [p for p in params if p.key.startswith(INPUTS)]
    params = [p for p in params if not p.key.startswith(INPUTS)]
    step_rows = [c for c in calibration if not _paced_by_inputs(_one(c))]
    release = {c.name: (_release(_one(c)) or "").lower() for c in step_rows}
    named = {(_split(p.key)[1] or "").lower() for p in params} & set(release.values())
    base = tuple(p for p in params if (_split(p.key)[1] or "").lower() not in named)
    out = [Group(base, tuple(c for c in step_rows if release[c.name] not in named), None)]
    for rel in sorted(named):
        out.append(Group(tuple(p for p in params if (_split(p.key)[1] or "").lower() == rel),
                         tuple(c for c in step_rows if release[c.name] == rel), rel))
    for p in inputs:
        out.append(Group((p,), tuple(c for c in calibration if _pays(c, p.key)), None))
    return out


def _start(key: str, rows: Sequence[Case], everything: Sequence[Case]) -> float:
    """The shipped value of a parameter, read from a row it applies to."""
    sel = _split(key)[1]
    for case in (*rows, *everything):
        if sel is None or _selects(sel, _one(case)):
            return _shipped(_one(case), key)
    raise ValueError(f"{key}: no row runs on wafer or release {sel!r}")


def fit_group(group: Group, fixed: dict[str, float], analytic: bool, everything: Sequence[Case],
              log: Callable[[str], None] = lambda _: None, start: dict[str, float] | None = None,
              xtol: float = 1e-3) -> dict[str, float]:
    """The group's values minimising its rows' squared log errors, the others held at ``fixed``; the search
    starts from ``start`` (else the shipped values)."""
    params = group.params
    if not params:
        return {}
    if not group.rows:  # nothing left to fit on: the newest release's value, or not identified
        return {p.key: NEUTRAL.get(_split(p.key)[0], math.nan) for p in params}

    # Each parameter within the range its field accepts (read from a row it applies to).
    limits = [_limits(p.key, _one(next((c for c in (*group.rows, *everything)
                                        if _for_case({p.key: 1.0}, _one(c))), group.rows[0]))) for p in params]

    def residuals(x: np.ndarray) -> np.ndarray:
        values = {**fixed, **{p.key: min(max(p.from_x(float(v)), lo), hi)
                              for p, v, (lo, hi) in zip(params, x, limits)}}
        errs = np.array([error_of(c, values, analytic) for c in group.rows])
        log("  " + ", ".join(f"{p.key.rsplit('.', 1)[-1]}={values[p.key]:.4g}" for p in params)
            + f"  loss {float(errs @ errs):.5f}")
        return errs

    x0 = np.array([p.to_x((start or {}).get(p.key) or _start(p.key, group.rows, everything)) for p in params])
    # A trust-region least-squares fit: a handful of Jacobians, each one evaluation per parameter and row.
    lower = np.array([p.to_x(lo) for p, (lo, _) in zip(params, limits)])
    upper = np.array([p.to_x(hi) for p, (_, hi) in zip(params, limits)])
    x0 = np.clip(x0, lower + 1e-9, upper - 1e-9)
    res = least_squares(residuals, x0, diff_step=1e-3, xtol=xtol, ftol=1e-6, bounds=(lower, upper))
    return {p.key: float(f"{min(max(p.from_x(float(x)), lo), hi):.2g}")
            for p, x, (lo, hi) in zip(params, res.x, limits)}


def fit(gs: Sequence[Group], analytic: bool, everything: Sequence[Case],
        log: Callable[[str], None] = lambda _: None, held: dict[str, float] | None = None,
        start: dict[str, float] | None = None) -> dict[str, float]:
    """Every group's values: the base group first, then each release on top of it; the ``held`` values (keys
    no group fits) apply to every fit and are returned with the fitted ones; ``start``: where the search of a
    fitted key begins, where not at its shipped value."""
    values: dict[str, float] = dict(held or {})
    for g in gs:
        values.update(fit_group(g, values, analytic, everything, log, start=start))
    return values


#: A row whose log error moves by less than this when a parameter is nudged does not feel the parameter.
FELT = 1e-6


def felt_by(param: Parameter, rows: Sequence[Case], values: dict[str, float], analytic: bool) -> tuple[Case, ...]:
    """The rows whose error moves when ``param`` moves a little from ``values`` (a tenth on its own scale): the rows
    that can set it.  A row that offloads no block inputs does not feel the activation store's rate, a CS-2 row not
    WSE-3's efficiency."""
    nudged = {**values, param.key: param.from_x(param.to_x(values[param.key]) + 0.1)}
    return tuple(c for c in rows
                 if abs(error_of(c, nudged, analytic) - error_of(c, values, analytic)) > FELT)


def set_alone(gs: Sequence[Group], values: dict[str, float], analytic: bool) -> dict[str, list[str]]:
    """Row -> the fitted parameters of its group that it alone feels (a release's one row is said apart)."""
    out: dict[str, list[str]] = {}
    for g in gs:
        if len(g.rows) < 2:
            continue
        for p in g.params:
            rows = felt_by(p, g.rows, values, analytic)
            if len(rows) == 1:
                out.setdefault(rows[0].name, []).append(p.key)
    return out


def leave_one_out(gs: Sequence[Group], values: dict[str, float], analytic: bool,
                  everything: Sequence[Case], alone: Container[str] = ()) -> dict[str, tuple[float, bool]]:
    """Each calibration row's log error when its group is refitted without it: (error, not a prediction of every
    parameter: the row is its release's only one, or in ``alone``, the only row to feel a parameter, which the
    refit without it then leaves where the full fit put it)."""
    out = {}
    for g in gs:
        for case in g.rows:
            rest = Group(g.params, tuple(c for c in g.rows if c is not case), g.release)
            fixed = {k: v for k, v in values.items() if all(k != p.key for p in g.params)}
            # From the full fit's values, to the precision the values are given in (two digits).
            refit = {**fixed, **fit_group(rest, fixed, analytic, everything, start=values, xtol=1e-2)}
            if any(math.isnan(v) for v in refit.values()):
                continue  # a parameter only this row sets, with no neutral value: no prediction
            out[case.name] = (error_of(case, refit, analytic), not rest.rows or case.name in alone)
            print(f"  leave out {row_label(case)}: {math.exp(out[case.name][0]) - 1:+.1%}", flush=True)
    return out


def too_many(keys: Sequence[str], rows: int) -> str | None:
    """The refusal when the fit has more parameters than half its rows, else None."""
    if 2 * len(keys) > rows:
        return (f"{len(keys)} parameters on {rows} calibration rows: a fit may move at most half as many parameters "
                f"as it has rows ({rows // 2} here); name fewer parameters (--params) or more rows (--on)")
    return None


def _tolerance_mark(e: float, tol: float) -> str:
    return "within" if abs(e) <= tol else "OUTSIDE"


def report(cases: Sequence[Case], values: dict[str, float], analytic: bool,
           loo: dict[str, tuple[float, bool]] | None = None, fitted: Sequence[Case] = ()) -> str:
    """One line per row (and per reading of an uncertain row): release, chip, role in this fit (the case
    file's without one), error, leave-one-out error."""
    loo = loo or {}
    names = {c.name for c in fitted}
    lines = [f"{'row':<12} {'release':<8} {'chip':<5} {'role':<13} {'published':>10} {'model':>10} {'error':>8} "
             f"{'LOO':>9}  tolerance"]
    for case in cases:
        sc, tol = _one(case), case.spec.tolerance or 0.0
        for label, reading in READINGS.get(case.name, (("", {}),)):
            e = math.exp(error_of(case, values, analytic, reading)) - 1.0
            left = loo.get(case.name) if not reading else None
            lo = "" if left is None else f"{math.exp(left[0]) - 1.0:+.1%}" + ("*" if left[1] else "")
            name = row_label(case) + (f" {label}" if label else "")
            lines.append(f"{name:<12} {_release(sc) or '-':<8} {sc.hardware.wafer.name:<5} "
                         f"{_role(case, names):<13} {case.spec.published:>10.4g} "
                         f"{case.spec.published * (1 + e):>10.4g} {e:>+8.1%} {lo:>9}  ±{tol:.0%} "
                         f"{_tolerance_mark(e, tol)}" + (f"; LOO {_tolerance_mark(math.exp(left[0]) - 1, tol)}"
                                                         if left else ""))
    return "\n".join(lines)


def _role(case: Case, fitted: set[str]) -> str:
    if fitted:
        return "calibrated on" if case.name in fitted else "held out"
    return case.spec.calibration or "-"


def _has_line(path: Path, name: str) -> bool:
    """Does the preset file give ``name`` a value of its own (a ``name: value`` line, not ``null``)?"""
    return re.search(rf"^{name}:\s*(?!null)[^\s#]+", path.read_text(), re.M) is not None


def _preset_kind(path: Path) -> str | None:
    m = re.search(r"^kind:\s*(\S+)", path.read_text(), re.M)
    return m.group(1) if m else None


def _targets(key: str, rows: Sequence[Case] = ()) -> list[Path]:
    """The preset files a fitted key lives in: its wafer's, its release's, every runtime preset's, or the input
    pipeline preset of the kind of the rows that pay it."""
    field, sel = _split(key)
    kind = field.split(".")[1]  # wafer | runtime | input_pipeline | activation_store
    folder = ROOT / "configs" / kind
    files = sorted(folder.glob("*.yaml"))
    if kind == "activation_store":
        names = {_one(c).hardware.activation_store.name for c in rows} or {STORE}
        return [p for p in files if p.stem in names and _has_line(p, field.rsplit(".", 1)[-1])]
    if kind == "wafer":
        return [folder / f"{sel}.yaml"] if sel else files
    if kind == "input_pipeline":
        kinds = {_one(c).hardware.input_pipeline.kind for c in rows if _pays(c, field)}
        return [p for p in files if _preset_kind(p) in kinds]
    releases = {p: re.search(r"^release:\s*\"?([^\s\"#]+)", p.read_text(), re.M) for p in files}
    return [p for p, m in releases.items() if m and (sel is None or m.group(1).lower() == sel.lower())]


def write(values: dict[str, float], rows: Sequence[Case] = ()) -> list[str]:
    """Put the fitted values into configs/ (each preset file's ``field: value`` line; its comment stays).
    ``rows``: the rows the values were fitted on (an input pipeline's cost goes to the preset of their kind)."""
    changed = []
    for key, v in values.items():
        if not math.isfinite(v):
            raise ValueError(f"{key}: no row fitted it (nothing written)")
        name = _split(key)[0].rsplit(".", 1)[-1]
        for path in _targets(key, rows):
            text = path.read_text()
            new, n = re.subn(rf"^({name}:\s*)[^\s#]+", rf"\g<1>{v:g}", text, count=1, flags=re.M)
            if n == 0:
                raise ValueError(f"{path.relative_to(ROOT)}: no '{name}:' line to write {key} into")
            if new != text:
                path.write_text(new)
                changed.append(f"{path.relative_to(ROOT)}: {name} = {v:g}")
    return changed


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--params", default=",".join(DEFAULT),
                    help=f"comma-separated scenario keys to fit, FIELD[@WAFER|@RELEASE] (fields: {', '.join(KNOWN)})")
    ap.add_argument("--analytic", action="store_true",
                    help="report on the planner's analytic level too (fits always use it)")
    ap.add_argument("--at", action="store_true", help="no fit: print the errors at the shipped values")
    ap.add_argument("--on", default="",
                    help="comma-separated row ids to fit instead of the cases marked 'calibrated on' (e.g. m1,m4,m6)")
    ap.add_argument("--write", action="store_true", help="write the fitted values into configs/ (the refit)")
    ap.add_argument("--hold", action="append", default=[], metavar="KEY=VALUE",
                    help="hold a parameter the fit does not move at VALUE in every row it applies to "
                         "(repeatable; KEY as for --params)")
    ap.add_argument("--no-loo", action="store_true",
                    help="skip the leave-one-out refits (a quick look at a hypothesis; not with --write)")
    ap.add_argument("--start", action="append", default=[], metavar="KEY=VALUE",
                    help="start the search of a fitted parameter (one in --params) at VALUE (repeatable)")
    return ap.parse_args(argv)


def _key_values(option: str, pairs: Sequence[str], fitted: Sequence[str], want_fitted: bool
                ) -> dict[str, float] | str:
    """``--hold`` (keys not fitted) or ``--start`` (keys fitted) values by key, or why they cannot be taken."""
    out: dict[str, float] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            return f"{option} {pair!r}: expected KEY=VALUE"
        if _split(key)[0] not in KNOWN:
            return f"{option}: unknown {key}; known: {', '.join(KNOWN)}"
        if want_fitted and key not in fitted:
            return f"{option}: {key} is not in --params: only a fitted parameter has a search to start"
        if not want_fitted and key in fitted:
            return f"{option}: {key} is also in --params: a parameter is either fitted or held"
        try:
            value = float(text)
        except ValueError:
            return f"{option} {key}: {text!r} is not a number"
        if not math.isfinite(value) or value < 0:
            return f"{option} {key}: {text!r} is not a finite value of at least 0"
        out[key] = value
    return out


def _calibration_rows(cases: list[Case], on: str) -> list[Case] | None:
    """The cases marked 'calibrated on', or the rows ``--on`` names (``m7``: every M7 row; ``m14b128``: one)."""
    if not on:
        return [c for c in cases if c.spec.calibration == "calibrated on"]
    picked = []
    for token in (t.strip().lower() for t in on.split(",") if t.strip()):
        rows = [c for c in cases if token in (row_label(c).lower().replace(" ", ""), row_label(c).split()[0].lower())]
        if not rows:
            return None
        picked += [c for c in rows if c not in picked]
    return picked


def _row_order(case: Case) -> tuple[int, str]:
    m = re.match(r"measured_m(\d+)_", case.name)
    return (int(m.group(1)) if m else 10**6, case.name)


def record(values: dict[str, float], before: dict[str, float], gs: Sequence[Group],
           loo: dict[str, tuple[float, bool]], start: dict[str, float] | None = None) -> dict[str, object]:
    """The refit as data (docs/calibration.json): each value before and after (and where its search started, for a
    cost that shipped at zero), the rows that set it, and each calibrated row's leave-one-out error;
    tools/trust_table.py reads the last."""
    started = {k: {"started_at": v} for k, v in (start or {}).items()}
    return {
        "generated_by": "python tools/calibrate.py --write (through python tools/refit.py)",
        "parameters": {k: {"before": before[k], **started.get(k, {}), "after": values[k],
                           "rows": [row_label(c) for g in gs if any(p.key == k for p in g.params) for c in g.rows
                                    if _for_case({k: 1.0}, _one(c))]}
                       for k in values},
        "leave_one_out": {name: {"error": round(math.exp(e) - 1.0, 4), "newest_release": newest}
                          for name, (e, newest) in sorted(loo.items())},
    }


def _fit_and_write(args: argparse.Namespace, keys: list[str], calibration: list[Case], cases: list[Case],
                   held: dict[str, float], start: dict[str, float]
                   ) -> tuple[dict[str, float], dict[str, tuple[float, bool]]] | int:
    """Fit, print each value before -> after, the leave-one-out errors, and with ``--write`` put the values in
    configs/ and the record in docs/calibration.json; an exit code on a refusal."""
    gs = groups(keys, calibration)
    # The rows that fit something: an input-bound row fits only its pipeline's cost, a step row only the rest.
    refusal = too_many(keys, sum(len(g.rows) for g in gs if g.params))
    if refusal:
        print(f"error: {refusal}", file=sys.stderr)
        return 2
    try:
        before = {p.key: _start(p.key, g.rows, cases) for g in gs for p in g.params}
        for g in gs:
            rows = ", ".join(row_label(c) for c in g.rows) or "(none)"
            print(f"fitting {', '.join(p.key for p in g.params)} on {rows}"
                  + (" - set by one row: no held-out check" if len(g.rows) == 1 else ""), flush=True)
        if held:
            print("held: " + ", ".join(f"{k} = {v:g}" for k, v in held.items()), flush=True)
        values = fit(gs, True, cases, held=held, start=start)
    except ValueError as exc:
        print(f"error: --params: {exc}", file=sys.stderr)
        return 2
    print("fitted (two significant digits), before -> after:")
    for k in before:
        print(f"  {k}: {before[k]:g} -> {values[k]:g}")
    alone = {} if args.no_loo else set_alone(gs, values, True)
    for name, keys_alone in alone.items():
        label = row_label(next(c for c in calibration if c.name == name))
        print(f"  {', '.join(keys_alone)}: felt by {label} alone, so {label}'s leave-one-out error is no prediction "
              "of it (marked *)", flush=True)
    loo = {} if args.no_loo else leave_one_out(gs, values, True, cases, alone)
    if args.write:
        try:
            lines = write(values, calibration)
        except ValueError as exc:
            print(f"error: --write: {exc}", file=sys.stderr)
            return 2
        RECORD.write_text(json.dumps(record(values, before, gs, loo, start), indent=2) + "\n")
        for line in [*lines, str(RECORD.relative_to(ROOT))]:
            print(f"wrote {line}")
    return values, loo


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    cases = sorted(load_cases(CASES), key=_row_order)
    calibration = _calibration_rows(cases, args.on)
    if calibration is None:
        print(f"error: --on: rows {args.on!r} do not all name a measured case", file=sys.stderr)
        return 2
    keys = [k for k in args.params.split(",") if k]
    unknown = [k for k in keys if _split(k)[0] not in KNOWN]
    if unknown:
        print(f"error: --params: unknown {', '.join(unknown)}; known: {', '.join(KNOWN)}", file=sys.stderr)
        return 2
    if args.write and (args.at or args.on or args.params != ",".join(DEFAULT) or args.hold or args.no_loo):
        print("error: --write is the refit: the default parameters on the rows marked 'calibrated on', with their "
              "leave-one-out errors (no --at, --on, --params, --hold or --no-loo)", file=sys.stderr)
        return 2
    fitted_keys = [] if args.at else keys
    held = _key_values("--hold", args.hold, fitted_keys, want_fitted=False)
    start = _key_values("--start", args.start, fitted_keys, want_fitted=True)
    for problem in (held, start):
        if isinstance(problem, str):
            print(f"error: {problem}", file=sys.stderr)
            return 2
    assert isinstance(held, dict) and isinstance(start, dict)
    def ships(k: str) -> bool:  # a value other than zero (or unset) in some row the key reaches
        return any(_applies(k, c) and _shipped(_one(c), k) for c in calibration)

    shipped = [k for k in start if ships(k)]
    if args.write and shipped:
        print(f"error: --write takes --start only for a cost that ships at zero (its search could not leave zero), "
              f"and {', '.join(shipped)} does not: the refit starts from the shipped values", file=sys.stderr)
        return 2
    unset = [k for k in fitted_keys if k not in start and KNOWN[_split(k)[0]].scale == "log" and not ships(k)]
    if unset and not args.at:
        print(f"error: --params: {', '.join(unset)} ships unset or at zero in the rows it would fit, where a search "
              "on its log scale has no slope to follow: give where to start (--start KEY=VALUE)", file=sys.stderr)
        return 2
    values: dict[str, float] = dict(held)
    loo: dict[str, tuple[float, bool]] = {}
    if not args.at:
        fitted = _fit_and_write(args, keys, calibration, cases, held, start)
        if isinstance(fitted, int):
            return fitted
        values, loo = fitted
    print(report(cases, values, args.analytic, loo, calibration if not args.at else ()))
    print("LOO: the row's error when it is left out of the fit; * the only row of its release (the newest "
          "release's prediction), or the only row that feels a fitted parameter (left where the full fit put it)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
