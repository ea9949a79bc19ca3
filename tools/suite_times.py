"""The test suite's CPU seconds per test, and what they mean for its wall time on two idle cores.

On a shared machine a test's wall time says more about the neighbours than about the test; its CPU time
(its process's, plus that of the subprocesses it waited for) does not.  As a pytest plugin this module
writes one JSON line per test: node id, CPU seconds, wall seconds and xdist worker (set-up and tear-down
included, so a module-scoped fixture counts with the first test that uses it)::

    PYTHONPATH=tools .venv/bin/python -m pytest -q -p suite_times --suite-times=/tmp/times.jsonl

As a script it summarises such a file: the total CPU, the longest tests, and the bound an idle run on
``--workers`` cores cannot beat, max(total / workers, longest test)::

    python tools/suite_times.py /tmp/times.jsonl [--top 20] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest


def _cpu_s() -> float:
    """User and system seconds of this process and of its children that have been waited for."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--suite-times", metavar="PATH",
                     help="append each test's CPU and wall seconds to PATH (JSON lines)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    path = item.config.getoption("--suite-times")
    cpu0, wall0 = _cpu_s(), time.perf_counter()
    yield
    if path:
        line = {"id": item.nodeid, "cpu": _cpu_s() - cpu0, "wall": time.perf_counter() - wall0,
                "worker": os.environ.get("PYTEST_XDIST_WORKER", "main")}
        with open(path, "a", encoding="utf-8") as f:  # one short append per test: the workers' lines stay whole
            f.write(json.dumps(line) + "\n")


def summarise(rows: list[dict[str, Any]], top: int, workers: int) -> str:
    """Total CPU, CPU per worker, the ``top`` longest tests and the idle lower bound on ``workers`` cores."""
    total = sum(r["cpu"] for r in rows)
    longest = sorted(rows, key=lambda r: -r["cpu"])
    per_worker: dict[str, float] = {}
    for r in rows:
        per_worker[r["worker"]] = per_worker.get(r["worker"], 0.0) + r["cpu"]
    out = [f"{len(rows)} tests, {total:.1f} CPU s in tests; per worker: "
           + ", ".join(f"{w} {s:.1f}" for w, s in sorted(per_worker.items())),
           f"idle bound on {workers} cores: max({total:.1f} / {workers}, {longest[0]['cpu']:.1f}) = "
           f"{max(total / workers, longest[0]['cpu']):.1f} s",
           f"top {top} by CPU s (wall s):"]
    out += [f"{r['cpu']:8.2f} ({r['wall']:7.2f})  {r['id']}" for r in longest[:top]]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("path", type=Path)
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.path.read_text(encoding="utf-8").splitlines() if line.strip()]
    print(summarise(rows, args.top, args.workers))
    return 0


if __name__ == "__main__":
    sys.exit(main())
