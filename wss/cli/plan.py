"""The ``wss plan`` command: the checkpointing and micro-batches the planner chose, and the alternatives.

``plan SCENARIO.yaml [--set ...] [--top N] [--json] [--simulate]`` ranks every candidate of
:func:`wss.model.plan.rank_candidates` (checkpointing mode x micro-batch split) by the planner's
analytic step time and prints the best ``N``: checkpointing, split, weight crossings per step,
activation SRAM, analytic step time and what bounds it.  ``--simulate`` also simulates each one
shown (forced with :func:`wss.model.plan.search.forced_scenario`) and prints its simulated step time.

Exit codes (:mod:`wss.cli.common`): 0 success; 2 bad input.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from wss.cli.common import EXIT_OK, add_scenario_argument, add_set_argument

if TYPE_CHECKING:  # the planner loads when the command runs
    from wss.model.plan.choice import CandidateCost, PlanChoice
    from wss.model.scenario import Scenario

__all__ = ["add_commands", "run", "COMMANDS"]

#: The commands this module adds.
COMMANDS = ("plan",)


def add_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``plan`` to the ``wss`` sub-command parser."""
    p = subparsers.add_parser(
        "plan", help="the checkpointing and micro-batches chosen, and the best alternatives (analytic, in milliseconds)"
    )
    add_scenario_argument(p)
    add_set_argument(p)
    p.add_argument("--top", type=int, default=5, metavar="N", help="alternatives to show beside the chosen (default 5)")
    p.add_argument("--json", action="store_true", help="print the choice and the candidates shown as JSON")
    p.add_argument("--simulate", action="store_true", help="also simulate every candidate shown")


def run(args: argparse.Namespace) -> int:
    """Run ``plan``; return the exit code."""
    from wss.model.plan import make_plan, rank_candidates
    from wss.model.plan.analytic.faults import left_out
    from wss.model.scenario import load_scenario

    scenario = load_scenario(args.scenario, args.overrides)
    choice = make_plan(scenario).choice
    assert choice is not None
    shown = rank_candidates(scenario)[: 1 + max(args.top, 0)]
    simulated = _simulate_each(scenario, shown) if args.simulate else None
    if args.json:
        rows = [c.model_dump(mode="json") | ({"simulated_step_time_s": simulated[i]} if simulated else {})
                for i, c in enumerate(shown)]
        print(json.dumps({"scenario": scenario.name, "reason": choice.reason, "candidates_ranked": choice.candidates,
                          "searched": list(choice.searched), "faults_left_out": left_out(scenario.faults),
                          "shown": rows}, indent=1))
        return EXIT_OK
    print(format_candidates(scenario.name, choice, shown, simulated))
    unpriced = left_out(scenario.faults)
    if unpriced:
        print(f"  faults: the analytic step times leave out {', '.join(unpriced)} (wss simulate prices them)")
    return EXIT_OK


def _simulate_each(scenario: Scenario, shown: Sequence[CandidateCost]) -> list[float]:
    """Simulate every candidate shown, with one progress bar over them all (on a terminal)."""
    from wss.model.plan.search import forced_scenario
    from wss.model.simulate import simulate_detailed
    from wss.views.progress import progress_bar

    out = []
    with progress_bar(f"simulate {len(shown)} candidates", delay_s=0.5) as bar:
        for i, candidate in enumerate(shown):
            def done(fraction: float, i: int = i) -> None:
                bar((i + fraction) / len(shown))

            result, _ = simulate_detailed(forced_scenario(scenario, candidate), record=False, progress=done)
            out.append(result.step_time_s)
    return out


def format_candidates(name: str, choice: PlanChoice, shown: Sequence[CandidateCost],
                      simulated: list[float] | None) -> str:
    """The text table of ``wss plan``."""
    from wss.errors import shorten
    from wss.views.summary import fmt_bytes, fmt_time

    lines = [f"{shorten(name)}: {choice.line()}", f"  why          {choice.reason}"]
    head = f"  {'#':>3}  {'checkpointing':<13}  {'micro-batches':<28}  {'crossings':>9}  {'SRAM':>9}  {'analytic':>10}"
    head += f"  {'vs best':>7}  {'bound by':<8}" + (f"  {'simulated':>10}  {'vs best':>7}" if simulated else "")
    lines.append(head)
    best = shown[0].step_time_s
    best_sim = min(simulated) if simulated else 0.0
    for i, c in enumerate(shown):
        row = (f"  {i + 1:>3}  {c.checkpointing:<13}  {c.split():<28}  {c.weight_crossings:>9.3g}  "
               f"{fmt_bytes(c.sram_bytes_needed):>9}  {fmt_time(c.step_time_s):>10}  "
               f"{c.step_time_s / best - 1:>+7.1%}  {c.bound_by:<8}")
        if simulated:
            row += f"  {fmt_time(simulated[i]):>10}  {simulated[i] / best_sim - 1:>+7.1%}"
        lines.append(row)
    lines.append(f"  ranked {choice.candidates} candidates; crossings: full copies of the weights into a wafer "
                 "per step")
    return "\n".join(lines)
