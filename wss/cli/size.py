"""``wss size``: time to train a token budget on each cluster size, and the smallest that meets a deadline.

Registered in :mod:`wss.cli.app`.  Exit codes: 0 the table was printed (and the target, if any, is met by
some size); 1 no size up to the largest tried meets the target (the best achievable is printed); 2 bad
input (one line).  See docs/sizing.md.
"""

from __future__ import annotations

import argparse
import io
import json
import math
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wss.cli.common import EXIT_FAILED, EXIT_OK, add_scenario_argument, add_set_argument, settle
from wss.files import all_or_nothing, atomic_write_bytes, ensure_file_target

if TYPE_CHECKING:  # pandas loads with wss.studies.size, when the command runs
    import pandas as pd

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("size",)


def add_commands(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``size`` command to an argparse sub-parser set."""
    p = subparsers.add_parser(
        "size",
        help="time to train a token budget on each cluster size; the smallest that meets a deadline",
        description="Simulate SCENARIO on 1, 2, 4, ... wafers (up to --max-wafers), keeping its per-step global "
        "batch, and print the time to train --tokens on each (the steps and the job around them: compile, "
        "programming, weight initialisation, input priming, checkpoints; see --job-costs), with wafer-hours, "
        "energy and cost.  With --days "
        "or --tokens-per-s, the smallest size that meets it is recommended (exit 1 if none does): the sizes "
        "are estimated in closed form and only the counts that decide the answer are simulated (see "
        "docs/sizing.md).",
    )
    add_scenario_argument(p)
    p.add_argument("--tokens", type=float, required=True, metavar="N", help="tokens to train on, e.g. 3e11")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--days", type=float, default=None, metavar="D", help="deadline in days")
    target.add_argument("--tokens-per-s", type=float, default=None, metavar="X", help="throughput target")
    p.add_argument("--max-wafers", type=int, default=None, metavar="N",
                   help="largest cluster to try (default: the wafer's published cluster limit, else 192)")
    p.add_argument("--price-per-wafer-hour", type=float, default=None, metavar="P",
                   help="price of one wafer-hour: adds a cost column")
    p.add_argument("--plot", type=Path, default=None, metavar="FILE",
                   help="write days and efficiency against wafers to FILE (.png, .svg or .pdf)")
    p.add_argument("--job-costs", default="all", metavar="LIST",
                   help="the job's costs the days count besides the steps: all (default), none (the steps alone), "
                   "or some of compile,programming,weight_init,input_priming,checkpoints (the scenario's job, or "
                   "its system's preset under configs/job)")
    p.add_argument("--workers", type=int, default=None, metavar="N", help="simulate in N processes (default 1)")
    p.add_argument("--json", action="store_true", help="print the table as JSON records instead of text")
    add_set_argument(p)
    return p


def _write_plot(df: pd.DataFrame, path: Path) -> None:
    from wss.studies.size import SizeError, size_figure

    fmt = path.suffix.lower().lstrip(".")
    if fmt not in ("png", "svg", "pdf"):
        raise SizeError(f"--plot {path}: the file must end in .png, .svg or .pdf")
    buf = io.BytesIO()
    size_figure(df).savefig(buf, format=fmt, dpi=100, metadata={"Date": None} if fmt == "svg" else None)
    atomic_write_bytes(path, buf.getvalue())


def _log_above(drawn: bool) -> AbstractContextManager[Any]:
    """While a bar is drawn, wss's log lines (a long run's warning) go above it, not through it."""
    if not drawn:
        return nullcontext()
    import logging

    from tqdm.contrib.logging import logging_redirect_tqdm

    return logging_redirect_tqdm(loggers=[logging.getLogger("wss")])


def _json(df: pd.DataFrame) -> str:
    rows = [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
            for r in df.to_dict(orient="records")]
    return json.dumps({**df.attrs, "rows": rows}, indent=1, default=str)


def run(args: argparse.Namespace) -> int:
    """Run ``wss size`` for parsed arguments; returns the exit code."""
    from wss.studies.size import SizeError, conclusion, format_size, size

    if args.workers is not None and args.workers < 1:
        raise SizeError(f"--workers must be at least 1, got {args.workers}")
    if args.plot is not None:
        ensure_file_target(args.plot)
    from wss.views.progress import progress_bar

    # a bar while it probes (on a terminal, after half a second), closed before the table prints; a long
    # simulation's warning is written above it rather than through it
    with progress_bar("size", delay_s=0.5) as bar, _log_above(bar.enabled):
        df = size(args.scenario, args.tokens, days=args.days, tokens_per_s=args.tokens_per_s,
                  max_wafers=args.max_wafers, price_per_wafer_hour=args.price_per_wafer_hour,
                  overrides=args.overrides, workers=args.workers, progress=bar, job_costs=args.job_costs)
    if args.plot is not None:
        with all_or_nothing():
            _write_plot(df, args.plot)
            settle()  # drawn: only the rename and printing are left, which a signal must not undo
    print(_json(df) if args.json else format_size(df))
    if df.attrs["reachable"] is False:
        if args.json:  # the text table ends with this line already
            import sys

            print(conclusion(df), file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK
