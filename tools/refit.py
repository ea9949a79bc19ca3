"""The whole refit of the calibration, one command, after any change to a mechanism::

    python tools/refit.py            # about 15-30 minutes on a loaded two-core machine
    python tools/refit.py --plan     # print the steps, run nothing
    python tools/refit.py --from 3   # resume at step 3 after it failed and was fixed

Steps, each a command of its own (run in order; the refit stops at the first that fails):

1. ``python tools/calibrate.py --write``: fit the default parameters on the rows marked *calibrated on*,
   write them into configs/, print every row's error and leave-one-out error, and record the fit in
   docs/calibration.json;
2. ``wss check scenarios/*.yaml --baselines baselines/ --update``: re-record every shipped scenario's baseline;
3. ``python tools/fidelity_tables.py --full --write``: the estimate's cross-check table of docs/fidelity.md
   and its differences in tests/fidelity/fidelity_helpers.py (simulated figures);
4. the golden files of the tests that compare them (``pytest --update-goldens`` on those test files);
5. the generated docs: docs/reference.md, docs/validation.md (its "Where to trust wss" table reads
   docs/calibration.json), and the two JSON schemas.

Then it lists the lines of the hand-written docs that still cite a value the fit moved: prose to read again.
What it leaves to you: reviewing the diff, that prose, ``python tools/analytic_grid.py`` (the grid of
docs/fidelity.md, 2 to 10 minutes) and the test suite; commit the values and the baselines apart.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = ROOT / "docs" / "calibration.json"
#: Hand-written pages that cite calibrated values (their generated neighbours are rewritten by the steps), and
#: the scenarios' comments and the validation cases' notes, which cite them too (globs, from the repository).
PROSE = ("docs/model.md", "docs/fidelity.md", "docs/limits.md", "README.md", "scenarios/*.yaml",
         "scenarios/validation/*.yaml")


def _bin(name: str) -> str:
    """A console script of the running interpreter's environment (the .venv's ``wss``)."""
    return str(Path(sys.executable).with_name(name))


def golden_tests(root: Path = ROOT) -> list[str]:
    """The test files that compare their own golden files (``assert_matches_golden(..., where=__file__)``),
    relative to the repository."""
    return sorted(str(p.relative_to(root)) for p in (root / "tests").rglob("test_*.py")
                  if "where=__file__" in p.read_text(encoding="utf-8"))


def steps(root: Path = ROOT) -> list[list[str]]:
    """The refit's commands, in order."""
    py = sys.executable
    scenarios = sorted(str(p.relative_to(root)) for p in (root / "scenarios").glob("*.yaml"))
    out = [
        [py, "tools/calibrate.py", "--write"],
        [_bin("wss"), "check", *scenarios, "--baselines", "baselines/", "--update"],
        [py, "tools/fidelity_tables.py", "--full", "--write"],
    ]
    goldens = golden_tests(root)
    if goldens:
        out.append([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", *goldens, "--update-goldens"])
    return out + [
        [py, "tools/gen_reference_doc.py"],
        [py, "tools/gen_validation_doc.py"],
        [_bin("wss"), "schema", "-o", "docs/scenario.schema.json"],
        [_bin("wss"), "schema", "--case", "-o", "docs/validation-case.schema.json"],
    ]


def stale_prose(record: dict[str, object], root: Path = ROOT) -> list[str]:
    """``file:line: text`` of each hand-written line citing a value the fit moved (its value before, as
    written), beside the parameter's last name: what to read again."""
    out = []
    for key, p in record["parameters"].items():  # type: ignore[attr-defined]
        if p["before"] == p["after"]:
            continue
        name = key.split("@")[0].rsplit(".", 1)[-1]
        before = f"{p['before']:g}"  # as prose writes it: 0.038, 0.46
        pattern = re.compile(rf"(?<![\d.]){re.escape(before)}(?!\d)")
        # The line must say what the number is: the parameter's name as code or prose writes it ("step_overhead_s",
        # "step overhead"), or that it was fitted.
        words = (name, name.removesuffix("_s").replace("_", " "), "calibrat", "fitted", "refit")
        for path in (p for pattern in PROSE for p in sorted(root.glob(pattern))):
            doc = path.relative_to(root).as_posix()
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if pattern.search(line) and any(word in line.lower() for word in words):
                    out.append(f"{doc}:{n}: {key} was {before}: {line.strip()[:140]}")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--plan", action="store_true", help="print the steps and run nothing")
    ap.add_argument("--from", dest="start", type=int, default=1, metavar="N",
                    help="resume at step N (the steps before it done: after a step failed and was fixed)")
    args = ap.parse_args(argv)
    todo = steps()
    for i, cmd in enumerate(todo, 1):
        if i < args.start:
            continue
        shown = " ".join(Path(c).name if c in (sys.executable, _bin("wss")) else c for c in cmd)
        print(f"[{i}/{len(todo)}] {shown}", flush=True)
        if args.plan:
            continue
        code = subprocess.call(cmd, cwd=ROOT)
        if code != 0:
            print(f"refit: step {i} failed (exit {code}); the steps before it have written their files",
                  file=sys.stderr)
            return 1
    if not args.plan:
        stale = stale_prose(json.loads(RECORD.read_text()))
        print("hand-written lines citing a moved value (read them again):" if stale
              else "no hand-written line cites a moved value")
        for line in stale:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
