"""Validation against published figures: ``wss reproduce``.

Each case is a YAML file (``scenarios/validation/*.yaml``) holding one published figure, where
it comes from, how to compute the same quantity from wss, and how close it must come::

    figure: GPT-3 175B training compute, 300B tokens
    source: Brown et al. 2020, arXiv:2005.14165, Appendix D, Table D.1
    published: 3.14e23
    unit: FLOP
    metric: training_flops          # a function of METRICS below
    args: {tokens: 3.0e11}          # its keyword arguments
    compare: approx                 # approx (within tolerance) | < | <= | > | >=
    tolerance: 0.05                 # relative, for approx
    other_side: {compare: ">=", value: 2, source: ...}  # a relation's bound from the other side (optional)
    note: why the numbers differ, what the check means
    scenario: ...                   # one scenario, or
    scenarios: {name: ...}          # several, named, for multi-point figures

A scenario is an inline wss scenario (a mapping), a path to a scenario YAML (relative to the case
file), or ``{path: ..., set: {dotted.key: value}}``; an inline one may also carry ``set``, and
``{like: other, set: {...}}`` is another scenario of the same case with more overrides (multi-point
figures stay short).

Metrics read a :class:`~wss.model.result.results.Result` (simulating) or only a :class:`~wss.model.plan.Plan`; each
scenario is simulated at most once per :func:`reproduce` call.  Nothing here is calibrated: a
case passes or fails on the shipped hardware defaults, and no metric holds a per-case factor.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from wss.errors import FieldProblem, ScenarioError
from wss.model.plan import Plan, make_plan
from wss.model.result.results import Result
from wss.model.scenario import Scenario, load_scenario
from wss.model.scenario.yaml_io import safe_load_text

__all__ = [
    "METRICS",
    "CaseSpec",
    "Case",
    "Outcome",
    "Runs",
    "default_directory",
    "load_case",
    "load_cases",
    "measured_rows",
    "run_case",
    "reproduce",
    "format_table",
    "format_markdown",
    "tally",
]


# ------------------------------------------------------------------------------------------- runs


class Runs:
    """The scenarios of one case, by name, planned and simulated on demand (and cached)."""

    def __init__(self, scenarios: Mapping[str, Scenario], cache: dict[str, Any] | None = None):
        self.scenarios = dict(scenarios)
        self._cache = cache if cache is not None else {}

    def _key(self, name: str, kind: str) -> str:
        if name not in self.scenarios:
            raise KeyError(f"no scenario named {name!r} (have {', '.join(self.scenarios)})")
        return kind + ":" + self.scenarios[name].model_dump_json()

    @property
    def only(self) -> str:
        """The name of the case's single scenario."""
        if len(self.scenarios) != 1:
            raise KeyError(f"this metric needs exactly one scenario, the case has {len(self.scenarios)}")
        return next(iter(self.scenarios))

    def plan(self, name: str | None = None) -> Plan:
        key = self._key(name or self.only, "plan")
        if key not in self._cache:
            self._cache[key] = make_plan(self.scenarios[name or self.only])
        return self._cache[key]

    def result(self, name: str | None = None) -> Result:
        from wss.model.simulate import simulate

        key = self._key(name or self.only, "result")
        if key not in self._cache:
            self._cache[key] = simulate(self.scenarios[name or self.only])
        return self._cache[key]


# ---------------------------------------------------------------------------------------- metrics

Metric = Callable[..., float]
#: Named ways to turn runs into the number a case compares with its published figure.
METRICS: dict[str, Metric] = {}


def _metric(fn: Metric) -> Metric:
    METRICS[fn.__name__] = fn
    return fn


@_metric
def training_flops(runs: Runs, tokens: float) -> float:
    """Dense-equivalent training FLOPs (forward + backward, attention and non-weight work included,
    no recompute) per token of the simulated step, times ``tokens``."""
    r = runs.result()
    per_step_tokens = r.scenario.training.global_batch * runs.plan().tokens_per_sample
    return r.flops.dense_equivalent_per_step / per_step_tokens * tokens


@_metric
def params(runs: Runs) -> float:
    """Weights of every streamed kernel (the plan's parameter count; biases and norm gains excluded)."""
    return float(runs.plan().params)


@_metric
def memoryx_state_bytes(runs: Runs) -> float:
    """Bytes MemoryX keeps for weights and optimizer state (the plan's capacity figure)."""
    return runs.plan().memoryx_state_bytes


@_metric
def weight_crossings_per_micro_batch(runs: Runs) -> float:
    """Times each weight crosses into a wafer per micro-batch (``Result.weight_crossings_per_micro_batch``)."""
    return runs.result().weight_crossings_per_micro_batch


@_metric
def gradient_crossings_per_step(runs: Runs) -> float:
    """Gradient bytes out of one wafer per step and micro-batch over the bytes of one full set of gradients."""
    r, plan = runs.result(), runs.plan()
    out = [v for k, v in r.link_bytes.items() if k.startswith("wafer->")]
    return out[0].per_link_bytes / sum(k.grad_bytes for k in plan.kernels) / len(plan.micro_batches)


def _efficiency(runs: Runs, base: str, scaled: str) -> float:
    a, b = runs.result(base), runs.result(scaled)
    n_a, n_b = a.scenario.hardware.wafers, b.scenario.hardware.wafers
    return (b.samples_per_s / a.samples_per_s) / (n_b / n_a)


@_metric
def scaling_efficiency(runs: Runs, base: str, scaled: str) -> float:
    """Speed-up in samples/s from ``base`` to ``scaled`` over the ratio of their wafer counts."""
    return _efficiency(runs, base, scaled)


@_metric
def scaling_efficiency_ratio(runs: Runs, large: list[str], small: list[str]) -> float:
    """Scaling efficiency of one pair of runs (``[base, scaled]``) over that of another."""
    return _efficiency(runs, *large) / _efficiency(runs, *small)


def _speedup(runs: Runs, dense: str, sparse: str) -> float:
    return runs.result(sparse).samples_per_s / runs.result(dense).samples_per_s


@_metric
def speedup(runs: Runs, dense: str, sparse: str) -> float:
    """Samples/s of ``sparse`` over samples/s of ``dense``."""
    return _speedup(runs, dense, sparse)


@_metric
def min_speedup_step(runs: Runs, chain: list[str]) -> float:
    """The smallest speed-up from one run of ``chain`` to the next (above 1: strictly increasing)."""
    return min(_speedup(runs, a, b) for a, b in zip(chain, chain[1:]))


@_metric
def speedup_gain(runs: Runs, dense: str, low: str, high: str) -> float:
    """How much more ``high`` speeds up than ``low`` (both against ``dense``)."""
    return _speedup(runs, dense, high) / _speedup(runs, dense, low)


def _busy(runs: Runs, name: str) -> tuple[float, float]:
    """Wafer compute and MemoryX optimizer busy time per step."""
    r = runs.result(name)
    return r.breakdown_s["compute"], r.utilisation["memoryx.optimizer"] * r.total_time_s / len(r.steps)


@_metric
def optimizer_time_growth(runs: Runs, small: str, large: str) -> float:
    """MemoryX optimizer busy time per step of ``large`` over that of ``small``."""
    return _busy(runs, large)[1] / _busy(runs, small)[1]


@_metric
def compute_linearity(runs: Runs, batches: list[str]) -> float:
    """For three runs at batches B, 2B, 4B: the compute added by the second doubling over twice the
    compute added by the first (1 when compute is an affine function of the batch)."""
    c1, c2, c4 = (_busy(runs, n)[0] for n in batches)
    return (c4 - c2) / (2.0 * (c2 - c1))


@_metric
def samples_per_s(runs: Runs) -> float:
    """Training throughput of the case's one scenario, samples per second (a measured run's log rate)."""
    return runs.result().samples_per_s


# ------------------------------------------------------------------------------------------ cases

Compare = Literal["approx", "<", "<=", ">", ">="]
Relation = Literal["<", "<=", ">", ">="]
_ABOVE = ("<", "<=")  # the simulated value is bounded from above


class OtherSide(BaseModel):
    """The bound on the other side of a relation's published figure: ``simulated <compare> value``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    compare: Relation = Field(description="The relation simulated ? value, the other way round from the case's.")
    value: float = Field(description="The bound.")
    source: str = Field(description="Where the bound comes from, and how the number follows from it.")

    def holds(self, simulated: float) -> bool:
        v = self.value
        return {"<": simulated < v, "<=": simulated <= v, ">": simulated > v, ">=": simulated >= v}[self.compare]


class CaseSpec(BaseModel):
    """One validation case as written in YAML."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    figure: str = Field(description="What the published figure is.")
    source: str = Field(description="Where it is published: paper or document, page, table or figure.")
    published: float = Field(description="The published value (or the bound a qualitative claim implies).")
    unit: str = Field("", description="Unit of the published and simulated values.")
    metric: str = Field(
        description="Name of the function in wss.studies.validation.METRICS computing the simulated value."
    )
    args: dict[str, Any] = Field(default_factory=dict, description="Keyword arguments of the metric.")
    compare: Compare = Field("approx", description="approx: within tolerance; or the relation simulated ? published.")
    tolerance: float | None = Field(None, ge=0, description="Relative tolerance of an approx comparison.")
    note: str = Field("", description="How to read the comparison: conventions, what differs and why.")
    calibration: Literal["calibrated on", "held out"] | None = Field(
        None,
        description="For a published measured run: 'calibrated on' if a model parameter was fitted to it "
        "(tools/calibrate.py), 'held out' if it checks that fit without having shaped it.",
    )
    other_side: OtherSide | None = Field(
        None,
        description="For a relation: a bound from the other side with its own source (a case bounded from above "
        "then also holds the simulated value from below, or the reverse).",
    )
    known_gap: str | None = Field(
        None,
        description="An open, explained discrepancy: the case runs and shows its error as 'gap' but does not "
        "fail `wss reproduce`. Say what is missing from the model and where it is tracked.",
    )
    scenario: Any = Field(None, description="One scenario: inline mapping, path, or {path, set}.")
    scenarios: dict[str, Any] | None = Field(None, description="Several named scenarios (multi-point figures).")

    @model_validator(mode="after")
    def _consistent(self) -> CaseSpec:
        if (self.scenario is None) == (self.scenarios is None):
            raise ValueError("give exactly one of 'scenario' and 'scenarios'")
        if self.metric not in METRICS:
            raise ValueError(f"unknown metric {self.metric!r}; known: {', '.join(sorted(METRICS))}")
        if self.compare == "approx" and self.tolerance is None:
            raise ValueError("an approx comparison needs a tolerance")
        if self.compare != "approx" and self.tolerance is not None:
            raise ValueError(f"a '{self.compare}' comparison takes no tolerance")
        if self.other_side is not None:
            if self.compare == "approx":
                raise ValueError("an approx comparison takes no other_side (its tolerance bounds both sides)")
            if (self.compare in _ABOVE) == (self.other_side.compare in _ABOVE):
                raise ValueError(f"other_side must bound the other way from '{self.compare}', "
                                 f"got '{self.other_side.compare}'")
        return self


@dataclass(frozen=True)
class Case:
    """A loaded case: its spec, its scenarios (validated) and the file it came from."""

    path: Path
    spec: CaseSpec
    scenarios: dict[str, Scenario]

    @property
    def name(self) -> str:
        return self.path.stem


@dataclass(frozen=True)
class Outcome:
    """What one case gave."""

    case: Case
    simulated: float
    error: float  # (simulated - published) / |published|
    passed: bool
    seconds: float

    @property
    def status(self) -> str:
        """``pass``, ``gap`` (outside the tolerance, a known and explained gap) or ``FAIL``."""
        if self.passed:
            return "pass"
        return "gap" if self.case.spec.known_gap else "FAIL"

    @property
    def failed(self) -> bool:
        """Outside the criterion and not a known gap: what makes ``wss reproduce`` exit non-zero."""
        return self.status == "FAIL"


def default_directory() -> Path:
    """The shipped validation cases: inside the installed package, else ``scenarios/validation`` of the checkout."""
    package = Path(__file__).resolve().parents[1]  # wss/
    packaged = package / "scenarios" / "validation"
    if packaged.is_dir():
        return packaged
    return package.parent / "scenarios" / "validation"


def load_case(path: str | Path) -> Case:
    """Read and check one case file; raise :class:`~wss.errors.ScenarioError` naming the field."""
    path = Path(path)
    label = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(label, [FieldProblem("", f"cannot read: {exc}")]) from None
    raw = safe_load_text(text, label)
    if not isinstance(raw, dict):
        raise ScenarioError(label, [FieldProblem("", "a validation case is a mapping")])
    try:
        spec = CaseSpec.model_validate(raw)
    except ValidationError as exc:
        problems = [FieldProblem(".".join(str(p) for p in e["loc"]), e["msg"]) for e in exc.errors(include_url=False)]
        raise ScenarioError(label, problems) from None
    specs = {"main": spec.scenario} if spec.scenarios is None else spec.scenarios
    scenarios = {}
    for name in specs:
        where = "scenario" if spec.scenarios is None else f"scenarios.{name}"
        item, overrides = _resolve_like(specs, name, path, where)
        scenarios[name] = _load_scenario(item, overrides, path, where)
    return Case(path, spec, scenarios)


def _resolve_like(specs: Mapping[str, Any], name: str, path: Path, where: str) -> tuple[Any, dict[str, Any]]:
    """Follow ``like: other`` references: the other scenario with this one's ``set`` applied after its own."""
    item, chain, overrides = specs[name], [name], {}
    layers = []
    while isinstance(item, dict) and "like" in item:
        extra = sorted(set(item) - {"like", "set"})
        if extra:
            raise ScenarioError(str(path), [FieldProblem(where, f"'like' takes only 'set', not {extra}")])
        layers.append(item.get("set") or {})
        ref = item["like"]
        if ref not in specs or ref in chain:
            problem = FieldProblem(f"{where}.like", f"no scenario {ref!r} to be like (or a cycle)")
            raise ScenarioError(str(path), [problem])
        chain.append(ref)
        item = specs[ref]
    for layer in reversed(layers):
        if not isinstance(layer, dict):
            problem = FieldProblem(f"{where}.set", "overrides are a mapping of dotted.key: value")
            raise ScenarioError(str(path), [problem])
        overrides.update(layer)
    return item, overrides


def _load_scenario(item: Any, extra: dict[str, Any], case_path: Path, where: str) -> Scenario:
    label = f"{case_path} ({where})"
    if isinstance(item, str):
        item = {"path": item}
    if not isinstance(item, dict):
        raise ScenarioError(label, [FieldProblem(where, "a scenario is a mapping or a path")])
    item = dict(item)
    overrides = item.pop("set", None) or {}
    if not isinstance(overrides, dict):
        raise ScenarioError(label, [FieldProblem(f"{where}.set", "overrides are a mapping of dotted.key: value")])
    overrides = {**overrides, **extra}
    if "path" in item:
        ref = item.pop("path")
        if item:
            raise ScenarioError(label, [FieldProblem(where, f"a path reference takes only 'set', not {sorted(item)}")])
        return load_scenario((case_path.parent / str(ref)).resolve(), overrides)
    try:
        return load_scenario(item, overrides)
    except ScenarioError as exc:
        problems = [FieldProblem(f"{where}.{p.path}" if p.path else where, p.message) for p in exc.problems]
        raise ScenarioError(label, problems) from None


def load_cases(paths: Iterable[str | Path] | None = None) -> list[Case]:
    """Load the given case files or folders (default: :func:`default_directory`), in name order."""
    files: list[Path] = []
    for p in [default_directory()] if paths is None else [Path(x) for x in paths]:
        if p.is_dir():
            files += sorted(p.glob("*.yaml"))
        else:
            files.append(p)
    if not files:
        raise ScenarioError(str(default_directory() if paths is None else ", ".join(map(str, paths))),
                            [FieldProblem("", "no validation cases found")])
    return [load_case(f) for f in files]


def measured_rows(cases: Sequence[Case], ids: str) -> list[Case] | None:
    """The published measured runs named by comma-separated row ids (``"m1,m4"`` picks ``measured_m1_*`` and
    ``measured_m4_*``), in the cases' order; None if an id names none of them (for the calibration tools)."""
    wanted = [w.strip().lower() for w in ids.split(",") if w.strip()]
    picked = [c for c in cases if any(c.name.startswith(f"measured_{w}_") for w in wanted)]
    return picked if len(picked) == len(wanted) else None


def judge(spec: CaseSpec, simulated: float) -> tuple[float, bool]:
    """Relative error and whether the case passes."""
    pub = spec.published
    error = (simulated - pub) / abs(pub) if pub else math.copysign(math.inf, simulated) if simulated else 0.0
    if spec.compare == "approx":
        assert spec.tolerance is not None
        ok = abs(error) <= spec.tolerance
    else:
        ok = {"<": simulated < pub, "<=": simulated <= pub, ">": simulated > pub, ">=": simulated >= pub}[spec.compare]
        ok = ok and (spec.other_side is None or spec.other_side.holds(simulated))
    return error, bool(ok and math.isfinite(simulated))


def run_case(case: Case, cache: dict[str, Any] | None = None) -> Outcome:
    """Compute a case's simulated value and judge it."""
    t0 = time.perf_counter()
    runs = Runs(case.scenarios, cache)
    try:
        value = float(METRICS[case.spec.metric](runs, **case.spec.args))
    except (KeyError, TypeError) as exc:
        raise ScenarioError(str(case.path), [FieldProblem("args", f"metric {case.spec.metric}: {exc}")]) from None
    error, ok = judge(case.spec, value)
    return Outcome(case, value, error, ok, time.perf_counter() - t0)


def reproduce(paths: Iterable[str | Path] | None = None,
              progress: Callable[[float], None] | None = None) -> list[Outcome]:
    """Run every validation case (sharing runs of identical scenarios); pure apart from reading the files.

    ``progress`` is called with the fraction of the cases done (0 before the first, 1 after the last).
    """
    cache: dict[str, Any] = {}
    cases = load_cases(paths)
    outcomes = []
    for i, case in enumerate(cases):
        if progress is not None:
            progress(i / len(cases))
        outcomes.append(run_case(case, cache))
    if progress is not None:
        progress(1.0)
    return outcomes


# ----------------------------------------------------------------------------------------- tables


def _num(x: float) -> str:
    if x == 0 or 1e-3 <= abs(x) < 1e5:
        return f"{x:.4g}"
    return f"{x:.3e}"


def _bound(spec: CaseSpec) -> str:
    bound = f"±{(spec.tolerance or 0.0) * 100:.3g}%" if spec.compare == "approx" else f"{spec.compare} published"
    if spec.other_side is not None:
        bound += f", {spec.other_side.compare} {_num(spec.other_side.value)}"
    return f"{bound}, {spec.calibration}" if spec.calibration else bound


def tally(outcomes: list[Outcome]) -> str:
    """``N passed, G known gaps, F failed`` (the gaps only when there are some)."""
    passed = sum(o.status == "pass" for o in outcomes)
    gaps = sum(o.status == "gap" for o in outcomes)
    failed = sum(o.failed for o in outcomes)
    return f"{passed} passed, " + (f"{gaps} known gap{'s' if gaps != 1 else ''}, " if gaps else "") + f"{failed} failed"


def rows(outcomes: list[Outcome]) -> list[dict[str, str]]:
    """One row per case: figure, source, published, simulated, error, criterion, pass."""
    out = []
    for o in outcomes:
        s = o.case.spec
        unit = f" {s.unit}" if s.unit else ""
        out.append(
            {
                "case": o.case.name,
                "figure": s.figure,
                "source": s.source,
                "published": _num(s.published) + unit,
                "simulated": _num(o.simulated) + unit,
                # A bound ("< published") passes or fails on its side: its distance from the figure is no error.
                "error": f"{o.error:+.2%}" if s.compare == "approx" else "-",
                "criterion": _bound(s),
                "pass": o.status,
            }
        )
    return out


def format_table(outcomes: list[Outcome]) -> str:
    """A plain-text table for the terminal, one case per line under its file name (the figures and their
    sources are in the Markdown table, ``wss reproduce --markdown``, and docs/validation.md)."""
    cols = ["case", "published", "simulated", "error", "criterion", "pass"]
    from wss.views.table import text_table

    out = text_table(cols, [[r[c] for c in cols] for r in rows(outcomes)])
    out.append(tally(outcomes))
    return "\n".join(out)


def format_markdown(outcomes: list[Outcome]) -> str:
    """A Markdown table (figure, source, published, simulated, error, criterion, pass) and the notes."""
    cols = ["figure", "source", "published", "simulated", "error", "criterion", "pass"]
    data = rows(outcomes)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in data:
        out.append("| " + " | ".join(r[c].replace("|", "\\|") for c in cols) + " |")
    return "\n".join(out)
