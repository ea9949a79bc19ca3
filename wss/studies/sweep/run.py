"""The sweep itself: check the arguments, expand the grid, run each point once, return the frame.

:func:`sweep` only strings the steps together; each lives in the module named after it (points, checks,
runs, executors, cache, frame), so the order in which they happen reads here in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from wss.model.scenario import Scenario
from wss.studies.sweep.checks import check_arguments, check_baseline, check_keys
from wss.studies.sweep.executors import run_tasks
from wss.studies.sweep.frame import frame
from wss.studies.sweep.points import grid, parse_axes
from wss.studies.sweep.progress import SweepProgress, progress_bar
from wss.studies.sweep.runs import SweepRun

if TYPE_CHECKING:  # pandas is imported only when a frame is built
    import pandas as pd

__all__ = ["sweep"]


def sweep(
    base: str | Path | Mapping[str, Any] | Scenario,
    vary: Mapping[Any, Sequence[Any]] | None = None,
    *,
    zip: bool = False,
    executor: Any = "process",
    workers: int | None = None,
    address: str | None = None,
    out: str | Path | None = None,
    progress: Callable[[SweepProgress], None] | bool | str | None = "auto",
    fidelity: str = "simulate",
    overrides: Mapping[str, Any] | None = None,
    baseline: str | None = None,
) -> pd.DataFrame:
    """Run ``base`` at every point of ``vary`` and return one row per point.

    Parameters
    ----------
    base
        A scenario YAML path, a scenario mapping, or a :class:`~wss.model.scenario.Scenario`.
    vary
        Dotted key (or tuple of keys varied together) -> list of values.
    zip
        Vary all the lists together, element by element (equal lengths), instead of
        taking their Cartesian product.
    executor
        ``"process"`` (a local spawn process pool of ``workers`` processes, default
        all cores), ``"serial"`` (in this process), ``"dask"`` (a
        ``distributed.Client`` on ``address``, or a local cluster of ``workers``
        processes), or any object with ``submit(fn, *args)`` returning futures
        (a ``distributed.Client``, a ``concurrent.futures`` executor).  Objects
        passed in are not shut down.
    out
        Cache folder: each finished point is written there atomically as JSON and
        found again on the next run of the same sweep.
    progress
        ``"auto"`` (default): a progress bar with an ETA in a Jupyter notebook, or on stderr when it is a
        terminal; ``True``: always the bar; ``False`` or None: none; or a callable given a
        :class:`SweepProgress` before the first point (0 done) and after each point.
    fidelity
        ``"simulate"`` (the discrete-event model) or ``"estimate"`` (the closed-form
        estimate of :mod:`wss.studies.estimate`, milliseconds a point).
    overrides
        Dotted keys set on every point before the varied ones.
    baseline
        The key whose smallest value in each group is the reference of ``speedup``
        and ``efficiency`` (default ``hardware.wafers`` if varied, else the first
        varied key whose values are all numbers, else the first varied key); the
        groups are the combinations of the other axes.

    Returns
    -------
    pandas.DataFrame
        Columns: the varied keys, ``status`` (ok, error, failed), ``error``, the
        resolved ``model``, ``wafers``, ``global_batch``, ``seq_len`` and
        ``sparsity``, the metrics of :data:`METRIC_COLUMNS`, ``speedup`` and
        ``efficiency``, ``fidelity``, ``key`` and ``cached``.  Rows are in point
        order whatever the executor.
    """
    check_arguments(base, fidelity, executor, workers)
    axes = parse_axes(vary, zip)
    points = grid(axes)
    check_baseline(baseline, axes)  # before hours of points, not after
    check_keys(axes, overrides)
    bar = progress_bar(progress)
    report = bar if bar is not None else progress if callable(progress) else None
    run = SweepRun(base, dict(overrides or {}), fidelity, Path(out) if out is not None else None, points, report)
    source = str(base) if isinstance(base, (str, Path)) else None
    try:
        run_tasks(run.tasks(), fidelity, executor, workers, address, run.on_done, source)
    finally:
        if bar is not None:
            bar.close()
    return frame(run.rows, axes, points, baseline)
