"""The ``wss estimate`` and ``wss reproduce`` commands.

``estimate SCENARIO.yaml`` prints the closed-form estimate of :mod:`wss.studies.estimate` (with
``--compare`` it also simulates and prints both); ``reproduce`` runs the validation cases of
:mod:`wss.studies.validation` and prints figure, source, published, simulated, error and pass.

Exit codes (:mod:`wss.cli.common`): 0 success (every validation case passed or is a known,
explained gap: status ``gap``); 1 a validation case failed; 2 bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from wss.cli.common import EXIT_FAILED, add_scenario_argument, add_set_argument

if TYPE_CHECKING:  # the estimate loads when the command runs
    from wss.studies.estimate import Estimate

__all__ = ["add_commands", "run", "COMMANDS"]

#: The commands this module adds.
COMMANDS = ("estimate", "reproduce")


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``estimate`` and ``reproduce`` to the ``wss`` sub-command parser."""
    est = subparsers.add_parser(
        "estimate", help="closed-form step-time estimate of a scenario (computed in milliseconds, no simulation)"
    )
    add_scenario_argument(est)
    add_set_argument(est)
    est.add_argument("--compare", action="store_true", help="also simulate, and print both with their difference")
    est.add_argument("--json", action="store_true", help="print the estimate as JSON")

    rep = subparsers.add_parser("reproduce", help="run the validation cases against published figures")
    rep.add_argument("cases", nargs="*", type=Path,
                     help="case files or folders (default: scenarios/validation of this checkout)")
    rep.add_argument("--markdown", action="store_true", help="print a Markdown table")
    rep.add_argument("-q", "--quiet", action="store_true", help="print only failures and the count")


def run(args: argparse.Namespace) -> int:
    """Run ``estimate`` or ``reproduce``; return the exit code."""
    if args.command == "estimate":
        return _estimate(args)
    return _reproduce(args)


def _estimate(args: argparse.Namespace) -> int:
    from wss.model.plan import make_plan
    from wss.model.scenario import load_scenario
    from wss.studies.estimate import estimate_plan
    from wss.views.summary import fmt_time

    scenario = load_scenario(args.scenario, args.overrides)
    est = estimate_plan(make_plan(scenario))
    if args.json:
        print(est.model_dump_json(indent=1))
        return 0
    print(format_estimate(est))
    if args.compare:
        from wss.model.simulate import simulate

        result = simulate(scenario)
        diff = est.step_time_s / result.step_time_s - 1.0
        print(f"  simulated    {fmt_time(result.step_time_s)}  (estimate {diff:+.2%}); simulator bound by "
              f"{result.bound_by}")
        for c, v in result.breakdown_s.items():
            if v > 0 or est.breakdown_s[c] > 0:
                print(f"    {c:<10} simulated {fmt_time(v):>12}  estimated {fmt_time(est.breakdown_s[c]):>12}")
    return 0


def format_estimate(est: Estimate) -> str:
    """Human-readable text of an :class:`~wss.studies.estimate.Estimate`."""
    from wss.errors import shorten
    from wss.views.summary import fmt_time

    lines = [f"{shorten(est.scenario_name)}: closed-form estimate ({est.micro_batches} micro-batch"
             f"{'es' if est.micro_batches > 1 else ''} per step)"]
    lines.append(f"  step time    {fmt_time(est.step_time_s)}")
    tokens = f", {est.tokens_per_s:,.4g} tokens/s" if est.tokens_per_sample > 1 else ""
    lines.append(f"  throughput   {est.samples_per_s:,.4g} samples/s{tokens}")
    lines.append(f"  bound by     {est.bound_by} (weights stream over {est.stream_bottleneck}; "
                 f"{est.buffered_chunks} chunks of buffer past it)")
    lines.append("  where the time goes (per step):")
    for c, v in est.breakdown_s.items():
        if v > 0:
            lines.append(f"    {c:<10} {fmt_time(v):>12}  {v / est.step_time_s:6.1%}")
    lines.append("  terms: " + ", ".join(f"{k} {fmt_time(v)}" for k, v in est.terms_s.items() if v > 0))
    if est.faults_left_out:
        left = ", ".join(est.faults_left_out)
        lines.append(f"  faults       not in this estimate (wss simulate prices them): {left}")
    return "\n".join(lines)


def _reproduce(args: argparse.Namespace) -> int:
    from wss.studies.validation import format_markdown, format_table, reproduce, tally
    from wss.views.progress import progress_bar

    with progress_bar("reproduce", quiet=args.quiet, delay_s=0.5) as bar:  # about half a minute of simulations
        outcomes = reproduce(args.cases or None, progress=bar)
    if args.markdown:
        print(format_markdown(outcomes))
    elif args.quiet:
        for o in outcomes:
            if not o.passed:
                print(f"{o.status} {o.case.path}: simulated {o.simulated:.6g}, published {o.case.spec.published:.6g}")
        print(tally(outcomes))
    else:
        print(format_table(outcomes))
    return EXIT_FAILED if any(o.failed for o in outcomes) else 0
