"""``wss sweep``: run a scenario over a grid of dotted-key values from the command line.

Registered in :mod:`wss.cli.app`.  Exit codes: 0 the sweep ran (points that are invalid or infeasible are rows
with status ``error``, not failures); 1 some points failed unexpectedly (a
bug: they are not cached, so re-running retries them); 2 bad input; 130
interrupted (finished points stay in the cache and a re-run resumes).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wss.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    Terminated,
    interrupted_code,
    print_error,
)
from wss.errors import WssError, quote
from wss.files import all_or_nothing, atomic_output, ensure_dir, ensure_file_target

if TYPE_CHECKING:  # the sweep module imports the model (and pandas); it is imported when the command runs
    import pandas as pd

__all__ = ["COMMANDS", "add_commands", "run", "parse_vary", "cache_dir_for"]

COMMANDS = ("sweep",)

#: :data:`wss.studies.sweep.EXECUTORS` and ``FIDELITIES``, repeated so that building the parser does not import
#: the model (a test checks that they agree).
EXECUTORS = ("process", "serial", "dask")
FIDELITIES = ("simulate", "estimate")

_TABLE_METRICS = ("step_time_s", "samples_per_s", "tokens_per_s", "speedup", "efficiency", "bound_by")


def add_commands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``sweep`` command to an argparse sub-parser set."""
    p = subparsers.add_parser(
        "sweep",
        help="run a scenario at every point of a grid of values; prints a table, writes CSV or parquet",
        description="Run SCENARIO at every combination of the --vary values (or, with --zip, the lists taken "
        "together) and print one row per point.",
    )
    p.add_argument("scenario", type=Path, help="base scenario YAML file")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=V1,V2,...",
                   help="a dotted key and its values, e.g. --vary hardware.wafers=1,2,4,8 (repeatable); a key that "
                        "names no field is refused, with the closest one, before any point runs")
    p.add_argument("--zip", action="store_true", help="vary the lists together element by element (equal lengths)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="override a field of every point, e.g. --set training.steps=2 (repeatable)")
    p.add_argument("-o", "--out", type=Path, default=None, metavar="FILE",
                   help="write the table to FILE.csv or FILE.parquet (and cache points in FILE.points/)")
    p.add_argument("--cache", type=Path, default=None, metavar="DIR",
                   help="folder of finished points; a re-run skips them (default: <FILE>.points/ with -o)")
    p.add_argument("--executor", choices=EXECUTORS, default="process",
                   help="process: local process pool (default); serial: one after another; dask: Dask distributed")
    p.add_argument("--address", default=None, metavar="tcp://HOST:8786",
                   help="Dask scheduler to use with --executor dask (default: start a local cluster)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="worker processes (default: all cores)")
    p.add_argument("--fidelity", choices=FIDELITIES, default="simulate",
                   help="simulate: the discrete-event model (default); estimate: the analytical estimator")
    p.add_argument("--baseline", default=None, metavar="KEY",
                   help="varied key whose smallest value is the speed-up reference in each group (default: "
                   "hardware.wafers if varied, else the first numeric varied key)")
    p.add_argument("-q", "--quiet", action="store_true", help="print no table and no progress bar")
    return p


def parse_vary(items: list[str]) -> dict[str, list[Any]]:
    """``["hardware.wafers=1,2,4", ...]`` -> ``{"hardware.wafers": [1, 2, 4]}``; values are YAML scalars."""
    from wss.model.scenario.yaml_io import safe_load_text
    from wss.studies.sweep import SweepError

    vary: dict[str, list[Any]] = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key or not text.strip():
            raise SweepError(f"--vary {quote(item)}: expected KEY=V1,V2,...")
        if key in vary:
            raise SweepError(f"--vary {key}: given twice")
        vary[key] = [safe_load_text(v, f"--vary {key}") for v in _split_values(text)]
    return vary


def _split_values(text: str) -> list[str]:
    """Split on commas outside brackets and quotes, so [1, 2] or "a,b" stay one value."""
    from wss.studies.sweep import SweepError

    out, depth, open_quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if open_quote:
            open_quote = None if ch == open_quote else open_quote
        elif ch in "\"'":
            open_quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    if any(not v.strip() for v in out):
        raise SweepError(f"--vary value list {quote(text)} has an empty value")
    return [v.strip() for v in out]


def cache_dir_for(out: Path | None, cache: Path | None) -> Path | None:
    """``--cache`` if given, else ``<out>.points`` beside the output file, else none."""
    if cache is not None:
        return cache
    return out.with_name(out.name + ".points") if out is not None else None


def run(args: argparse.Namespace) -> int:
    """Run ``wss sweep`` for parsed arguments; returns the exit code."""
    from wss.studies.sweep import SweepError, sweep

    cache = cache_dir_for(args.out, args.cache)
    try:
        # Folders made for the outputs go again (if still empty) on bad input or Ctrl-C; cached points stay.
        with all_or_nothing(stage=False):
            if args.out is not None and _format(args.out) is None:
                raise SweepError(f"{args.out}: the output must end in .csv or .parquet")
            if args.workers is not None and args.workers < 1:
                raise SweepError(f"--workers must be at least 1, got {args.workers}")
            if args.address and args.executor != "dask":
                raise SweepError("--address needs --executor dask")
            vary = parse_vary(args.vary)
            overrides = dict(_parse_set(s) for s in args.overrides)
            _check_keys(vary, overrides)
            _check_outputs(args.out, cache)
            df = sweep(
                args.scenario,
                vary,
                zip=args.zip,
                executor=args.executor,
                workers=args.workers,
                address=args.address,
                out=cache,
                progress=False if args.quiet else "auto",  # a bar with an ETA when stderr is a terminal
                fidelity=args.fidelity,
                overrides=overrides,
                baseline=args.baseline,
            )
    except WssError as exc:
        print_error(str(exc))
        return EXIT_BAD_INPUT
    except KeyboardInterrupt as exc:
        where = f"; finished points are kept in {cache}, run the same command again to resume" if cache else ""
        what = "terminated" if isinstance(exc, Terminated) else "interrupted"
        print(f"{what}{where}", file=sys.stderr)
        return interrupted_code(EXIT_INTERRUPTED)
    if args.out is not None:
        try:
            _write_table(df, args.out)
        except WssError as exc:
            print_error(str(exc))
            return EXIT_BAD_INPUT
    if not args.quiet:
        print(format_table(df, list(vary)))
        counts = df["status"].value_counts()
        summary = f"{len(df)} points: {counts.get('ok', 0)} ok, {counts.get('error', 0)} error"
        if counts.get("failed", 0):
            summary += f", {counts['failed']} failed"
        summary += f", {int(df['cached'].sum())} from cache"
        print(summary)
        if args.out is not None:
            print(f"wrote {args.out}" + (f" (points in {cache})" if cache else ""))
    failed = int((df["status"] == "failed").sum())
    if failed:
        print_error(f"{failed} of {len(df)} points failed unexpectedly (see the error column); re-run to retry them")
        return EXIT_FAILED
    return EXIT_OK


def _check_keys(vary: dict[str, list[Any]], overrides: dict[str, Any]) -> None:
    """Before any point runs: every --vary and --set key names a field (a typo would make every point an error)."""
    from wss.model.scenario.loader import key_problem
    from wss.studies.sweep import SweepError

    for option, key, values in [*(("--vary", k, v) for k, v in vary.items()),
                                *(("--set", k, [v]) for k, v in overrides.items())]:
        problem = key_problem(key, values)
        if problem is not None:
            raise SweepError(f"{option} {problem}")


def _parse_set(text: str) -> tuple[str, Any]:
    from wss.model.scenario import parse_override

    return parse_override(text, "--set")


def _format(path: Path) -> str | None:
    suffix = path.suffix.lower()
    return {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix)


def _check_parquet(path: Path) -> None:
    from wss.studies.sweep import SweepError

    if _format(path) == "parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise SweepError("writing parquet needs pyarrow (pip install pyarrow), or write .csv") from None


def _check_outputs(out: Path | None, cache: Path | None) -> None:
    """Before running any point: the table file and the cache folder can be written (folders are made)."""
    if out is not None:
        _check_parquet(out)
        ensure_file_target(out)
    if cache is not None:
        ensure_dir(cache)


def _write_table(df: pd.DataFrame, path: Path) -> Path:
    """Write CSV or parquet atomically (temporary file, then rename), with the usual permissions."""
    _check_parquet(path)
    with atomic_output(path) as tmp:
        if _format(path) == "csv":
            df.to_csv(tmp, index=False)
        else:
            df.to_parquet(tmp, index=False)
    return path


def format_table(df: pd.DataFrame, varied: list[str]) -> str:
    """The printed table: varied keys, status, the main metrics and each error's whole first line (the
    suggestion an error ends with, "did you mean ...", is what the user needs, so it is not cut)."""
    cols = [*varied, "status", *_TABLE_METRICS]
    cells = [[_cell(v) for v in df[c].tolist()] for c in cols]
    errors = ["" if not isinstance(e, str) or not e else e.splitlines()[0] for e in df["error"].tolist()]
    if any(errors):
        cols.append("error")
        cells.append(errors)
    from wss.views.table import text_table

    return "\n".join(text_table(cols, [[col[r] for col in cells] for r in range(len(df))]))


def _cell(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
