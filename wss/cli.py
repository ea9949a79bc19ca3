"""The ``wss`` command: the only place that parses argv, prints, and writes files.

Exit codes: 0 success; 2 bad input (a scenario that cannot be read, does not
validate, or does not fit the machine, or an output path that cannot be
written) with one clear message on stderr.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from . import __version__, check_cli, fidelity_cli, see_cli, sweep_cli
from .errors import ScenarioError, WssError
from .presets import list_presets, load_model_preset
from .files import all_or_nothing, atomic_write_text, ensure_file_target
from .scenario import load_scenario
from .summary import format_plan, format_result

__all__ = ["main"]

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="wss", description="Simulate wafer-scale weight-streaming training clusters.")
    ap.add_argument("--version", action="version", version=f"wss {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sim = sub.add_parser("simulate", help="run a scenario and print a summary; writes result.json")
    sim.add_argument("scenario", type=Path, help="scenario YAML file")
    sim.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                     help="override a field, e.g. --set hardware.wafers=16 (repeatable)")
    sim.add_argument("-o", "--out", type=Path, default=None, metavar="OUTDIR",
                     help="folder for result.json (default: out/<scenario name>)")
    sim.add_argument("--quiet", action="store_true", help="print nothing but errors")
    see_cli.extend_simulate(sim)

    val = sub.add_parser("validate", help="check a scenario (schema, capacities, SRAM) without running it")
    val.add_argument("scenario", type=Path)
    val.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

    sub.add_parser("presets", help="list the shipped hardware and model presets")
    see_cli.add_commands(sub)
    check_cli.add_commands(sub)
    fidelity_cli.add_commands(sub)
    sweep_cli.add_commands(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "simulate":
            return _simulate(args)
        if args.command == "validate":
            return _validate(args)
        if args.command == "presets":
            return _presets()
        if args.command in see_cli.COMMANDS:
            return see_cli.run(args)
        if args.command in check_cli.COMMANDS:
            return check_cli.run(args)
        if args.command in fidelity_cli.COMMANDS:
            return fidelity_cli.run(args)
        if args.command == "sweep":
            return sweep_cli.run(args)
    except WssError as exc:
        print(f"error: {_relabel(exc, getattr(args, 'scenario', None))}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0


def _relabel(exc: WssError, path: Path | None) -> str:
    """Name the scenario file in errors raised after loading (capacity checks)."""
    if isinstance(exc, ScenarioError) and path is not None and exc.source.startswith("<"):
        return str(type(exc)(str(path), exc.problems))
    return str(exc)


def _simulate(args) -> int:
    scenario = load_scenario(args.scenario, args.overrides)
    out = args.out if args.out is not None else Path("out") / _safe_name(scenario.name)
    written = io.StringIO()
    # Every output is checked before the run, and result.json, the trace and the plots appear together
    # at the end or not at all (a failure also removes the folders made for them).
    with all_or_nothing():
        ensure_file_target(out / "result.json")
        see_cli.prepare_outputs(args, outdir=out)
        result, recorded = see_cli.simulate(scenario, args)
        path = atomic_write_text(out / "result.json", result.to_json())
        see_cli.write_outputs(args, result, recorded, outdir=out, out=written)
    if not args.quiet:
        print(format_result(result))
        print(f"  wrote        {path}")
        print(written.getvalue(), end="")
    see_cli.print_verdict(args, result)
    return 0


def _validate(args) -> int:
    from .plan import make_plan

    scenario = load_scenario(args.scenario, args.overrides)
    plan = make_plan(scenario)
    print(f"ok: {args.scenario}")
    print(format_plan(plan))
    return 0


def _presets() -> int:
    presets = list_presets()
    for kind in ("hardware", "wafer", "memoryx", "swarmx"):
        print(f"{kind}: {', '.join(presets[kind])}")
    print("model:")
    for name in presets["model"]:
        spec = load_model_preset(name)
        print(f"  {name:<22} {spec.get('source', '')}")
    return 0


def _safe_name(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name) or "scenario"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
