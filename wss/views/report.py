"""Per-kernel table of a run: one row per wafer pass and per MemoryX update, as text or CSV.

>>> rows = kernel_table(result)
>>> print(format_table(rows, limit=20, sort="stall"))
>>> write_csv("kernels.csv", rows)
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from wss.files import atomic_write_bytes
from wss.model.results import Result
from wss.views.summary import fmt_bytes, fmt_time

__all__ = ["COLUMNS", "SORT_KEYS", "kernel_table", "sort_rows", "format_table", "table_csv", "write_csv"]

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
)

#: ``--sort`` choices: time order, longest first, most exposed stall first.
SORT_KEYS = ("time", "duration", "stall")


def kernel_table(result: Result) -> list[dict[str, Any]]:
    """One dict per record (wafer pass or MemoryX update/accumulation), in start-time order.

    ``bytes_in``/``bytes_out`` are weight bytes into the wafer and gradient
    bytes out of it for a wafer pass, and state bytes read/written for a
    MemoryX update; ``exposed_stall_s`` is the time the wafer waited during
    the pass (for an update: the time it queued behind others).
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
            }
        )
    rows.sort(key=lambda d: (d["start_s"], d["where"] != "wafer", d["end_s"]))
    return rows


def sort_rows(rows: Sequence[dict[str, Any]], sort: str = "time") -> list[dict[str, Any]]:
    """Rows in time order, longest first (``duration``), or most exposed stall first (``stall``)."""
    if sort == "time":
        return sorted(rows, key=lambda d: (d["start_s"], d["where"] != "wafer", d["end_s"]))
    if sort == "duration":
        return sorted(rows, key=lambda d: (-d["duration_s"], d["start_s"]))
    if sort == "stall":
        return sorted(rows, key=lambda d: (-d["exposed_stall_s"], d["start_s"]))
    raise ValueError(f"sort must be one of {', '.join(SORT_KEYS)}, got {sort!r}")


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
)


def format_table(rows: Sequence[dict[str, Any]], limit: int | None = 50) -> str:
    """Aligned text table of the first ``limit`` rows (all when ``limit`` is None or 0)."""
    shown = list(rows if not limit else rows[:limit])
    cells = [[fmt(row[key]) for _, _, key, fmt in _TEXT_COLUMNS] for row in shown]
    headers = [h for h, *_ in _TEXT_COLUMNS]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(headers)]
    aligns = [a for _, a, *_ in _TEXT_COLUMNS]

    def line(values: Sequence[str]) -> str:
        return "  ".join(f"{v:{a}{w}}" for v, a, w in zip(values, aligns, widths)).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(c) for c in cells]
    if len(shown) < len(rows):
        out.append(f"... {len(rows) - len(shown)} more rows (use --limit 0 for all, or --csv FILE)")
    return "\n".join(out)


def table_csv(rows: Sequence[dict[str, Any]]) -> str:
    """CSV text with the :data:`COLUMNS` header; floats at full precision (``repr``)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def write_csv(path: str | Path, rows: Sequence[dict[str, Any]]) -> Path:
    """Write :func:`table_csv` atomically; return the path."""
    return atomic_write_bytes(Path(path), table_csv(rows).encode("utf-8"))
