"""Command-line side of "see the step": ``wss plot``, ``wss report`` and ``wss simulate --trace/--plots/--verdict``.

Registered in :mod:`wss.cli.app` (``plot`` and ``report``); :mod:`wss.cli.simulate` calls:

* :func:`extend_simulate` to add ``--trace``, ``--plots`` and ``--verdict``
  to ``simulate``; :func:`simulate` to run the scenario (recording spans only
  when a trace or plots are asked for, with a progress bar on a terminal);
  and :func:`after_simulate` to write and print what was asked for
  (:func:`prepare_outputs` checks those outputs before the run,
  :func:`write_outputs` and :func:`print_verdict` are its two halves).

Bad input (a missing or malformed result file, a step not in the run) raises
:class:`SeeInputError`, a :class:`~wss.errors.WssError`, so the CLI prints one
line and exits with 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from wss.cli.common import add_quiet_argument, settle
from wss.errors import WssError, shorten
from wss.files import all_or_nothing, ensure_dir, ensure_file_target

if TYPE_CHECKING:  # the model (pydantic, numpy) is imported when a command runs, so `wss --help` stays fast
    from wss.model.result.results import Result

__all__ = ["COMMANDS", "SeeInputError", "Recorded", "add_commands", "extend_simulate", "take_scenario_back", "run",
           "simulate",
           "prepare_outputs", "write_outputs", "print_verdict", "after_simulate", "load_result", "run_verdict",
           "trace_path", "plots_dir"]

COMMANDS = ("plot", "report")

#: ``wss report --by`` and ``--sort`` choices: :data:`wss.views.report.GROUPS` and ``SORT_KEYS``, repeated here
#: so that building the parser does not import the views (a test checks that the two agree).
REPORT_GROUPS = ("pass", "kernel", "layer", "phase")
REPORT_SORT_KEYS = ("time", "duration", "stall")


class SeeInputError(WssError):
    """A result file that cannot be read, or an option that does not fit the run."""


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``plot`` and ``report`` to the ``wss`` sub-command parsers."""
    plot = subparsers.add_parser("plot", help="draw a result's timeline, per-kernel time, utilisation and memory")
    plot.add_argument("result", type=Path, help="result.json written by wss simulate")
    plot.add_argument("-o", "--out", type=Path, default=None, metavar="DIR",
                      help="folder for the figures (default: plots/ beside RESULT)")
    plot.add_argument("--step", type=int, default=None, help="step of the timeline (default: the last)")
    plot.add_argument("--format", dest="formats", action="append", choices=("png", "svg", "pdf"), default=None,
                      help="file format (repeatable; default: png and svg)")
    add_quiet_argument(plot)

    rep = subparsers.add_parser("report", help="per-pass, kernel, layer or phase table of a result (text, CSV) and a "
                                               "bottleneck verdict")
    rep.add_argument("result", type=Path, help="result.json written by wss simulate")
    rep.add_argument("--csv", type=Path, default=None, metavar="FILE",
                     help="also write every row as CSV (- prints the CSV instead of the table; a device or FIFO "
                          "is written into, not replaced)")
    rep.add_argument("--limit", type=int, default=40, metavar="N", help="rows to print (0: all; default 40)")
    rep.add_argument("--sort", choices=REPORT_SORT_KEYS, default="time",
                     help="row order: time (default), duration (longest first), stall (most exposed stall first)")
    rep.add_argument("--by", "--group", dest="group", choices=REPORT_GROUPS, default="pass",
                     help="one row per pass (default), or per kernel, layer or phase summed per step, folded "
                          "micro-batches included (also for --csv); --group is the same option")
    rep.add_argument("--verdict", action="store_true",
                     help="say what bounds the step and re-simulate to find the change that helps most")
    rep.add_argument("--html", type=Path, default=None, metavar="FILE",
                     help="also write one self-contained HTML page: summary, plan, where the time went, "
                          "per-kernel table, figures (inline SVG), the verdict with --verdict, how to open the "
                          "trace; it loads nothing from the network")
    add_quiet_argument(rep)


#: Suffixes of scenario files: a ``--trace`` or ``--plots`` value with one is the scenario, not an output.
SCENARIO_SUFFIXES = (".yaml", ".yml")


def extend_simulate(parser: argparse.ArgumentParser) -> None:
    """Add ``--trace [FILE]``, ``--plots [DIR]`` and ``--verdict`` to ``wss simulate``."""
    parser.add_argument("--trace", nargs="?", const="", default=None, metavar="FILE",
                        help="write a Chrome/Perfetto trace (default OUTDIR/trace.json; a .gz name is compressed). "
                             "A bare --trace just before the scenario (`--trace s.yaml`) takes the default: a "
                             ".yaml/.yml value is the scenario when no other is given")
    parser.add_argument("--plots", nargs="?", const="", default=None, metavar="DIR",
                        help="write timeline, kernel, utilisation and memory figures (default OUTDIR/plots; "
                             "a .yaml/.yml value is the scenario when no other is given, as for --trace)")
    parser.add_argument("--verdict", action="store_true",
                        help="name the bottleneck and re-simulate with each candidate part doubled")


def take_scenario_back(args: argparse.Namespace) -> None:
    """Give ``wss simulate`` its scenario back from a bare ``--trace`` or ``--plots`` that swallowed it.

    ``--trace`` takes an optional value, so ``wss simulate --trace s.yaml`` reads ``s.yaml`` as the trace
    file and leaves no scenario.  When no scenario was given and the ``--trace`` (or else ``--plots``)
    value ends in .yaml or .yml, it is the scenario and the option takes its default output.  No
    scenario at all is bad input (:class:`SeeInputError`).
    """
    if getattr(args, "scenario", None) is not None:
        return
    for option in ("trace", "plots"):
        value = getattr(args, option, None)
        if value and Path(value).suffix.lower() in SCENARIO_SUFFIXES:
            args.scenario = Path(value)
            setattr(args, option, "")
            return
    raise SeeInputError("wss simulate: no scenario given (usage: wss simulate [options] SCENARIO.yaml)")


def load_result(path: Path) -> Result:
    """Read a result.json, turning every way it can fail into :class:`SeeInputError`.

    The file is checked as it is read (at most :data:`~wss.model.result.results.MAX_RESULT_BYTES`, a
    JSON object, every number finite), against the Result schema (every field there, of its type), and
    for what the views need (at least one step), so a damaged file is one line, never a traceback.
    """
    from pydantic import ValidationError

    from wss.files import InputError, loads_finite, read_input
    from wss.model.result.results import MAX_RESULT_BYTES, Result

    shown = shorten(str(path))
    try:
        doc = loads_finite(read_input(path, MAX_RESULT_BYTES, starts_with=b"{"))
        result = Result.model_validate(doc)
    except FileNotFoundError:
        raise SeeInputError(f"{shown}: no such file") from None
    except InputError as exc:
        raise SeeInputError(f"{shown}: not a wss result: {exc}") from None
    except OSError as exc:
        raise SeeInputError(f"{shown}: cannot read: {shorten(exc.strerror or str(exc))}") from None
    except ValidationError as exc:  # before ValueError, its base class
        first = exc.errors(include_url=False)[0]
        where = shorten(".".join(str(p) for p in first["loc"]) or "<top level>")
        count = exc.error_count()
        raise SeeInputError(f"{shown}: not a wss result ({count} problem{'s' if count > 1 else ''}; first: "
                            f"{where}: {shorten(first['msg'])})") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, not JSON, NaN, a number of 5,000 digits, too deep
        raise SeeInputError(f"{shown}: not a wss result: {_json_problem(exc)}") from None
    if not result.steps:
        raise SeeInputError(f"{shown}: not a wss result: it holds no steps (a run has at least one)")
    return result


def _json_problem(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(exc, RecursionError):
        return "nested too deep"
    if isinstance(exc, json.JSONDecodeError):
        return f"not JSON ({exc.msg}, line {exc.lineno})"
    return shorten(str(exc))


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run ``wss plot`` or ``wss report``; return the exit code."""
    out = out if out is not None else sys.stdout
    if args.command == "plot":
        return _plot(args, out)
    if args.command == "report":
        return _report(args, out)
    raise ValueError(f"not a see command: {args.command}")


def _check_step(result: Result, step: int | None) -> None:
    if step is not None and not 0 <= step < len(result.steps):
        raise SeeInputError(f"--step {step}: the run has steps 0..{len(result.steps) - 1}")


def _plot(args: argparse.Namespace, out: TextIO) -> int:
    from wss.views.plots import plot_all

    result = load_result(args.result)
    _check_step(result, args.step)
    outdir = args.out if args.out is not None else args.result.parent / "plots"
    with all_or_nothing():  # every figure or none
        ensure_dir(outdir)
        paths = plot_all(result, outdir, step=args.step, formats=tuple(args.formats or ("png", "svg")))
        settle()  # drawn: only the renames and printing are left, which a signal must not undo
    if not args.quiet:
        for p in paths:
            print(f"wrote {p}", file=out)
    return 0


def _report(args: argparse.Namespace, out: TextIO) -> int:
    from wss.views.report import format_table, format_totals, group_rows, kernel_table, sort_rows, write_csv

    if args.limit < 0:
        raise SeeInputError(f"--limit {args.limit}: must be 0 (all rows) or more")
    to_stdout = args.csv is not None and str(args.csv) == "-"
    if to_stdout and args.verdict:
        raise SeeInputError("--csv - prints the CSV on standard output, where --verdict would print too; "
                            "write the CSV to a file")
    result = load_result(args.result)
    html = getattr(args, "html", None)
    group = getattr(args, "group", "pass")
    rows = group_rows(kernel_table(result), group, steps=len(result.steps))
    if to_stdout:
        from wss.views.report import table_csv

        out.write(table_csv(rows, group))
        return 0
    csv_path = page = verdict = None
    # A bad --html or --csv path fails before anything is printed or re-simulated.  The verdict (it
    # re-simulates) runs before anything is written, and the CSV and the page appear together or not at
    # all: once they are in place only printing is left, which a signal must not undo (settle).
    with all_or_nothing():
        for target in (args.csv, html):
            if target is not None:
                ensure_file_target(target)
        if args.verdict:
            verdict = run_verdict(result, quiet=args.quiet).format()
        if args.csv is not None:
            csv_path = write_csv(args.csv, rows, group)
        if html is not None:
            from wss.views.html_report import write_result_page

            page = write_result_page(html, result, verdict, source=str(args.result))
        settle()
    if not args.quiet:
        print(format_table(sort_rows(rows, args.sort), limit=args.limit, group=group), file=out)
        print(format_totals(result), file=out)
        for line in (f"wrote {csv_path}" if csv_path else None, verdict, f"wrote {page}" if page else None):
            if line is not None:
                print(line, file=out)
    return 0


def run_verdict(result: Result, quiet: bool = False) -> Any:
    """The :class:`~wss.studies.verdict.Verdict` of ``result`` (re-simulates), with a progress bar on a terminal."""
    from wss.studies.verdict import verdict
    from wss.views.progress import progress_bar

    with progress_bar("verdict", quiet=quiet) as bar:
        return verdict(result, progress=bar)


def _print_verdict(result: Result, args: argparse.Namespace, out: TextIO) -> str:
    """Run the verdict, print it (unless quiet) and return its text."""
    text: str = run_verdict(result, quiet=args.quiet).format()
    if not args.quiet:
        print(text, file=out)
    return text


def wants_cluster(args: argparse.Namespace) -> bool:
    """Whether the run must record spans (a trace or plots were asked for)."""
    return getattr(args, "trace", None) is not None or getattr(args, "plots", None) is not None


@dataclass(frozen=True)
class Recorded:
    """A run with every span kept: the Result and Cluster of one ``simulate_detailed(record=True)`` call.

    Recording folds as the plain run does and changes nothing in it, so its
    Result is the canonical one (``wss.simulate``'s, byte for byte); the
    trace and plots place the cluster's spans on the Result's axis
    (:mod:`wss.model.folding.folded_spans`).
    """

    result: Result
    cluster: Any


def simulate(scenario: Any, args: argparse.Namespace) -> tuple[Result, Recorded | None]:
    """Simulate for ``wss simulate``; return the Result and, if needed, the same run's recorded cluster.

    One run: with ``--trace``/``--plots`` it records spans, which costs a
    little memory and time but leaves the Result (``result.json``) as it is
    without them.  A progress bar is drawn on a terminal.
    """
    from wss.model.simulate import simulate_detailed
    from wss.views.progress import progress_bar

    record = wants_cluster(args)
    with progress_bar("simulate (recording spans)" if record else "simulate",
                      quiet=getattr(args, "quiet", False)) as bar:
        result, cluster = simulate_detailed(scenario, record=record, progress=bar)
    return result, Recorded(result, cluster) if record else None


def trace_path(args: argparse.Namespace, base: Path) -> Path | None:
    """The trace file ``args`` ask for (a bare ``--trace``: ``base/trace.json``), or None."""
    trace = getattr(args, "trace", None)
    return None if trace is None else Path(trace) if trace else base / "trace.json"


def plots_dir(args: argparse.Namespace, base: Path) -> Path | None:
    """The folder of figures ``args`` ask for (a bare ``--plots``: ``base/plots``), or None."""
    plots = getattr(args, "plots", None)
    return None if plots is None else Path(plots) if plots else base / "plots"


def prepare_outputs(args: argparse.Namespace, outdir: Path | None = None) -> None:
    """Check, before simulating, that the trace and plots ``args`` ask for can be written.

    Makes the folders they need and raises :class:`~wss.files.OutputError`
    (a :class:`~wss.errors.WssError`) naming the path if one cannot be
    written.  Run it inside :func:`wss.files.all_or_nothing` so the folders
    go again if the run fails.
    """
    base = outdir if outdir is not None else Path(".")
    trace = trace_path(args, base)
    if trace is not None:
        ensure_file_target(trace)
    plots = plots_dir(args, base)
    if plots is not None:
        ensure_dir(plots)


def write_outputs(args: argparse.Namespace, result: Result, recorded: Recorded | None = None,
                  outdir: Path | None = None, out: TextIO | None = None) -> list[Path]:
    """Write the trace and plots that ``args`` ask for and say so on ``out`` (the first half of after_simulate).

    Returns the files written, the trace first.
    """
    out = out if out is not None else sys.stdout
    written: list[Path] = []
    base = outdir if outdir is not None else Path(".")
    quiet = getattr(args, "quiet", False)
    view, cluster = (recorded.result, recorded.cluster) if recorded is not None else (result, None)
    trace = trace_path(args, base)
    if trace is not None:
        from wss.views.trace import write_trace

        path = write_trace(trace, view, cluster)
        written.append(path)
        if not quiet:
            print(f"  wrote        {path}  (open in https://ui.perfetto.dev or chrome://tracing)", file=out)
    plots = plots_dir(args, base)
    if plots is not None:
        from wss.views.plots import plot_all

        paths = plot_all(view, plots, cluster)
        written += paths
        if not quiet:
            print(f"  wrote        {len(paths)} figures in {paths[0].parent}", file=out)
    return written


def print_verdict(args: argparse.Namespace, result: Result, out: TextIO | None = None) -> None:
    """Print the verdict if ``args`` ask for it (the second half of after_simulate)."""
    if getattr(args, "verdict", False):
        _print_verdict(result, args, out if out is not None else sys.stdout)


def after_simulate(args: argparse.Namespace, result: Result, recorded: Recorded | None = None,
                   outdir: Path | None = None, out: TextIO | None = None) -> int:
    """Write the trace and plots and print the verdict that ``args`` ask for; return 0.

    ``recorded`` is the second value of :func:`simulate`; ``outdir`` is where
    ``result.json`` went, and bare ``--trace``/``--plots`` write into it.
    """
    write_outputs(args, result, recorded, outdir=outdir, out=out)
    print_verdict(args, result, out)
    return 0
