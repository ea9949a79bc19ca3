"""Instructions one simulation executes, counted by Valgrind: a cost that does not move with the machine's load.

Wall times on a shared machine swing by 2x within minutes, which hides a 10% change.  This counts the CPU
instructions of one ``simulate`` call instead (Valgrind's ``callgrind`` tool, about 50x slower than a plain
run): the process is counted once running the scenario once and once running it twice, and the difference is
one warm run's instructions (as in a sweep: the caches the first run filled are filled), without the
interpreter's start-up and the imports.  The child runs with its string hashes fixed (``PYTHONHASHSEED=0``) and
the cyclic garbage collector off (where the collector runs depends on everything allocated before, and one full
collection can cost more than a small run).  Two counts of the same code still differ a little (memory addresses
differ between processes): by 1.9% on one GPT-3 175B step on 192 wafers (679 and 692 million), by millions of
instructions on a run as small as fc_mnist's.  So quote changes well above that, on runs of hundreds of millions.

With ``--against DIR`` (another checkout of wss, e.g. a ``git worktree`` of the commit before a change) the same
count is made with that checkout's ``wss`` first on ``sys.path``, and the table gives the change.

Run: ``python benchmarks/bench_instructions.py SCENARIO [--set KEY=VALUE ...] [--against DIR]``, e.g.
``python benchmarks/bench_instructions.py scenarios/gpt3_175b.yaml --set hardware.wafers=192
--set 'faults.stragglers=[{wafer: 17, slowdown: 1.1}]' --set training.steps=1``.  Needs ``valgrind`` on the
PATH (Debian: ``apt-get install valgrind``); minutes for a 192-wafer GPT-3 175B step.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The child process: load the scenario with the overrides and simulate it ``runs`` times; print the events.
_CHILD = """
import gc, sys, wss
gc.disable()
s = wss.load_scenario(sys.argv[1], sys.argv[3:])
for _ in range(int(sys.argv[2])):
    r = wss.simulate(s)
print(r.sim_events)
"""


def instructions(scenario: str, overrides: list[str], runs: int, checkout: Path) -> tuple[int, int]:
    """Instructions of a process that simulates ``scenario`` ``runs`` times with ``checkout``'s wss, and the
    run's events."""
    env = {**os.environ, "PYTHONPATH": str(checkout), "PYTHONHASHSEED": "0"}
    proc = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c",
                           _CHILD, scenario, str(runs), *overrides], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"bench_instructions: the run failed:\n{proc.stderr[-2000:]}")
    found = re.search(r"Collected\s*:\s*(\d+)", proc.stderr)
    if found is None:
        raise SystemExit(f"bench_instructions: no instruction count in Valgrind's output:\n{proc.stderr[-2000:]}")
    return int(found.group(1)), int(proc.stdout.split()[-1])


def one_run(scenario: str, overrides: list[str], checkout: Path) -> tuple[int, int]:
    """One simulation's instructions (two runs' less one run's) and its events."""
    once, events = instructions(scenario, overrides, 1, checkout)
    twice, _ = instructions(scenario, overrides, 2, checkout)
    return twice - once, events


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario", help="scenario YAML file")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a field (repeatable), as wss simulate --set")
    ap.add_argument("--against", type=Path, help="another checkout of wss to count the same run with")
    args = ap.parse_args(argv)
    if shutil.which("valgrind") is None:
        ap.error("valgrind is not on the PATH (Debian: apt-get install valgrind)")
    if args.against is not None and not (args.against / "wss" / "__init__.py").is_file():
        ap.error(f"--against {args.against}: no wss package there")
    scenario = str(Path(args.scenario).resolve())
    rows = [("this checkout", *one_run(scenario, args.overrides, ROOT))]
    if args.against is not None:
        rows.insert(0, (str(args.against), *one_run(scenario, args.overrides, args.against.resolve())))
    print(f"{'checkout':<40} {'instructions':>16} {'events':>10} {'per event':>10}")
    for name, count, events in rows:
        print(f"{name:<40} {count:>16,} {events:>10,} {count / max(events, 1):>10,.0f}")
    if len(rows) == 2:
        print(f"change: {rows[1][1] / rows[0][1] - 1:+.1%} instructions, {rows[1][2] / max(rows[0][2], 1) - 1:+.1%} "
              "events")
    return 0


if __name__ == "__main__":
    sys.exit(main())
