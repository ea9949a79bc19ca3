"""Timing-regression checks: record a scenario's key metrics, compare a new run against them.

A :class:`Baseline` holds the metrics that matter (step time, per-phase time,
throughput, the breakdown of step time, bytes per link class, memory
footprints) together with the wss version and the sha256 of the resolved
scenario.  :func:`compare` turns a baseline and a fresh :class:`~wss.model.result.results.Result`
into a :class:`Comparison`: one :class:`Row` per metric with a verdict.

Not every metric gates a check: by default only the answers a user acts on do
(:data:`DEFAULT_GATES`: step time, throughput, the breakdown of the step at a
looser 5%, and the memory footprints), so time that moves from one part to
another at the same step time is reported but does not fail CI; ``gates``
(``wss check --metrics``) chooses others.  Every metric is still compared and
listed.

A metric holds when ``|now - baseline| <= max(rtol * |baseline|, atol)``.
``rtol`` is chosen by the caller (per metric if wanted); ``atol`` is a fixed
floor per unit (one nanosecond, one byte, ...) so a bubble of 0 s against
1e-12 s is not a regression.  Beyond the band, a change in the bad direction
(time, bytes and memory up; throughput down) is a regression; in the good
direction it is an improvement, which is reported but does not fail the check.

Nothing here prints; only :func:`save_baseline` writes, atomically.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from wss.errors import WssError, quote, shorten
from wss.files import InputError, atomic_write_text, loads_finite, read_input
from wss.model.result.results import Result
from wss.model.scenario import Scenario, load_scenario

__all__ = [
    "Baseline",
    "Comparison",
    "Row",
    "MetricSpec",
    "DEFAULT_GATES",
    "DEFAULT_TOLERANCES",
    "CheckError",
    "MissingBaseline",
    "StaleBaseline",
    "FORMAT",
    "OK",
    "REGRESSED",
    "IMPROVED",
    "MISSING",
    "NEW",
    "CHANGED",
    "metrics_of",
    "metric_spec",
    "scenario_hash",
    "baseline_from_result",
    "record_baseline",
    "baseline_path",
    "save_baseline",
    "load_baseline",
    "ensure_fresh",
    "compare",
    "check_scenario",
    "TABLE_HEADER",
    "table_cells",
    "format_table",
]

FORMAT: Final = "wss-baseline/1"
#: The largest baseline file wss reads (one is a few kB: the metrics and the resolved scenario).
MAX_BASELINE_BYTES: Final = 8 * 2**20

#: Verdicts.  REGRESSED and MISSING fail a check; the others are listed but do not fail it.
OK = "ok"
REGRESSED = "REGRESSED"
MISSING = "MISSING: not measured now"
IMPROVED = "improved: refresh the baseline"
CHANGED = "changed: refresh the baseline"
NEW = "new: refresh the baseline"
FAILING = (REGRESSED, MISSING)

Better = Literal["lower", "higher", "exact"]


class CheckError(WssError):
    """A baseline that cannot be used, or a check that cannot be run as asked."""


class MissingBaseline(CheckError):
    """No baseline file for a scenario."""


class StaleBaseline(CheckError):
    """The baseline was recorded for a different resolved scenario (its hash changed)."""


class MetricSpec(NamedTuple):
    """How a metric is compared.  ``of_step``: its tolerance is a fraction of the baseline's step time,
    not of its own value (a category of the step's breakdown: a small one moving by a few percent of
    the step is a large change of itself, and not what a tolerance on the breakdown means)."""

    unit: str
    better: Better
    atol: float
    of_step: bool = False


# First match wins.  The atol floors: 1 ns is about one wafer clock cycle, below any modelled effect;
# one byte; rates and ratios never approach zero, so their floor only guards against 0 vs 1e-12.
_SPECS: tuple[tuple[str, MetricSpec], ...] = (
    ("step_time_s", MetricSpec("s", "lower", 1e-9)),
    ("samples_per_s", MetricSpec("samples/s", "higher", 1e-9)),
    ("tokens_per_s", MetricSpec("tokens/s", "higher", 1e-9)),
    ("weight_crossings_per_micro_batch", MetricSpec("x", "lower", 1e-9)),
    ("bound_by", MetricSpec("", "exact", 0.0)),
    ("breakdown_s.*", MetricSpec("s", "lower", 1e-9, of_step=True)),
    ("phase_s.*", MetricSpec("s", "lower", 1e-9)),
    ("link_bytes.*", MetricSpec("B", "lower", 1.0)),
    ("memory.micro_batch", MetricSpec("", "exact", 0.0)),
    ("memory.micro_batches", MetricSpec("", "exact", 0.0)),
    ("memory.activation_checkpointing", MetricSpec("", "exact", 0.0)),
    ("memory.*", MetricSpec("B", "lower", 1.0)),
)
_UNKNOWN = MetricSpec("", "exact", 0.0)

#: Phases always present in a baseline (0 when a scenario has none), so a phase appearing is a change, not a new key.
_PHASES = (("wafer", "forward"), ("wafer", "recompute"), ("wafer", "backward"), ("memoryx", "accumulate"),
           ("memoryx", "update"))
_MEMORY_USED = ("memoryx_state_bytes", "memoryx_dram_bytes", "memoryx_flash_bytes", "memoryx_staging_bytes",
                "wafer_sram_activation_bytes")


def metric_spec(name: str) -> MetricSpec:
    """Unit, better direction and absolute floor of a metric, from its name."""
    for pattern, spec in _SPECS:
        if fnmatchcase(name, pattern):
            return spec
    return _UNKNOWN


def metrics_of(result: Result) -> dict[str, float | str]:
    """The metrics a baseline keeps, flat and keyed by dotted name.

    Per-phase times are ``Result.phase_s``: time per step in each phase,
    folded micro-batches included.
    """
    m: dict[str, float | str] = {
        "step_time_s": result.step_time_s,
        "samples_per_s": result.samples_per_s,
        "tokens_per_s": result.tokens_per_s,
        "weight_crossings_per_micro_batch": result.weight_crossings_per_micro_batch,
        "bound_by": result.bound_by,
    }
    for cause, seconds in result.breakdown_s.items():
        m[f"breakdown_s.{cause}"] = seconds
    phases = {f"phase_s.{where}.{phase}": 0.0 for where, phase in _PHASES}
    phases.update({f"phase_s.{key}": seconds for key, seconds in result.phase_s.items()})
    m.update(phases)
    for name, lb in result.link_bytes.items():
        m[f"link_bytes.{name}.per_link_bytes"] = lb.per_link_bytes
        m[f"link_bytes.{name}.total_bytes"] = lb.total_bytes
    mem = result.memory
    for field in _MEMORY_USED:
        m[f"memory.{field}"] = float(getattr(mem, field))
    m["memory.micro_batch"] = float(mem.micro_batch)
    m["memory.micro_batches"] = float(mem.micro_batches)
    m["memory.activation_checkpointing"] = mem.activation_checkpointing
    return dict(sorted(m.items()))


def scenario_hash(scenario: Scenario) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces) of the resolved scenario."""
    text = json.dumps(scenario.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Baseline(BaseModel):
    """The recorded metrics of one scenario, and what they were recorded from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["wss-baseline/1"] = Field(FORMAT, description="File format tag.")
    scenario_file: str = Field(description="File name of the scenario (no folder, so the file is cwd-independent).")
    scenario_name: str = Field(description="The scenario's own name.")
    scenario_sha256: str = Field(description="sha256 of the resolved scenario's canonical JSON (see scenario_hash).")
    wss_version: str = Field(description="wss version that recorded the baseline.")
    metrics: dict[str, float | str] = Field(description="Metric name -> value (see metrics_of).")
    scenario: dict[str, Any] = Field(description="The resolved scenario, to say what changed when the hash differs.")

    def to_json(self) -> str:
        """Deterministic JSON: sorted keys, no timestamps, a trailing newline."""
        return json.dumps(self.model_dump(mode="json"), sort_keys=True, indent=1) + "\n"


def baseline_from_result(result: Result, scenario_file: str | Path) -> Baseline:
    s = result.scenario
    return Baseline(
        scenario_file=Path(scenario_file).name,
        scenario_name=s.name,
        scenario_sha256=scenario_hash(s),
        wss_version=result.wss_version,
        metrics=metrics_of(result),
        scenario=s.model_dump(mode="json"),
    )


def record_baseline(scenario_path: str | Path) -> Baseline:
    """Load and simulate a scenario file and return its baseline (nothing is written)."""
    from wss.model.simulate import simulate

    return baseline_from_result(simulate(load_scenario(scenario_path)), scenario_path)


def baseline_path(baselines_dir: str | Path, scenario_path: str | Path) -> Path:
    """``baselines_dir/<scenario file stem>.json``."""
    return Path(baselines_dir) / f"{Path(scenario_path).stem}.json"


def save_baseline(baseline: Baseline, path: str | Path) -> Path:
    """Write a baseline file atomically."""
    return atomic_write_text(Path(path), baseline.to_json())


def _refresh_hint(scenario_path: str | Path | None, baselines_dir: Path) -> str:
    scen = shorten(str(scenario_path)) if scenario_path is not None else "SCENARIO.yaml"
    folder = shorten(str(baselines_dir))
    return f"run `wss check {scen} --baselines {folder}/ --update` (or `wss baseline {scen} -o {folder}/`)"


def load_baseline(path: str | Path, scenario_path: str | Path | None = None) -> Baseline:
    """Read a baseline file; ``scenario_path`` only shapes the hint in error messages.

    Raises
    ------
    MissingBaseline
        No such file.
    CheckError
        The file is not a valid baseline.
    """
    path = Path(path)
    shown = shorten(str(path))
    try:
        text = read_input(path, MAX_BASELINE_BYTES, starts_with=b"{").decode("utf-8")
    except FileNotFoundError:
        what = f" for {shorten(str(scenario_path))}" if scenario_path is not None else ""
        raise MissingBaseline(
            f"no baseline{what}: {shown} does not exist; to record it, {_refresh_hint(scenario_path, path.parent)}"
        ) from None
    except (OSError, UnicodeDecodeError, InputError) as exc:
        raise CheckError(f"{shown}: cannot read baseline: {shorten(str(exc))}") from None
    try:
        return Baseline.model_validate(loads_finite(text))
    except ValidationError as exc:  # before ValueError, its base class
        first = exc.errors(include_url=False)[0]
        where = shorten(".".join(str(p) for p in first["loc"]) or "<top level>")
        problem = f"{where}: {shorten(first['msg'])}"
    except (ValueError, RecursionError) as exc:  # not JSON, NaN or 1e999 (wss records finite numbers), too deep
        problem = "nested too deep" if isinstance(exc, RecursionError) else shorten(str(exc))
    raise CheckError(f"{shown}: not a {FORMAT} file ({problem}); {_refresh_hint(scenario_path, path.parent)}")



def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts and lists as one dict of dotted paths (list items by index) to leaf values."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(node, dict):
        items = node.items()
    elif isinstance(node, list):
        items = ((str(i), v) for i, v in enumerate(node))
    else:
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in items:
        out.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def _scenario_diff(old: dict[str, Any], new: dict[str, Any], limit: int = 3) -> str:
    a, b = _flatten(old), _flatten(new)
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k, "<absent>") != b.get(k, "<absent>"))
    shown = [f"{shorten(k)}: {shorten(repr(a.get(k, '<absent>')))} -> {shorten(repr(b.get(k, '<absent>')))}"
             for k in keys[:limit]]
    if len(keys) > limit:
        shown.append(f"+{len(keys) - limit} more")
    return "; ".join(shown) if shown else "no field differs, but the hash does"


def ensure_fresh(baseline: Baseline, scenario: Scenario, baseline_file: str | Path,
                 scenario_path: str | Path | None = None) -> None:
    """Raise :class:`StaleBaseline` unless the baseline was recorded from this resolved scenario."""
    now = scenario_hash(scenario)
    if now == baseline.scenario_sha256:
        return
    baseline_file = Path(baseline_file)
    label = scenario_path if scenario_path is not None else scenario.name
    raise StaleBaseline(
        f"{baseline_file} is stale: the resolved scenario of {label} changed since it was recorded "
        f"(sha256 {baseline.scenario_sha256[:12]} -> {now[:12]}: "
        f"{_scenario_diff(baseline.scenario, scenario.model_dump(mode='json'))}); "
        f"if the change is intended, {_refresh_hint(scenario_path, baseline_file.parent)}"
    )


class Row(NamedTuple):
    """One metric of a comparison (``pandas.DataFrame(comparison.rows)`` just works)."""

    metric: str
    unit: str
    better: str
    baseline: float | str | None
    now: float | str | None
    change: float | None  # relative: (now - baseline) / |baseline|; None when undefined
    rtol: float
    atol: float
    verdict: str
    gated: bool = True  # does this metric fail the check when it regresses?


#: The metrics that fail a check by default: what a user acts on.  The rest (per-phase time, link bytes,
#: weight crossings, what bounds the step) are compared and listed but do not fail it.
DEFAULT_GATES: Final = ("step_time_s", "samples_per_s", "tokens_per_s", "breakdown_s.*", "memory.*")
#: Tolerances of the gating metrics that differ from ``rtol``: each category of the breakdown may move by 5%
#: of the step time (time shifts between stream and compute at the same step time), a looser gate.
DEFAULT_TOLERANCES: Final = {"breakdown_s.*": 0.05}


@dataclass(frozen=True)
class Comparison:
    """A baseline against a result: one row per metric, sorted by name."""

    scenario: str
    baseline_version: str
    current_version: str
    rows: tuple[Row, ...]
    unmatched_tolerances: tuple[str, ...] = ()

    @property
    def regressed(self) -> tuple[Row, ...]:
        """The gating rows that regressed (or went missing): what fails the check."""
        return tuple(r for r in self.rows if r.verdict in FAILING and r.gated)

    @property
    def improved(self) -> tuple[Row, ...]:
        return tuple(r for r in self.rows if r.verdict == IMPROVED)

    @property
    def notable(self) -> tuple[Row, ...]:
        """Every row that is not plainly ok: regressions, improvements, changes, new and missing metrics."""
        return tuple(r for r in self.rows if r.verdict != OK)

    @property
    def ok(self) -> bool:
        """True when nothing regressed (improvements and changes do not fail a check)."""
        return not self.regressed


def _tolerance_for(name: str, rtol: float, tolerances: Mapping[str, float]) -> float:
    if name in tolerances:
        return tolerances[name]
    for pattern, value in tolerances.items():
        if fnmatchcase(name, pattern):
            return value
    return rtol


def _check_rtol(value: float, what: str) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise CheckError(f"{what}: a relative tolerance is a finite number >= 0, got {quote(value)}")


def _verdict(base: float | str, now: float | str, spec: MetricSpec, rtol: float,
             scale: float | None = None) -> tuple[float | None, str]:
    """The relative change and the verdict; the band is ``rtol`` of ``scale`` (default: of the baseline)."""
    if spec.better == "exact" or isinstance(base, str) or isinstance(now, str):
        return None, OK if base == now else CHANGED
    delta = now - base
    change = delta / abs(base) if base != 0 else (0.0 if delta == 0 else None)
    if not (math.isfinite(base) and math.isfinite(now)):
        return change, OK if base == now else REGRESSED
    if abs(delta) <= max(rtol * abs(base if scale is None else scale), spec.atol):
        return change, OK
    worse = delta > 0 if spec.better == "lower" else delta < 0
    return change, REGRESSED if worse else IMPROVED


def compare(
    baseline: Baseline,
    result: Result,
    rtol: float = 0.01,
    metric_tolerances: Mapping[str, float] | None = None,
    gates: Iterable[str] | None = None,
) -> Comparison:
    """Compare a result with a baseline, metric by metric.

    Parameters
    ----------
    rtol
        Relative tolerance of every metric without its own.
    metric_tolerances
        Relative tolerance per metric name; a key may be a glob
        (``"breakdown_s.*"``).  An exact name wins over globs; among globs
        the first that matches wins.  Keys matching no metric are listed in
        ``Comparison.unmatched_tolerances`` (a typo should not pass silently).
        Those of :data:`DEFAULT_TOLERANCES` apply where these say nothing.
    gates
        Names or globs of the metrics that fail the check (default :data:`DEFAULT_GATES`; ``["*"]`` for
        all).  A gate matching no metric is listed in ``Comparison.unmatched_tolerances`` too.

    The scenario hash is not checked here (see :func:`ensure_fresh`), so a
    baseline can be compared with the result of a different scenario on purpose.
    """
    asked = dict(metric_tolerances or {})
    tolerances = {**asked, **{k: v for k, v in DEFAULT_TOLERANCES.items() if k not in asked}}
    gate_list = tuple(DEFAULT_GATES if gates is None else gates)
    _check_rtol(rtol, "rtol")
    for key, value in tolerances.items():
        _check_rtol(value, f"tolerance of {key}")
    now = metrics_of(result)
    names = sorted(baseline.metrics.keys() | now.keys())
    rows = []
    for name in names:
        spec = metric_spec(name)
        r = _tolerance_for(name, rtol, tolerances)
        b, n = baseline.metrics.get(name), now.get(name)
        if n is None:
            change, verdict = None, MISSING
        elif b is None:
            change, verdict = None, NEW
        else:
            step = baseline.metrics.get("step_time_s")
            scale = float(step) if spec.of_step and isinstance(step, (int, float)) else None
            change, verdict = _verdict(b, n, spec, r, scale)
        gated = any(fnmatchcase(name, g) for g in gate_list)
        rows.append(Row(name, spec.unit, spec.better, b, n, change, r, spec.atol, verdict, gated))
    return Comparison(
        scenario=baseline.scenario_file,
        baseline_version=baseline.wss_version,
        current_version=result.wss_version,
        rows=tuple(rows),
        unmatched_tolerances=tuple(k for k in (*asked, *(g for g in gate_list if gates is not None))
                                   if not any(fnmatchcase(n, k) for n in names)),
    )


def check_scenario(
    scenario_path: str | Path,
    baselines_dir: str | Path,
    rtol: float = 0.01,
    metric_tolerances: Mapping[str, float] | None = None,
    gates: Iterable[str] | None = None,
    progress: Callable[[float], None] | None = None,
) -> Comparison:
    """Load a scenario and its baseline, make sure the baseline is fresh, simulate, compare (:func:`compare`).

    ``progress`` is called with the fraction of the simulation done (a progress bar's callable).

    Raises
    ------
    ScenarioError
        The scenario cannot be loaded or run.
    MissingBaseline, StaleBaseline, CheckError
        The baseline is absent, was recorded for another resolved scenario, or is unreadable.
    """
    from wss.model.simulate import simulate_detailed

    scenario = load_scenario(scenario_path)
    path = baseline_path(baselines_dir, scenario_path)
    baseline = load_baseline(path, scenario_path)
    ensure_fresh(baseline, scenario, path, scenario_path)
    result, _ = simulate_detailed(scenario, record=False, progress=progress)
    return compare(baseline, result, rtol, metric_tolerances, gates)


def _fmt_value(value: float | str | None, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if unit in ("", "x") and float(value).is_integer():
        return f"{value:.0f}"
    return f"{value:.6g} {unit}".rstrip()


def _fmt_change(row: Row) -> str:
    if row.change is None:
        return "n/a" if row.better != "exact" and None not in (row.baseline, row.now) else ""
    pct = row.change * 100
    return f"{pct:+.2f}%" if abs(pct) < 1000 else f"{pct:+.3g}%"


def _fmt_tolerance(row: Row) -> str:
    if row.better == "exact":
        return "exact"
    if metric_spec(row.metric).of_step:
        return f"±{row.rtol * 100:g}% of step"
    base = row.baseline if isinstance(row.baseline, (int, float)) else 0.0
    if row.atol > row.rtol * abs(base):
        return f"±{row.atol:g} {row.unit}"
    return f"±{row.rtol * 100:g}%"


#: Columns of :func:`format_table` and :func:`table_cells`.
TABLE_HEADER: Final = ("metric", "baseline", "now", "change", "tolerance", "verdict")


def table_cells(rows: Iterable[Row]) -> list[tuple[str, ...]]:
    """The cells of :func:`format_table`'s rows (:data:`TABLE_HEADER` columns), also for the HTML page."""
    return [(r.metric, _fmt_value(r.baseline, r.unit), _fmt_value(r.now, r.unit), _fmt_change(r), _fmt_tolerance(r),
             r.verdict if r.gated or r.verdict == OK else f"{r.verdict} (not gated)") for r in rows]


def format_table(comparison: Comparison, all_rows: bool = False) -> str:
    """A text table: metric, baseline, now, change, tolerance, verdict.

    Only the rows that are not plainly ok, unless ``all_rows``; an empty string
    when there is nothing to show.  A note follows when the wss versions differ.
    """
    rows = comparison.rows if all_rows else comparison.notable
    if not rows:
        return ""
    from wss.views.table import text_table

    lines = text_table(TABLE_HEADER, table_cells(rows))
    if comparison.baseline_version != comparison.current_version:
        versions = f"wss {comparison.baseline_version}, now wss {comparison.current_version}"
        lines.append(f"(baseline recorded with {versions})")
    return "\n".join(lines)
