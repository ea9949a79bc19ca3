"""Per-kernel table of a run: one row per wafer pass and per MemoryX update, as text or CSV.

>>> rows = kernel_table(result)
>>> print(format_table(sort_rows(rows, "stall"), limit=20))
>>> write_csv("kernels.csv", rows)
>>> print(format_table(group_rows(rows, "layer", steps=len(result.steps)), group="layer"))
>>> print(format_totals(result))

A folded run's records list only its simulated micro-batches; each row's ``repeats`` says how
many micro-batches it stands for, and every total here (:func:`group_rows`, :func:`format_totals`)
weights by it, so the totals equal the steps' breakdown.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wss.files import atomic_write_bytes
from wss.model.result.results import BREAKDOWN_CATEGORIES, RECORD_SECONDS, Result, records_breakdown_s
from wss.views.summary import fmt_bytes, fmt_time
from wss.views.table import text_table

__all__ = ["COLUMNS", "GROUP_COLUMNS", "GROUPS", "SORT_KEYS", "kernel_table", "group_rows", "sort_rows",
           "table_cells", "format_table", "format_totals", "table_csv", "write_csv"]

_SECONDS = tuple(RECORD_SECONDS.values())  # compute_s, stall_stream_s, ...

#: Columns of :func:`kernel_table`, in order (the CSV header).
COLUMNS = (
    "step",
    "micro_batch",
    "kernel",
    "layer",
    "phase",
    "where",
    "start_s",
    "end_s",
    "duration_s",
    "bytes_in",
    "bytes_out",
    "cycles",
    "bound_by",
    "exposed_stall_s",
    "repeats",
    *_SECONDS,
)

#: ``--by`` choices: one row per record, or summed per kernel, per layer or per phase (each side: wafer, MemoryX).
GROUPS = ("pass", "kernel", "layer", "phase")

#: Columns of :func:`group_rows`: times, bytes and cycles are per step, summed over the group's
#: records weighted by ``repeats``; ``passes`` counts them so weighted; ``start_s``/``end_s`` span the group.
GROUP_COLUMNS = (
    "where",
    "kernel",
    "phase",
    "layer",
    "passes",
    "start_s",
    "end_s",
    "duration_s",
    "bytes_in",
    "bytes_out",
    "cycles",
    "bound_by",
    "exposed_stall_s",
    *_SECONDS,
)

#: ``--sort`` choices: time order, longest first, most exposed stall first.
SORT_KEYS = ("time", "duration", "stall")


def kernel_table(result: Result) -> list[dict[str, Any]]:
    """One dict per record (wafer pass or MemoryX update/accumulation), in start-time order.

    ``bytes_in``/``bytes_out`` are weight bytes into the wafer and gradient
    bytes out of it for a wafer pass, and state bytes read/written for a
    MemoryX update; ``exposed_stall_s`` is the time the wafer waited during
    the pass (for an update: the time it queued behind others).  ``repeats``
    is how many micro-batches the row stands for (a folded run's repeated
    micro-batch); ``compute_s`` and ``stall_<cause>_s`` are the wafer's
    seconds in one of them (on the run's last update: the wafer's wait
    after its last pass).  ``stands_for`` lists the blocks the row counts
    for (:meth:`Result.stands_for`: more than its own with layer folding),
    which :func:`group_rows` spreads it over.
    """
    rows = []
    for r in result.records:
        rows.append(
            {
                "step": r.step,
                "micro_batch": r.micro_batch,
                "kernel": r.name,
                "layer": r.layer,
                "phase": r.phase,
                "where": r.where,
                "start_s": r.start_s,
                "end_s": r.end_s,
                "duration_s": r.end_s - r.start_s,
                "bytes_in": r.bytes_in,
                "bytes_out": r.bytes_out,
                "cycles": r.cycles,
                "bound_by": r.bound_by,
                "exposed_stall_s": r.exposed_stall_s,
                "repeats": r.repeats,
                **{f: getattr(r, f) for f in _SECONDS},
                "stands_for": result.stands_for(r),
            }
        )
    rows.sort(key=lambda d: (d["start_s"], d["where"] != "wafer", d["end_s"]))
    return rows


def sort_rows(rows: Sequence[dict[str, Any]], sort: str = "time") -> list[dict[str, Any]]:
    """Rows in time order, longest first (``duration``), or most exposed stall first (``stall``).

    Time order is by start (the wafer first), then as the rows come: :func:`kernel_table` lists passes that
    start together by their end, and :func:`group_rows` lists the blocks one folded block stands for in
    block order.
    """
    if sort == "time":
        return sorted(rows, key=lambda d: (d["start_s"], d["where"] != "wafer"))
    if sort == "duration":
        return sorted(rows, key=lambda d: (-d["duration_s"], d["start_s"]))
    if sort == "stall":
        return sorted(rows, key=lambda d: (-d["exposed_stall_s"], d["start_s"]))
    raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}, got {sort!r}")


def group_rows(rows: Sequence[dict[str, Any]], by: str = "kernel", steps: int = 1) -> list[dict[str, Any]]:
    """Sum :func:`kernel_table` rows per ``(where, kernel)``, ``(where, layer)`` or ``(where, phase)``, per step.

    Each row counts ``repeats`` times, so a folded run's totals include the micro-batches it did
    not simulate; ``steps`` divides the sums (the run's steps).  Per kernel and per layer, a row that
    stands for folded blocks (``stands_for``) is spread evenly over them, so each block shows its own
    share, not the copies' (:func:`spread_folded`).  ``bound_by`` is the cause bounding
    most of the group's time.  A group's ``kernel`` is its one kernel or ``"N kernels"``, its
    ``phase`` its phases joined with ``+`` (a phase group: that phase), and a phase group has no
    ``layer``.  ``by="pass"`` returns the rows unchanged.  Rows come in time order.
    """
    if by == "pass":
        return list(rows)
    if by not in GROUPS:
        raise ValueError(f"group must be one of {', '.join(GROUPS)}, got {by!r}")
    if by in ("kernel", "layer"):
        rows = spread_folded(rows)
    summed = ("duration_s", "bytes_in", "bytes_out", "cycles", "exposed_stall_s", *_SECONDS)
    acc: dict[tuple[str, str], dict[str, Any]] = {}
    bound: dict[tuple[str, str], dict[str, float]] = {}
    members: dict[tuple[str, str], dict[str, dict[str, None]]] = {}  # kernels and phases of each group, in order
    for r in sort_rows(rows, "time"):
        key = (r["where"], r[by])
        n = r["repeats"]
        g = acc.setdefault(key, {**r, "passes": 0, **dict.fromkeys(summed, 0.0)})
        g["passes"] += n
        g["end_s"] = max(g["end_s"], r["end_s"])
        for f in summed:
            g[f] += n * r[f] / steps
        b = bound.setdefault(key, {})
        b[r["bound_by"]] = b.get(r["bound_by"], 0.0) + n * r["duration_s"]
        m = members.setdefault(key, {"kernel": {}, "phase": {}})
        m["kernel"][r["kernel"]] = None
        m["phase"][r["phase"]] = None
    for key, g in acc.items():
        g["bound_by"] = max(sorted(bound[key]), key=lambda c: bound[key][c])
        kernels = members[key]["kernel"]
        g["phase"] = "+".join(members[key]["phase"])
        if by != "kernel":
            g["kernel"] = f"{len(kernels)} kernels" if len(kernels) > 1 else g["kernel"]
        if by == "phase":
            g["layer"] = ""
    return [{c: g[c] for c in GROUP_COLUMNS} for g in acc.values()]


def spread_folded(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each row that stands for several blocks (``stands_for``, layer folding) as one row per block, its
    ``repeats`` shared evenly and its kernel renamed into that block (``block.3.qkv`` -> ``block.4.qkv``)."""
    out = []
    for r in rows:
        blocks = r.get("stands_for") or [r["layer"]]
        if len(blocks) == 1:
            out.append(r)
            continue
        n, prefix = len(blocks), f"{r['layer']}."
        share = r["repeats"] // n if r["repeats"] % n == 0 else r["repeats"] / n
        for layer in blocks:
            kernel = layer + "." + r["kernel"][len(prefix):] if r["kernel"].startswith(prefix) else r["kernel"]
            out.append({**r, "layer": layer, "kernel": kernel, "repeats": share, "stands_for": [layer]})
    return out


def _cycles(c: float) -> str:
    return f"{c:.4g}" if c else "-"


_TEXT_COLUMNS: tuple[tuple[str, str, str, Any], ...] = (
    # header, alignment, key, formatter
    ("step", ">", "step", str),
    ("mb", ">", "micro_batch", str),
    ("kernel", "<", "kernel", str),
    ("phase", "<", "phase", str),
    ("where", "<", "where", str),
    ("start", ">", "start_s", fmt_time),
    ("end", ">", "end_s", fmt_time),
    ("bytes in", ">", "bytes_in", lambda b: fmt_bytes(b) if b else "-"),
    ("bytes out", ">", "bytes_out", lambda b: fmt_bytes(b) if b else "-"),
    ("cycles", ">", "cycles", _cycles),
    ("bound by", "<", "bound_by", str),
    ("exposed stall", ">", "exposed_stall_s", lambda t: fmt_time(t) if t > 0 else "-"),
    ("repeats", ">", "repeats", lambda n: f"x{n}" if n > 1 else ""),
)


def _opt_time(t: float) -> str:
    return fmt_time(t) if t > 0 else "-"


_GROUP_TEXT_COLUMNS: tuple[tuple[str, str, str, Any], ...] = (
    # after the (where, name, members) columns of the group
    ("passes", ">", "passes", str),
    ("time/step", ">", "duration_s", fmt_time),
    ("compute", ">", "compute_s", _opt_time),
    ("exposed stall", ">", "exposed_stall_s", _opt_time),
    ("bytes in/step", ">", "bytes_in", lambda b: fmt_bytes(b) if b else "-"),
    ("bytes out/step", ">", "bytes_out", lambda b: fmt_bytes(b) if b else "-"),
    ("bound by", "<", "bound_by", str),
)


def _columns(group: str) -> tuple[tuple[str, str, str, Any], ...]:
    """(header, alignment, key, formatter) of each column of a ``group`` table."""
    where = ("where", "<", "where", str)
    if group == "pass":
        return _TEXT_COLUMNS
    if group == "kernel":
        return (where, ("kernel", "<", "kernel", str), ("phases", "<", "phase", str), *_GROUP_TEXT_COLUMNS)
    if group == "layer":
        return (where, ("layer", "<", "layer", lambda v: v or "-"), ("kernels", "<", "kernel", str),
                ("phases", "<", "phase", str), *_GROUP_TEXT_COLUMNS)
    return (where, ("phase", "<", "phase", str), ("kernels", "<", "kernel", str), *_GROUP_TEXT_COLUMNS)


def table_cells(rows: Sequence[dict[str, Any]], group: str = "pass") -> tuple[list[str], str, list[list[str]]]:
    """The headers, alignments (``"<"``/``">"`` per column) and cell strings of :func:`format_table`'s table.

    For other renderings of the same table (the HTML report), so every one shows the same figures.
    """
    columns = _columns(group)
    cells = [[fmt(row[key]) for _, _, key, fmt in columns] for row in rows]
    return [h for h, *_ in columns], "".join(a for _, a, *_ in columns), cells


def format_table(rows: Sequence[dict[str, Any]], limit: int | None = 50, group: str = "pass") -> str:
    """Aligned text table of the first ``limit`` rows (all when ``limit`` is None or 0).

    ``group`` says what the rows are: :func:`kernel_table`'s (``"pass"``) or :func:`group_rows`'s.
    """
    shown = list(rows if not limit else rows[:limit])
    headers, aligns, cells = table_cells(shown, group)
    out = text_table(headers, cells, aligns)
    if len(shown) < len(rows):
        out.append(f"... {len(rows) - len(shown)} more rows (use --limit 0 for all, or --csv FILE)")
    return "\n".join(out)


def format_totals(result: Result) -> str:
    """Seconds per step by category, summed over the records weighted by ``repeats``.

    They add up to the step time: every pass's compute and stalls, the folded micro-batches and
    the wafer's wait after its last pass (carried by the run's last update).
    """
    totals = records_breakdown_s(result.records, len(result.steps))
    parts = "  ".join(f"{c} {fmt_time(totals[c])}" for c in BREAKDOWN_CATEGORIES if totals[c] > 0)
    lines = [f"per step, from the records: {parts}  = {fmt_time(sum(totals.values()))} "
             f"(step time {fmt_time(result.step_time_s)})"]
    repeated = [r for r in result.records if r.repeats > 1]
    if repeated:
        lines.append(f"folded: the {len(result.records)} records stand for {sum(r.repeats for r in result.records)}; "
                     f"{_folded_what(result, repeated)} (column repeats)")
    return "\n".join(lines)


def _folded_what(result: Result, repeated: list[Any]) -> str:
    """Which records count more than once, and for what: a repeated micro-batch, a repeated step, or both."""
    facts: dict[str, Any] = dict(result.cluster)
    steps_simulated = int(facts.get("steps_simulated", 0))
    folded_mb = int(facts.get("micro_batches_simulated", 0)) < result.memory.micro_batches
    if "blocks" in facts:  # layer folding: say what was simulated of each kind
        text = (f"blocks simulated: {facts['blocks_simulated_forward']} of {facts['blocks']} forward, "
                f"{facts['blocks_simulated_backward']} backward, one block's passes (and its kernels' updates) "
                "counting for the identical blocks left out (spread evenly over them per kernel and per layer)")
        if folded_mb:
            text += f"; {facts['micro_batches_simulated']} of {result.memory.micro_batches} micro-batches per step"
        if steps_simulated:
            text += f"; {steps_simulated} of {len(result.steps)} steps"
        return text
    mb, n = repeated[0].micro_batch, repeated[0].repeats
    if not steps_simulated:
        return f"micro-batch {mb}'s records count x{n}, for micro-batches {mb}-{mb + n - 1}"
    copies = len(result.steps) - steps_simulated
    step = min(r.step for r in repeated if r.repeats >= 1 + copies)
    text = f"step {step}'s records count x{1 + copies}, for steps {step}-{step + copies}"
    if folded_mb:
        most = max(repeated, key=lambda r: r.repeats)
        k = most.repeats // (1 + copies)
        text += (f"; micro-batch {most.micro_batch}'s records count x{k}, for micro-batches "
                 f"{most.micro_batch}-{most.micro_batch + k - 1}, in every step")
    return text


def table_csv(rows: Sequence[dict[str, Any]], group: str = "pass") -> str:
    """CSV text with the :data:`COLUMNS` header (:data:`GROUP_COLUMNS` for grouped rows); floats at full precision."""
    buf = io.StringIO()
    fields = COLUMNS if group == "pass" else GROUP_COLUMNS
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]], group: str = "pass") -> Path:
    """Write :func:`table_csv` atomically; return the path."""
    return atomic_write_bytes(Path(path), table_csv(rows, group).encode("utf-8"))
