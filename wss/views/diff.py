"""Two Results side by side: what changed between two runs, row by row, with the large changes marked.

>>> d = compare_results(a, b, threshold=0.05)
>>> print(format_diff(d, "a/result.json", "b/result.json"))
>>> diff_json(d)  # the same rows as data

Rows come in sections: ``step`` (step time, what bounds it), ``throughput`` (samples/s, tokens/s,
model FLOPs utilisation), ``breakdown`` and ``pacing`` (seconds per step by category, where either
run has some), ``memory`` (MemoryX state, wafer SRAM for activations, the micro-batching) and
``layer`` (the wafer's seconds per step on each layer's passes, repeats included: what ``wss report
--by layer`` totals).  Each row has the relative change ``(B - A) / |A|``.  A row is *flagged* when
that change exceeds the threshold; a time row of the breakdown, pacing or layer sections must also
move by at least :data:`MIN_STEP_FRACTION` of A's step time, so that a category of a few
microseconds does not flag noise.  A text row (bound by, checkpointing) is flagged when it differs.
The marker is a column, not a colour, so it survives pipes and files.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from wss.model.result.results import BREAKDOWN_CATEGORIES, Result
from wss.views.report import group_rows, kernel_table
from wss.views.summary import fmt_bytes, fmt_time
from wss.views.table import text_table

__all__ = ["DiffRow", "ResultDiff", "compare_results", "format_diff", "diff_json", "scenario_changes",
           "layer_seconds", "MIN_STEP_FRACTION", "MARK"]

#: A time row of the breakdown, pacing or layer sections is flagged only if it moves by this fraction of the
#: first result's step time too (a threshold of presentation, not a hardware figure).
MIN_STEP_FRACTION = 0.001

#: The marker of a flagged row.
MARK = "*"


@dataclass(frozen=True)
class DiffRow:
    """One compared quantity: its section, name and unit, the two values and the relative change."""

    section: str
    name: str
    unit: str
    a: float | str | None
    b: float | str | None
    change: float | None  # (b - a) / |a|; None for text, a missing side, or a zero A with a non-zero B
    flagged: bool


@dataclass(frozen=True)
class ResultDiff:
    """All rows of a comparison, the threshold used, and the scenario fields that differ."""

    rows: list[DiffRow]
    threshold: float
    scenarios: list[str] = field(default_factory=list)
    names: tuple[str, str] = ("", "")

    @property
    def flagged(self) -> list[DiffRow]:
        return [r for r in self.rows if r.flagged]


def _change(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    if a == b:
        return 0.0
    return (b - a) / abs(a) if a != 0 else None


def _number_row(section: str, name: str, unit: str, a: float | None, b: float | None, threshold: float,
                floor: float = 0.0) -> DiffRow:
    change = _change(a, b)
    moved = abs((b or 0.0) - (a or 0.0))
    if change is None:
        flagged = a != b and moved >= floor  # appeared, disappeared, or from zero
    else:
        flagged = abs(change) > threshold and moved >= floor
    return DiffRow(section, name, unit, a, b, change, flagged)


def _text_row(section: str, name: str, a: str, b: str) -> DiffRow:
    return DiffRow(section, name, "", a, b, None, a != b)


def layer_seconds(result: Result) -> dict[str, float]:
    """The wafer's seconds per step on each layer's passes (repeats included), in the order the layers first ran."""
    groups = group_rows(kernel_table(result), "layer", steps=len(result.steps))
    return {g["layer"] or "(no layer)": g["duration_s"] for g in groups if g["where"] == "wafer"}


def compare_results(a: Result, b: Result, threshold: float = 0.05) -> ResultDiff:
    """Compare ``b`` with ``a`` (the reference): every row of the sections, flagged past ``threshold``."""
    if not (math.isfinite(threshold) and threshold >= 0):
        raise ValueError(f"threshold must be a finite number >= 0, got {threshold}")
    floor = MIN_STEP_FRACTION * a.step_time_s
    rows = [_number_row("step", "step time", "s", a.step_time_s, b.step_time_s, threshold),
            _text_row("step", "bound by", a.bound_by, b.bound_by),
            _number_row("throughput", "samples/s", "1/s", a.samples_per_s, b.samples_per_s, threshold)]
    if a.tokens_per_s != a.samples_per_s or b.tokens_per_s != b.samples_per_s:
        rows.append(_number_row("throughput", "tokens/s", "1/s", a.tokens_per_s, b.tokens_per_s, threshold))
    rows.append(_number_row("throughput", "model FLOPs utilisation", "fraction",
                            a.flops.dense_equivalent_fraction_of_peak, b.flops.dense_equivalent_fraction_of_peak,
                            threshold))
    for section, ta, tb in (("breakdown", a.breakdown_s, b.breakdown_s), ("pacing", a.pacing_s, b.pacing_s)):
        for c in BREAKDOWN_CATEGORIES:
            if ta.get(c, 0.0) > 0 or tb.get(c, 0.0) > 0:
                rows.append(_number_row(section, c, "s", ta.get(c, 0.0), tb.get(c, 0.0), threshold, floor))
    rows += _memory_rows(a, b, threshold)
    rows += _failure_rows(a, b, threshold)
    la, lb = layer_seconds(a), layer_seconds(b)
    for name in [*la, *(n for n in lb if n not in la)]:
        rows.append(_number_row("layer", name, "s", la.get(name), lb.get(name), threshold, floor))
    return ResultDiff(rows, threshold, scenario_changes(a, b), (a.scenario.name, b.scenario.name))


def _memory_rows(a: Result, b: Result, threshold: float) -> list[DiffRow]:
    ma, mb = a.memory, b.memory
    rows = [
        _number_row("memory", "MemoryX state", "bytes", ma.memoryx_state_bytes, mb.memoryx_state_bytes, threshold),
        _number_row("memory", "MemoryX in flash", "bytes", ma.memoryx_flash_bytes, mb.memoryx_flash_bytes, threshold),
        _number_row("memory", "wafer SRAM for activations", "bytes", ma.wafer_sram_activation_bytes,
                    mb.wafer_sram_activation_bytes, threshold),
        _number_row("memory", "micro-batch", "samples", ma.micro_batch, mb.micro_batch, threshold),
        _number_row("memory", "micro-batches per step", "", ma.micro_batches, mb.micro_batches, threshold),
        _text_row("memory", "activation checkpointing", ma.activation_checkpointing, mb.activation_checkpointing),
    ]
    return [r for r in rows if not (r.unit == "bytes" and r.a == 0 and r.b == 0)]


def _failure_rows(a: Result, b: Result, threshold: float) -> list[DiffRow]:
    """Goodput, checkpoints and the expected time to train, when either run has failures (faults.failures)."""
    fa, fb = a.failures, b.failures
    if fa is None and fb is None:
        return []

    def get(f: Any, name: str) -> float | None:
        return None if f is None else getattr(f, name)

    return [
        _number_row("failures", "goodput", "fraction", get(fa, "goodput"), get(fb, "goodput"), threshold),
        _number_row("failures", "checkpoint every (steps)", "", get(fa, "checkpoint_every_steps"),
                    get(fb, "checkpoint_every_steps"), threshold),
        _number_row("failures", "checkpoint", "s", get(fa, "checkpoint_s"), get(fb, "checkpoint_s"), threshold),
        _number_row("failures", "expected time per step", "s", get(fa, "expected_s_per_step"),
                    get(fb, "expected_s_per_step"), threshold),
        _number_row("failures", "expected time to train", "s", get(fa, "expected_time_to_train_s"),
                    get(fb, "expected_time_to_train_s"), threshold),
    ]


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(_flatten(v, f"{prefix}{k}."))
        return out
    if isinstance(value, list | tuple):
        out = {}
        for i, v in enumerate(value):
            out.update(_flatten(v, f"{prefix}{i}."))
        return out
    return {prefix[:-1]: value}


def scenario_changes(a: Result, b: Result, limit: int = 8) -> list[str]:
    """The scenario fields that differ, as ``path: A -> B`` (at most ``limit``, then a count of the rest)."""
    fa, fb = _flatten(a.scenario.model_dump(mode="json")), _flatten(b.scenario.model_dump(mode="json"))
    missing = object()
    keys = [*fa, *(k for k in fb if k not in fa)]
    changed = [f"{k}: {fa.get(k, '(none)')} -> {fb.get(k, '(none)')}" for k in keys
               if fa.get(k, missing) != fb.get(k, missing)]
    if len(changed) > limit:
        changed = [*changed[:limit], f"... and {len(changed) - limit} more fields"]
    return changed


def _fmt(value: float | str | None, unit: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, str):
        return value
    if value == 0 and unit in ("s", "bytes"):
        return "0"
    if unit == "s":
        return fmt_time(value)
    if unit == "bytes":
        return fmt_bytes(value)
    if unit == "fraction":
        return f"{100 * value:.3g}%"
    if unit == "1/s":
        return f"{value:,.4g}"
    return f"{value:g}"


def _fmt_change(row: DiffRow) -> str:
    if row.change is not None:
        return "0.0%" if abs(row.change) < 0.0005 else f"{row.change:+.1%}"
    if isinstance(row.a, str) or row.a == row.b:
        return ""
    return "new" if row.a is None or row.a == 0 else "gone" if row.b is None else ""


def _moved(row: DiffRow) -> float:
    """How far a numeric row moved, in its unit (0 for text rows)."""
    a = row.a if isinstance(row.a, int | float) else 0.0
    b = row.b if isinstance(row.b, int | float) else 0.0
    return abs(b - a)


def format_diff(diff: ResultDiff, label_a: str, label_b: str, layers: int | None = 20) -> str:
    """Aligned text: a header naming A and B, the scenario fields that differ, then one line per row.

    ``layers`` caps the layer section at the layers that moved most (all when None or 0); the
    marker column holds :data:`MARK` on a flagged row.
    """
    head = [f"A  {label_a}  ({diff.names[0]})", f"B  {label_b}  ({diff.names[1]})"]
    head += [f"   scenario: {c}" for c in diff.scenarios] or ["   scenario: the same"]
    rows = diff.rows
    layer_rows = [r for r in rows if r.section == "layer"]
    hidden = 0
    if layers and len(layer_rows) > layers:
        keep = set(map(id, sorted(layer_rows, key=lambda r: -_moved(r))[:layers]))
        hidden = len(layer_rows) - layers
        rows = [r for r in rows if r.section != "layer" or id(r) in keep]
    table = [["", "A", "B", "change", ""]]
    section = None
    for r in rows:
        if r.section != section:
            section = r.section
            title = "layer (wafer time per step)" if section == "layer" else section
            table.append([title, "", "", "", ""])
        table.append([f"  {r.name}", _fmt(r.a, r.unit), _fmt(r.b, r.unit), _fmt_change(r), MARK if r.flagged else ""])
    lines = text_table(table[0], table[1:], ["<", ">", ">", ">", "<"], rule=False)
    if hidden:
        lines.append(f"  ... {hidden} more layers moved less (--layers 0 for all)")
    n = len(diff.flagged)
    lines.append(f"{n} of {len(diff.rows)} rows changed by more than {diff.threshold:.1%} (marked {MARK})")
    return "\n".join(head + [""] + lines)


def diff_json(diff: ResultDiff, label_a: str, label_b: str) -> dict[str, Any]:
    """The comparison as data for ``wss diff --json``: labels, threshold, scenario changes and every row."""
    return {"a": label_a, "b": label_b, "threshold": diff.threshold, "scenario_changes": diff.scenarios,
            "flagged": len(diff.flagged), "rows": [asdict(r) for r in diff.rows]}
