"""``wss simulate``, ``wss validate`` and ``wss presets``: run a scenario, check it, list what ships.

``simulate`` writes ``OUTDIR/result.json`` (and, through :mod:`wss.cli.see`,
a trace, plots and a verdict when asked for); every output is checked before
the run and all of them appear together at the end or not at all.  The default
OUTDIR is ``out/<scenario name>``, with ``+KEY=VALUE`` appended for each ``--set``
(:func:`default_outdir`), so a run with overrides does not write over the plain one.

``--json`` (simulate and validate) prints one JSON document on stdout instead of the text, and
nothing else there: progress bars and errors go to stderr.  ``simulate --json`` holds the Result
without its per-pass records (they are in result.json) plus the files written and, with
``--verdict``, the verdict; ``validate --json`` holds what was checked, or on bad input ``ok:
false`` with one entry per bad field (and exit code 2).
"""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import TYPE_CHECKING

from wss.cli import see
from wss.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    add_quiet_argument,
    add_scenario_argument,
    add_set_argument,
    print_error,
    relabel,
    settle,
)
from wss.errors import WssError
from wss.files import all_or_nothing, atomic_write_text, ensure_file_target, safe_name

if TYPE_CHECKING:  # the model loads when the command runs
    from wss.model.result.results import Result

__all__ = ["COMMANDS", "add_commands", "run", "default_outdir"]

COMMANDS = ("simulate", "validate", "presets")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``simulate``, ``validate`` and ``presets``."""
    sim = subparsers.add_parser("simulate", help="run a scenario and print a summary; writes result.json",
                                usage="%(prog)s [options] scenario")
    # Optional to argparse only so that `--trace SCENARIO.yaml` can give it back (see.take_scenario_back).
    sim.add_argument("scenario", type=Path, nargs="?", default=None, help="scenario YAML file (required)")
    add_set_argument(sim)
    sim.add_argument("-o", "--out", type=Path, default=None, metavar="OUTDIR",
                     help="folder for result.json (default: out/<scenario name>, plus +KEY=VALUE for each --set, "
                          "e.g. out/gpt3-175b-192+hardware.wafers=16; a short hash instead when that is long)")
    add_quiet_argument(sim)
    sim.add_argument("--json", action="store_true",
                     help="print the result (result.json without its per-pass records) and the files written as "
                          "one JSON document instead of the summary")
    see.extend_simulate(sim)

    val = subparsers.add_parser("validate", help="check a scenario (schema, capacities, SRAM) without running it")
    add_scenario_argument(val)
    add_set_argument(val)
    val.add_argument("--json", action="store_true",
                     help="print what was checked as one JSON document (on bad input too: ok false and the "
                          "problems, exit code 2)")

    subparsers.add_parser("presets", help="list the shipped hardware and model presets")


def run(args: argparse.Namespace) -> int:
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "validate":
        return _validate(args)
    return _presets()


def _simulate(args: argparse.Namespace) -> int:
    from wss.model.scenario import load_scenario

    see.take_scenario_back(args)
    scenario = load_scenario(args.scenario, args.overrides)
    out = args.out if args.out is not None else default_outdir(scenario.name, args.overrides)
    written = io.StringIO()
    # Every output is checked before the run, and result.json, the trace and the plots appear together
    # at the end or not at all (a failure also removes the folders made for them).  The verdict runs and
    # the report is made before they do: once they are in place only printing is left, and the command
    # has succeeded (settle: a signal then would say "nothing written" with exit code 143 or 130).
    with all_or_nothing():
        ensure_file_target(out / "result.json")
        see.prepare_outputs(args, outdir=out)
        result, recorded = see.simulate(scenario, args)
        path = atomic_write_text(out / "result.json", result.to_json())
        files = see.write_outputs(args, result, recorded, outdir=out, out=written)
        report = _report(args, result, [path, *files], written.getvalue())
        settle()
    print(report, end="")
    return EXIT_OK


def _report(args: argparse.Namespace, result: Result, files: list[Path], written: str) -> str:
    """What ``simulate`` prints on stdout, the verdict run if asked for: the summary, the files ``written``
    (``files[0]`` is result.json) and the verdict; nothing with -q; with ``--json`` one document."""
    from wss.views.summary import format_result

    if args.json:
        return _json_document(args, result, files)
    verdict = io.StringIO()
    see.print_verdict(args, result, out=verdict)  # runs the verdict; prints nothing with -q
    if args.quiet:
        return verdict.getvalue()
    summary = format_result(result, overrides=args.overrides)
    return f"{summary}\n  wrote        {files[0]}\n{written}{verdict.getvalue()}"


def _json_document(args: argparse.Namespace, result: Result, files: list[Path]) -> str:
    """``simulate --json``: one document for stdout (progress stays on stderr), the verdict in it if asked for."""
    from wss.views.json_summary import result_summary

    doc = {"result_file": str(files[0]), "written": [str(p) for p in files], "overrides": list(args.overrides),
           **result_summary(result)}
    if getattr(args, "verdict", False):
        doc["verdict"] = see.run_verdict(result, quiet=args.quiet).model_dump(mode="json")
    return json.dumps(doc, indent=1) + "\n"


def _validate(args: argparse.Namespace) -> int:
    from wss.model.folding.run_plan import check_work
    from wss.model.plan import make_plan
    from wss.model.scenario import load_scenario
    from wss.views.summary import format_plan

    try:
        scenario = load_scenario(args.scenario, args.overrides)
        plan = make_plan(scenario)
        check_work(scenario)  # the run's work counted on the plan it would simulate, as simulate refuses it
    except WssError as exc:
        if args.json:
            from wss.views.json_summary import error_summary

            print(json.dumps(error_summary(exc, str(args.scenario), relabel(exc, args.scenario)), indent=1))
        raise  # the error line on stderr and exit code 2, as without --json
    if args.json:
        from wss.views.json_summary import plan_summary

        print(json.dumps({"ok": True, "scenario_file": str(args.scenario), "overrides": list(args.overrides),
                          **plan_summary(plan)}, indent=1))
        return EXIT_OK
    print(f"ok: {args.scenario}")
    print(format_plan(plan))
    return EXIT_OK


def _presets() -> int:
    """List what ships; a package installed without its presets (a broken build) is an error, not an empty list."""
    from wss.model.scenario.presets import PART_KINDS, config_root, list_presets, load_model_preset

    presets = list_presets()
    if not any(presets.values()):
        print_error(f"no presets found under {config_root()}: this installation of wss is missing its configs/ "
                    "folder (reinstall it from a wheel or a checkout)")
        return EXIT_FAILED
    for kind in PART_KINDS:
        print(f"{kind}: {', '.join(presets[kind])}")
    print("model:")
    for name in presets["model"]:
        spec = load_model_preset(name)
        print(f"  {name:<22} {spec.get('source', '')}")
    return EXIT_OK


#: Longest folder name (bytes) made from the overrides before a hash stands in for them.
_MAX_SUFFIX = 60


def default_outdir(name: str, overrides: list[str]) -> Path:
    """``out/<name>``, plus ``+KEY=VALUE`` for each ``--set`` in order (other characters become ``_``).

    The name becomes one safe folder name (:func:`wss.files.safe_name`: a scenario named ``..`` or
    ``a/b`` stays inside ``out/``, a very long one is cut and keeps a hash).  When the overrides would
    make a name longer than 60 bytes they become ``+set-<first 8 hex digits of their sha256>``: stable
    for the same overrides, distinct from the plain run.
    """
    base = safe_name(name)
    if not overrides:
        return Path("out") / base
    texts = ["=".join(part.strip() for part in o.partition("=")[::2]) for o in overrides]
    suffix = "".join("+" + safe_name(t, keep="-_.=,") for t in texts)
    if len(suffix.encode("utf-8")) > _MAX_SUFFIX:
        import hashlib

        suffix = "+set-" + hashlib.sha256("\n".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return Path("out") / (base + suffix)
