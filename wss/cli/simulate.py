"""``wss simulate``, ``wss validate`` and ``wss presets``: run a scenario, check it, list what ships.

``simulate`` writes ``OUTDIR/result.json`` (and, through :mod:`wss.cli.see`,
a trace, plots and a verdict when asked for); every output is checked before
the run and all of them appear together at the end or not at all.
"""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from wss.cli import see
from wss.cli.common import EXIT_OK, add_quiet_argument, add_scenario_argument, add_set_argument
from wss.files import all_or_nothing, atomic_write_text, ensure_file_target

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("simulate", "validate", "presets")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``simulate``, ``validate`` and ``presets``."""
    sim = subparsers.add_parser("simulate", help="run a scenario and print a summary; writes result.json")
    add_scenario_argument(sim)
    add_set_argument(sim)
    sim.add_argument("-o", "--out", type=Path, default=None, metavar="OUTDIR",
                     help="folder for result.json (default: out/<scenario name>)")
    add_quiet_argument(sim)
    see.extend_simulate(sim)

    val = subparsers.add_parser("validate", help="check a scenario (schema, capacities, SRAM) without running it")
    add_scenario_argument(val)
    add_set_argument(val)

    subparsers.add_parser("presets", help="list the shipped hardware and model presets")


def run(args: argparse.Namespace) -> int:
    if args.command == "simulate":
        return _simulate(args)
    if args.command == "validate":
        return _validate(args)
    return _presets()


def _simulate(args: argparse.Namespace) -> int:
    from wss.model.scenario import load_scenario
    from wss.views.summary import format_result

    scenario = load_scenario(args.scenario, args.overrides)
    out = args.out if args.out is not None else Path("out") / _safe_name(scenario.name)
    written = io.StringIO()
    # Every output is checked before the run, and result.json, the trace and the plots appear together
    # at the end or not at all (a failure also removes the folders made for them).
    with all_or_nothing():
        ensure_file_target(out / "result.json")
        see.prepare_outputs(args, outdir=out)
        result, recorded = see.simulate(scenario, args)
        path = atomic_write_text(out / "result.json", result.to_json())
        see.write_outputs(args, result, recorded, outdir=out, out=written)
    if not args.quiet:
        print(format_result(result))
        print(f"  wrote        {path}")
        print(written.getvalue(), end="")
    see.print_verdict(args, result)
    return EXIT_OK


def _validate(args: argparse.Namespace) -> int:
    from wss.model.plan import make_plan
    from wss.model.scenario import load_scenario
    from wss.views.summary import format_plan

    scenario = load_scenario(args.scenario, args.overrides)
    plan = make_plan(scenario)
    print(f"ok: {args.scenario}")
    print(format_plan(plan))
    return EXIT_OK


def _presets() -> int:
    from wss.model.scenario.presets import list_presets, load_model_preset

    presets = list_presets()
    for kind in ("hardware", "wafer", "memoryx", "swarmx"):
        print(f"{kind}: {', '.join(presets[kind])}")
    print("model:")
    for name in presets["model"]:
        spec = load_model_preset(name)
        print(f"  {name:<22} {spec.get('source', '')}")
    return EXIT_OK


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "scenario"
