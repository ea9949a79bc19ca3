"""Print the two tables of docs/fidelity.md that compare closed forms with the simulator.

* the planner's analytic level against the simulator on every shipped scenario (the chosen plan,
  its analytic step time, the simulated one, the error);
* the estimate (``wss estimate``) against the simulator (simulated, estimated, difference, what
  bounds the step, and the difference again with 64 GiB buffers where an effect is documented).

Both run each shipped scenario as ``tests/fidelity/fidelity_helpers.py`` says (the slow ones
reduced), so the printed rows are what the tests check.  When the model changes, ``--write`` puts the
estimate's rows into docs/fidelity.md (each row's explanation cell, written by hand, stays) and the
differences into ``CROSS_CHECK`` (and with ``--full`` into ``FULL_SIZE``) of the helpers::

    python tools/fidelity_tables.py            # about a minute
    python tools/fidelity_tables.py --full     # also the full-size slow rows (about a minute more)
    python tools/fidelity_tables.py --full --write   # the refit's step (python tools/refit.py)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import wss
from wss.model.plan import rank_candidates
from wss.studies.estimate import estimate
from wss.views.summary import fmt_time

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "fidelity.md"
HELPERS = ROOT / "tests" / "fidelity" / "fidelity_helpers.py"
sys.path.insert(0, str(ROOT / "tests" / "fidelity"))
from fidelity_helpers import CROSS_CHECK, DEEP_BUFFERS, FULL_SIZE  # noqa: E402


def _pct(a: float, b: float) -> str:
    return f"{a / b - 1:+.2%}"


def planner_rows() -> list[str]:
    """| scenario | chosen | analytic | simulated | error |"""
    rows = []
    for name in sorted(CROSS_CHECK):
        s = wss.load_scenario(ROOT / "scenarios" / f"{name}.yaml", CROSS_CHECK[name][0])
        best = rank_candidates(s)[0]
        sim = wss.simulate(s).step_time_s
        chosen = f"{best.checkpointing} x {len(best.micro_batches)}"
        rows.append(f"| {name} | {chosen} | {fmt_time(best.step_time_s)} | {fmt_time(sim)} | "
                    f"{_pct(best.step_time_s, sim)} |")
    return rows


def estimate_rows(full: bool, deep_too: Sequence[tuple[str, bool]] = ()) -> list[str]:
    """| scenario | simulated | estimated | difference | bound by | explanation | with 64 GiB buffers |

    The last column for the rows with a documented effect, and for those ``deep_too`` names."""
    rows = []
    runs = [(name, CROSS_CHECK[name][0], CROSS_CHECK[name][2]) for name in CROSS_CHECK]
    if full:
        runs += [(f"{name}, full size", {}, None) for name in FULL_SIZE]
    for label, overrides, effect in runs:
        path = ROOT / "scenarios" / f"{label.split(',')[0]}.yaml"
        s = wss.load_scenario(path, overrides)
        est, sim = estimate(s), wss.simulate(s)
        deep = ""
        if effect is not None or _row_key(label) in deep_too:
            s2 = wss.load_scenario(path, {**overrides, **DEEP_BUFFERS})
            deep = _pct(estimate(s2).step_time_s, wss.simulate(s2).step_time_s)
        rows.append(f"| {label} | {fmt_time(sim.step_time_s)} | {fmt_time(est.step_time_s)} | "
                    f"{_pct(est.step_time_s, sim.step_time_s)} | {sim.bound_by} | {effect or '-'} | {deep} |")
    return rows


def _cells(row: str) -> list[str]:
    return [c.strip() for c in row.strip().strip("|").split("|")]


def _row_key(label: str) -> tuple[str, bool]:
    """A cross-check row's scenario and whether it is the full-size one: ``gpt_1t, reduced (32 blocks)``."""
    return label.split(",")[0].split(" (")[0].strip(), "full size" in label


def write_doc(text: str, rows: Sequence[str]) -> str:
    """The page with each estimate row replaced by its new figures, matched by the first cell; the row's
    explanation cell (the sixth) is the page's.  A row the page lacks is an error: the table is written by hand."""
    lines = text.split("\n")
    for row in rows:
        new = _cells(row)
        at = [i for i, line in enumerate(lines)
              if line.startswith("|") and _row_key(_cells(line)[0]) == _row_key(new[0])]
        if len(at) != 1:
            raise ValueError(f"docs/fidelity.md: {len(at)} rows named {new[0]!r} (expected one)")
        old = _cells(lines[at[0]])
        new[0], new[5] = old[0], old[5]  # the page's label (it says how a row is reduced) and explanation
        lines[at[0]] = ("| " + " | ".join(new) + " |").replace("|  |", "| |")
    return "\n".join(lines)


def write_helpers(text: str, rows: Sequence[str]) -> str:
    """fidelity_helpers.py with each row's difference (in percent, two decimals) in CROSS_CHECK or FULL_SIZE."""
    for row in rows:
        (name, full), diff = _row_key(_cells(row)[0]), f"{float(_cells(row)[3].rstrip('%')):.2f}"
        if full:
            pattern = rf'(FULL_SIZE = \{{[^}}]*"{re.escape(name)}": )-?[0-9.]+'
        else:  # the first number after the name's overrides dictionary in CROSS_CHECK
            pattern = rf'(CROSS_CHECK = \{{.*?\n    "{re.escape(name)}": \(\s*\{{.*?\}},\s*)-?[0-9.]+'
        text, n = re.subn(pattern, rf"\g<1>{diff}", text, count=1, flags=re.S)
        if n != 1:
            raise ValueError(f"fidelity_helpers.py: no difference for {name!r}")
    return text


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--full", action="store_true", help="also the full-size rows of the slow scenarios")
    ap.add_argument("--write", action="store_true",
                    help="put the estimate's rows into docs/fidelity.md and their differences into the helpers")
    args = ap.parse_args(argv)
    if not args.write:
        print("The planner's analytic level:")
        print("\n".join(planner_rows()))
    deep = [_row_key(c[0]) for c in map(_cells, DOC.read_text().split("\n"))
            if len(c) == 7 and c[6] and c[6][0] in "+-"]
    rows = estimate_rows(args.full, deep)
    print("\nCross-check of the estimate:")
    print("\n".join(rows))
    if args.write:
        DOC.write_text(write_doc(DOC.read_text(), rows))
        HELPERS.write_text(write_helpers(HELPERS.read_text(), rows))
        print(f"wrote {DOC.relative_to(ROOT)}, {HELPERS.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
