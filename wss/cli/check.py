"""The ``wss baseline`` and ``wss check`` commands.

Registered in :mod:`wss.cli.app`.  ``check --json`` prints one JSON document on stdout (each
scenario's status and every metric compared) instead of the text; errors still go to stderr.
Exit codes of ``check``, with or without ``--json``: 0 every gating metric holds (``--metrics``; improvements are
listed but pass); 1 a gating metric regressed; 2 bad input: a scenario that cannot
be loaded, a missing, stale or unreadable baseline, or a ``--metric`` or ``--metrics`` that
matches no metric.  Every scenario is checked even after a failure; the exit
code is the worst seen.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wss.cli.common import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, non_negative, print_error, relabel
from wss.errors import WssError, quote
from wss.files import all_or_nothing, ensure_dir, ensure_file_target

if TYPE_CHECKING:  # the studies and the model are imported when a command runs, so `wss --help` stays fast
    from wss.studies.check import Comparison

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("baseline", "check")
EXIT_REGRESSED = EXIT_FAILED
DEFAULT_DIR = Path("baselines")


_rtol = non_negative("relative tolerance")


def _gates(text: str) -> tuple[str, ...]:
    """``--metrics``: comma-separated names or globs; ``all`` gates every metric."""
    names = tuple(p.strip() for p in text.split(",") if p.strip())
    if not names:
        raise argparse.ArgumentTypeError("give at least one metric name or glob, or 'all'")
    return ("*",) if names == ("all",) else names


def _metric(text: str) -> tuple[str, float]:
    name, sep, value = text.rpartition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=RTOL, e.g. step_time_s=0.005, got {quote(text)}")
    return name.strip(), _rtol(value)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``baseline`` and ``check`` to the ``wss`` argparse subparsers."""
    rec = subparsers.add_parser("baseline", help="record timing baselines: one JSON file per scenario")
    rec.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO.yaml",
                     help="scenario files to simulate and record (one baseline file each, named after the file)")
    rec.add_argument("-o", "--out", type=Path, default=DEFAULT_DIR, metavar="DIR",
                     help="folder of baseline files, named after each scenario file (default: baselines/)")

    chk = subparsers.add_parser(
        "check", help="re-simulate scenarios and compare with their baselines (exit 1 on a regression)"
    )
    chk.add_argument("scenarios", nargs="+", type=Path, metavar="SCENARIO.yaml",
                     help="scenario files to simulate and compare with their baselines")
    chk.add_argument("--baselines", type=Path, default=DEFAULT_DIR, metavar="DIR",
                     help="folder of baseline files (default: baselines/)")
    chk.add_argument("--rtol", type=_rtol, default=0.01, help="relative tolerance of every metric (default: 0.01)")
    chk.add_argument("--metric", dest="metric_tolerances", action="append", type=_metric, default=[],
                     metavar="NAME=RTOL",
                     help="relative tolerance of one metric or a glob of them, e.g. step_time_s=0.005 "
                          "or 'breakdown_s.*=0.05' (repeatable)")
    chk.add_argument("--metrics", type=_gates, default=None, metavar="GLOB[,GLOB...]",
                     help="the metrics that fail the check, names or globs, comma-separated; 'all' for every "
                          "metric (default: step_time_s, samples_per_s, tokens_per_s, breakdown_s.* at 5%%, "
                          "memory.*; the rest are listed but do not fail)")
    chk.add_argument("--update", action="store_true",
                     help="re-record the baselines instead of failing (after an intended change)")
    chk.add_argument("--all", dest="all_rows", action="store_true",
                     help="show every metric, not only those beyond tolerance")
    chk.add_argument("--json", action="store_true",
                     help="print one JSON document: each scenario's status and every metric compared (errors "
                          "still go to stderr; the exit code is the same)")
    chk.add_argument("--html", type=Path, default=None, metavar="FILE",
                     help="also write the table of every scenario and metric as one self-contained HTML page "
                          "(for CI artifacts; written whatever the exit code)")


def run(args: argparse.Namespace) -> int:
    """Run ``wss baseline`` or ``wss check`` from parsed arguments; return the exit code."""
    from wss.studies.check import CheckError

    clash = _stem_clash(args.scenarios)
    if clash:
        raise CheckError(clash)
    with all_or_nothing(stage=False) as outputs:
        # check the baselines folder can be written before simulating anything
        if args.command == "baseline":
            ensure_dir(args.out)
        elif args.update:
            ensure_dir(args.baselines)
        if getattr(args, "html", None) is not None:
            ensure_file_target(args.html)
        code = _record(args.scenarios, args.out) if args.command == "baseline" else _check(args)
        if code != EXIT_OK:
            outputs.rollback()  # removes a folder made above only if nothing was written in it
    return code


def _stem_clash(paths: list[Path]) -> str | None:
    stems = Counter(p.stem for p in paths)
    dup = sorted(s for s, n in stems.items() if n > 1)
    if dup:
        return f"several scenarios would share the baseline file {dup[0]}.json; give each a distinct file name"
    return None


def _record(scenarios: list[Path], out: Path) -> int:
    from wss.model.scenario import load_scenario
    from wss.model.simulate import simulate
    from wss.studies.check import baseline_from_result, baseline_path, save_baseline

    code = EXIT_OK
    for path in scenarios:
        try:
            result = simulate(load_scenario(path))
            dest = save_baseline(baseline_from_result(result, path), baseline_path(out, path))
        except WssError as exc:
            print_error(relabel(exc, path))
            code = EXIT_BAD_INPUT
            continue
        print(f"wrote {dest} (step {result.step_time_s:.6g} s)")
    return code


def _unknown_metrics(args: argparse.Namespace, tolerances: dict[str, float]) -> list[str]:
    """``--metric`` and ``--metrics`` names that match no metric of any readable baseline, each with a
    "did you mean", before anything is simulated (a baseline holds every metric a run reports)."""
    import difflib
    from fnmatch import fnmatchcase

    from wss.studies.check import baseline_path, load_baseline

    names: set[str] = set()
    for path in args.scenarios:
        try:
            names |= set(load_baseline(baseline_path(args.baselines, path), path).metrics)
        except (WssError, OSError):
            continue  # a missing or unreadable baseline is that scenario's error, told when it is checked
    if not names:
        return []
    asked = [*tolerances, *(args.metrics or ())]
    out = []
    for key in dict.fromkeys(asked):
        if not any(fnmatchcase(n, key) for n in names):
            close = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else " (see the metric names with --all)"
            out.append(f"--metric or --metrics {key} matches no metric of the baselines{hint}")
    return out


def _check(args: argparse.Namespace) -> int:
    tolerances = dict(args.metric_tolerances)
    if not args.update:
        unknown = _unknown_metrics(args, tolerances)
        for message in unknown:
            print_error(message)
        if unknown:
            return EXIT_BAD_INPUT
    code = EXIT_OK
    counts: Counter[str] = Counter()
    comparisons: list[Comparison] = []
    entries: list[dict[str, Any]] = []
    shown: list[tuple[dict[str, Any], Comparison | None]] = []  # for --html
    for path in args.scenarios:
        entry, comparison = _check_one(path, args, tolerances)
        entries.append(entry)
        shown.append((entry, comparison))
        counts[entry["status"]] += 1
        code = max(code, {"regressed": EXIT_REGRESSED, "error": EXIT_BAD_INPUT}.get(entry["status"], EXIT_OK))
        if comparison is not None:
            comparisons.append(comparison)
    unmatched: set[str] = set()
    if comparisons:
        unmatched = set.intersection(*(set(c.unmatched_tolerances) for c in comparisons))
        for key in sorted(unmatched):
            print_error(f"--metric or --metrics {key} matches no metric of the scenarios checked "
                        "(see the metric names with --all)")
            code = EXIT_BAD_INPUT
    order = ("updated", "unchanged", "error") if args.update else ("ok", "regressed", "error")
    summary = ", ".join(f"{counts[k]} {'errors' if k == 'error' else k}" for k in order)
    if args.json:
        print(json.dumps({"exit_code": code, "counts": {k: counts[k] for k in order},
                          "unmatched_metrics": sorted(unmatched), "scenarios": entries}, indent=1))
    elif len(args.scenarios) > 1:
        print("wss check: " + summary)
    if getattr(args, "html", None) is not None:
        _write_html(args.html, shown, summary, code, quiet=args.json)
    return code


def _write_html(path: Path, shown: list[tuple[dict[str, Any], Comparison | None]], summary: str, code: int,
                quiet: bool) -> None:
    """``--html``: every scenario's status and every metric compared, as one page (a CI artifact)."""
    from wss.studies.check import TABLE_HEADER, table_cells
    from wss.views.html_report import CheckedScenario, write_check_page

    pages = []
    for entry, comparison in shown:
        note = entry.get("note", "")
        if comparison is not None and comparison.baseline_version != comparison.current_version:
            note = f"baseline recorded with wss {comparison.baseline_version}, now wss {comparison.current_version}"
        pages.append(CheckedScenario(entry["scenario_file"], entry["baseline_file"], entry["status"],
                                     header=TABLE_HEADER if comparison is not None else (),
                                     rows=tuple(table_cells(comparison.rows)) if comparison is not None else (),
                                     error=entry.get("error"), note=note))
    written = write_check_page(path, pages, summary, code)
    if not quiet:
        print(f"wrote {written}")


def _check_one(path: Path, args: argparse.Namespace,
               tolerances: dict[str, float]) -> tuple[dict[str, Any], Comparison | None]:
    """Check (or update) one scenario; print its text report unless ``--json``; return its JSON entry."""
    from wss.studies.check import baseline_path, check_scenario

    entry: dict[str, Any] = {"scenario_file": str(path), "baseline_file": str(baseline_path(args.baselines, path))}
    try:
        if args.update:
            status, comparison, note = _update(path, args.baselines, args.rtol, tolerances, args.all_rows,
                                               quiet=args.json)
            entry["note"] = note
        else:
            from wss.views.progress import progress_bar

            # a bar while the scenario simulates (on a terminal, after a second), closed before its line prints
            with progress_bar(f"check {path.name}", quiet=args.json, delay_s=1.0) as bar:
                comparison = check_scenario(path, args.baselines, args.rtol, tolerances, args.metrics, bar)
            status = "ok" if comparison.ok else "regressed"
            if not args.json:
                _report(path, comparison, args.baselines, args.all_rows)
    except WssError as exc:
        message = relabel(exc, path)
        print_error(message)
        status, comparison = "error", None
        entry["error"] = message
    entry["status"] = status
    entry["comparison"] = _comparison_data(comparison) if comparison is not None else None
    return entry, comparison


def _comparison_data(comparison: Comparison) -> dict[str, Any]:
    """A comparison as JSON: the versions, the counts and every metric's row."""
    return {"scenario": comparison.scenario, "baseline_version": comparison.baseline_version,
            "current_version": comparison.current_version, "regressed": len(comparison.regressed),
            "improved": len(comparison.improved), "changed": len(comparison.notable),
            "rows": [row._asdict() for row in comparison.rows]}


def _report(path: Path, comparison: Comparison, baselines: Path, all_rows: bool) -> None:
    from wss.studies.check import format_table

    n = len(comparison.rows)
    if comparison.regressed:
        print(f"REGRESSED {path}: {len(comparison.regressed)} of {n} metrics beyond tolerance")
    elif comparison.improved:
        print(f"improved  {path}: {len(comparison.improved)} of {n} metrics better than tolerance (not a failure); "
              f"to make them the baseline, run `wss check {path} --baselines {baselines}/ --update`")
    elif comparison.notable:
        print(f"changed   {path}: all {n} metrics within tolerance, but {len(comparison.notable)} changed "
              f"(not a failure); refresh with `wss check {path} --baselines {baselines}/ --update`")
    else:
        print(f"ok        {path}: {n} metrics within tolerance")
    table = format_table(comparison, all_rows)
    if table:
        print(table)


def _update(
    path: Path, baselines: Path, rtol: float, tolerances: dict[str, float], all_rows: bool, quiet: bool = False
) -> tuple[str, Comparison | None, str]:
    """Re-record one baseline; show what moved when the old one was comparable (unless ``quiet``).

    Returns the status (``updated`` or ``unchanged``), the comparison with the old baseline (None
    when there was none to compare) and a note saying why.
    """
    from wss.model.scenario import load_scenario
    from wss.model.simulate import simulate
    from wss.studies.check import (
        CheckError,
        MissingBaseline,
        baseline_from_result,
        baseline_path,
        compare,
        format_table,
        load_baseline,
        save_baseline,
    )

    result = simulate(load_scenario(path))
    new = baseline_from_result(result, path)
    dest = baseline_path(baselines, path)
    comparison = None
    try:
        old = load_baseline(dest, path)
    except MissingBaseline:
        note = "new"
    except CheckError:
        note = "replaced an unreadable file"
    else:
        if old.to_json() == new.to_json():
            if not quiet:
                print(f"unchanged {dest}")
            return "unchanged", None, "the baseline was already this run's"
        if old.scenario_sha256 != new.scenario_sha256:
            note = "the scenario had changed"
        else:
            comparison = compare(old, result, rtol, tolerances)
            note = f"{len(comparison.notable)} of {len(comparison.rows)} metrics moved beyond tolerance"
    save_baseline(new, dest)
    if not quiet:
        print(f"updated   {dest} ({note})")
        table = format_table(comparison, all_rows) if comparison is not None else ""
        if table:
            print(table)
    return "updated", comparison, note
