"""Design-space sweeps: many scenarios in parallel, one row each in a DataFrame.

>>> from wss.studies.sweep import sweep
>>> df = sweep("scenarios/gpt3_175b.yaml",
...            {"hardware.wafers": [1, 2, 4, 8], "workload.model": ["gpt3-1.3b", "gpt3-175b"]})

Each point is the base scenario with some dotted keys overridden (as
``wss simulate --set`` does).  Points are the Cartesian product of the varied
keys, or, with ``zip=True``, the lists taken element by element; a tuple of
keys (``{("hardware.wafers", "training.global_batch"): [(1, 8), (2, 16)]}``)
varies those keys together inside a Cartesian product.

The parent process loads and validates every point (so a bad point costs
nothing), then runs the valid ones on an executor: a local process pool,
in-process, or Dask.  With ``out=DIR`` every finished point is written to
``DIR/<key>.json`` as soon as it completes, where ``key`` hashes the resolved
scenario, the fidelity and the wss version; running the same sweep again
reads those files instead of simulating, so an interrupted sweep resumes.

A point whose scenario is invalid or infeasible (:class:`~wss.errors.WssError`)
becomes a row with ``status == "error"`` and the message; an unexpected
exception in the model becomes ``status == "failed"`` and is *not* cached, so
the next run tries it again.  Bad sweep specifications raise
:class:`SweepError`.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import functools
import hashlib
import itertools
import json
import logging
import math
import multiprocessing
import numbers
import os
import queue
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from wss.errors import ScenarioError, WssError
from wss.files import atomic_write_text
from wss.model.result.results import BREAKDOWN_CATEGORIES, MemoryFootprint
from wss.model.scenario import Scenario, load_scenario
from wss.model.scenario.presets import config_root

if TYPE_CHECKING:  # pandas is imported only when a frame is built
    import pandas as pd

__all__ = [
    "sweep",
    "expand_points",
    "add_scaling",
    "run_point",
    "scenario_key",
    "SweepError",
    "SweepProgress",
    "FIDELITIES",
    "EXECUTORS",
    "METRIC_COLUMNS",
]

#: Points that fail to load (``wss -v``) and points found in the cache (``wss -vv``).
log = logging.getLogger(__name__)

FIDELITIES = ("simulate", "estimate")
EXECUTORS = ("process", "serial", "dask")

#: Default key whose smallest value is the reference of speed-up and efficiency.
SCALE_KEY = "hardware.wafers"

_RESOLVED = ("model", "wafers", "global_batch", "seq_len", "sparsity")
_BREAKDOWN = tuple(f"breakdown_{c}_s" for c in BREAKDOWN_CATEGORIES)
_MEMORY = tuple(MemoryFootprint.model_fields)
#: Columns measured by a point (NaN or None when the point did not run).
METRIC_COLUMNS = (
    "step_time_s",
    "samples_per_s",
    "tokens_per_s",
    "bound_by",
    *_BREAKDOWN,
    "fraction_of_peak",
    "energy_per_step_J",
    "energy_per_token_J",
    "average_power_W",
    *_MEMORY,
    "loss",
    "accuracy",
)


class SweepError(WssError):
    """A sweep that cannot be run as specified (unequal zipped lists, unknown executor, ...)."""


class SweepProgress(NamedTuple):
    """What a progress callback is told after each point."""

    done: int
    total: int
    cached: int
    errors: int
    elapsed_s: float


@dataclass(frozen=True)
class _Axis:
    """Keys varied together, and the tuple of their values at each position on the axis."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


#: One point of a sweep: its overrides, and the index of its value on every axis.
_Point = tuple[dict[str, Any], tuple[int, ...]]


# --------------------------------------------------------------------------- points


def _axes(vary: Mapping[Any, Sequence[Any]] | None, zipped: bool) -> list[_Axis]:
    axes: list[_Axis] = []
    seen: set[str] = set()
    for key, values in (vary or {}).items():
        keys = (key,) if isinstance(key, str) else tuple(key)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise SweepError(f"vary: a key must be a dotted string or a tuple of them, got {key!r}")
        if dup := seen.intersection(keys):
            raise SweepError(f"vary: {', '.join(sorted(dup))} is varied twice")
        seen.update(keys)
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise SweepError(f"vary: {key!r} needs a list of values, got {values!r}")
        values = list(values)
        if not values:
            raise SweepError(f"vary: {key!r} has no values")
        if len(keys) == 1:
            rows = tuple((v,) for v in values)
        else:
            rows = tuple(tuple(v) for v in values)
            if any(len(r) != len(keys) for r in rows):
                raise SweepError(f"vary: every value of {keys!r} must be a tuple of {len(keys)} values")
        axes.append(_Axis(keys, rows))
    if zipped and len(axes) > 1:
        lengths = {ax.keys: len(ax.values) for ax in axes}
        if len(set(lengths.values())) > 1:
            desc = ", ".join(f"{'+'.join(k)}: {n}" for k, n in lengths.items())
            raise SweepError(f"zip needs lists of equal length, got {desc}")
        keys = tuple(k for ax in axes for k in ax.keys)
        rows = tuple(tuple(v for ax in axes for v in ax.values[i]) for i in range(len(axes[0].values)))
        axes = [_Axis(keys, rows)]
    return axes


def expand_points(vary: Mapping[Any, Sequence[Any]] | None, zip: bool = False) -> list[dict[str, Any]]:
    """The overrides of every point, in sweep order (the first key varies slowest)."""
    return [p for p, _ in _points(_axes(vary, zip))]


def _points(axes: list[_Axis]) -> list[_Point]:
    """Each point's overrides and the index of its value on every axis."""
    out = []
    for idx in itertools.product(*(range(len(ax.values)) for ax in axes)):
        values: dict[str, Any] = {}
        for ax, i in zip(axes, idx):
            values.update(dict(zip(ax.keys, ax.values[i])))
        out.append((values, idx))
    return out


# --------------------------------------------------------------------------- one point


@functools.lru_cache(maxsize=1)
def model_fingerprint() -> str:
    """sha256 of wss's own source and presets: a cached point is reused only by the same model.

    The version number alone would let a cache made before a change to the
    model answer for the model after it.
    """
    digest = hashlib.sha256()
    for root, pattern in ((Path(__file__).resolve().parents[1], "*.py"), (config_root(), "*.yaml")):
        for path in sorted(root.rglob(pattern)):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def scenario_key(scenario: Scenario, fidelity: str = "simulate") -> str:
    """sha256 of the canonical JSON of the resolved scenario, the fidelity, the wss version and source."""
    from wss._version import __version__

    doc = {
        "fidelity": fidelity,
        "scenario": scenario.model_dump(mode="json"),
        "wss_version": __version__,
        "model": model_fingerprint(),
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _estimator() -> Callable[[Scenario], Any]:
    """:func:`wss.studies.estimate.estimate`, imported when a point first needs it."""
    from wss.studies.estimate import estimate

    return estimate


def _as_dict(obj: Any) -> dict[str, Any]:
    if obj is None:
        return {}
    if isinstance(obj, Mapping):
        return dict(obj)
    if hasattr(obj, "model_dump"):
        return obj.model_dump()
    return dict(vars(obj))


def _metrics(out: Any) -> dict[str, Any]:
    """The row fields of a Result (or an Estimate: the same names where it has them)."""
    row: dict[str, Any] = dict.fromkeys(METRIC_COLUMNS)
    for name in ("step_time_s", "samples_per_s", "tokens_per_s", "bound_by"):
        row[name] = getattr(out, name, None)
    breakdown = getattr(out, "breakdown_s", None)
    if breakdown is None:
        breakdown = getattr(out, "breakdown", None)
    for cat, value in _as_dict(breakdown).items():
        if f"breakdown_{cat}_s" in row:
            row[f"breakdown_{cat}_s"] = value
    flops = getattr(out, "flops", None)
    row["fraction_of_peak"] = getattr(flops, "fraction_of_peak", None) if flops is not None else None
    if row["fraction_of_peak"] is None:
        row["fraction_of_peak"] = getattr(out, "fraction_of_peak", None)
    energy = getattr(out, "energy", None)  # None: an Estimate, or hardware without power figures
    if energy is not None:
        row["energy_per_step_J"] = energy.per_step_J
        row["energy_per_token_J"] = energy.per_token_J
        row["average_power_W"] = energy.average_power_W
    memory = _as_dict(getattr(out, "memory", None))
    for name in _MEMORY:  # an Estimate has no footprint but may carry some of its fields (micro_batches)
        row[name] = memory[name] if name in memory else getattr(out, name, None)
    numerics = getattr(out, "numerics", None)
    if numerics is not None:
        losses, accuracies = list(numerics.losses or []), list(numerics.accuracies or [])
        row["loss"] = losses[-1] if losses else None
        row["accuracy"] = accuracies[-1] if accuracies else None
    return row


def run_point(scenario: Mapping[str, Any], fidelity: str = "simulate", source: str | None = None) -> dict[str, Any]:
    """Run one resolved scenario (``Scenario.model_dump(mode="json")``) and return its row fields.

    A top-level function of plain data in and out, so process pools (spawn)
    and Dask workers can run it.  A :class:`~wss.errors.WssError` becomes
    ``status == "error"`` (its message naming ``source``, the base scenario
    file, when given); anything else propagates.
    """
    s = Scenario.model_validate(scenario)
    try:
        if fidelity == "estimate":
            out = _estimator()(s)
        else:
            from wss.model.simulate import simulate

            out = simulate(s)
    except ScenarioError as exc:
        if source and exc.source.startswith("<"):
            exc = type(exc)(source, exc.problems)  # errors found after loading name an in-memory '<scenario>'
        return {"status": "error", "error": str(exc), **dict.fromkeys(METRIC_COLUMNS)}
    except WssError as exc:
        return {"status": "error", "error": str(exc), **dict.fromkeys(METRIC_COLUMNS)}
    return {"status": "ok", "error": None, **_metrics(out)}


# --------------------------------------------------------------------------- cache


def _cache_file(out: Path, key: str) -> Path:
    return out / f"{key}.json"


def _read_cached(out: Path | None, key: str) -> dict[str, Any] | None:
    if out is None:
        return None
    path = _cache_file(out, key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or not isinstance(doc.get("row"), dict):
        return None
    return doc["row"]


def _write_cached(out: Path, key: str, fidelity: str, values: dict[str, Any], row: dict[str, Any]) -> None:
    from wss._version import __version__

    doc = {"key": key, "wss_version": __version__, "fidelity": fidelity, "values": values, "row": row}
    atomic_write_text(_cache_file(out, key), json.dumps(doc, indent=1, default=repr, allow_nan=True))


# --------------------------------------------------------------------------- executors


def _failed(exc: BaseException) -> dict[str, Any]:
    return {"status": "failed", "error": f"{type(exc).__name__}: {exc}", **dict.fromkeys(METRIC_COLUMNS)}


def _run_tasks(
    tasks: Iterable[tuple[str, dict[str, Any]]],
    fidelity: str,
    executor: Any,
    workers: int | None,
    address: str | None,
    on_done: Callable[[str, dict[str, Any]], None],
    source: str | None = None,
) -> None:
    """Run ``tasks`` ((key, resolved scenario) pairs) and call ``on_done(key, fields)`` as each finishes.

    Tasks are submitted as the iterator yields them, so loading the next points
    overlaps the workers' start-up and the first simulations.
    """
    tasks = iter(tasks)
    first = next(tasks, None)
    if first is None:
        return  # nothing to run: start no pool or cluster
    tasks = itertools.chain([first], tasks)
    if executor == "serial":
        for key, scenario in tasks:
            try:
                fields = run_point(scenario, fidelity, source)
            except Exception as exc:  # a bug in the model: report it as a row, keep going
                fields = _failed(exc)
            on_done(key, fields)
        return
    if executor == "process":
        # spawn: safe beside threads (Jupyter, Dask) and the same on every OS; workers start on demand
        n = workers or os.cpu_count() or 1
        pool = cf.ProcessPoolExecutor(max_workers=n, mp_context=multiprocessing.get_context("spawn"),
                                      initializer=_end_with_parent, initargs=(os.getpid(),))
        try:
            _submit_all(pool, tasks, fidelity, source, on_done, max_in_flight=n)
        except BaseException:  # Ctrl-C, SIGTERM (raised as an exception by the CLI) or an error: stop now
            _terminate_workers(pool)
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
        return
    if executor == "dask":
        client, close = _dask_client(address, workers)
        try:
            _submit_all(client, tasks, fidelity, source, on_done)
        finally:
            close()
        return
    _submit_all(executor, tasks, fidelity, source, on_done)


#: Seconds between a pool worker's checks that the process that started it is still there.
PARENT_POLL_S = 0.25


def _end_with_parent(parent: int) -> None:
    """Pool worker initializer: end this worker as soon as the sweep's process is gone.

    A parent killed with SIGKILL (or crashing) cannot stop its workers, and a worker left behind keeps
    the caller's stdout open and the multiprocessing resource tracker alive.  A daemon thread watches
    the parent's pid (a reparented worker sees another one) and exits the worker.  Ctrl-C in a terminal
    reaches the whole process group: the workers ignore it, and the parent, which handles it, ends them.
    """
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="wss-end-with-parent", daemon=True).start()


def _terminate_workers(pool: cf.ProcessPoolExecutor) -> None:
    """End a local pool's workers now instead of waiting for the points they are running."""
    processes = getattr(pool, "_processes", None) or {}  # concurrent.futures keeps them here (3.11-3.13)
    for proc in list(processes.values()):
        with contextlib.suppress(Exception):
            proc.terminate()


def _submit_all(
    pool: Any,
    tasks: Iterable[tuple[str, dict[str, Any]]],
    fidelity: str,
    source: str | None,
    on_done: Callable[[str, dict[str, Any]], None],
    max_in_flight: int | None = None,
) -> None:
    """Submit every task, and hand each result to ``on_done`` as soon as it is in.

    Futures report through ``add_done_callback`` (concurrent.futures and Dask
    both have it) into a queue that this thread drains between submissions
    and afterwards, so a point is cached moments after it finishes even while
    later points are still being loaded.  ``max_in_flight`` bounds the points
    handed over but not finished: a local pool then holds no queue of work
    that would keep its processes busy after Ctrl-C.
    """
    finished: queue.SimpleQueue = queue.SimpleQueue()
    futures: dict[Any, str] = {}
    seen: set[int] = set()

    def handle(fut: Any) -> None:
        seen.add(id(fut))
        try:
            fields = fut.result()
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # worker crash, cancelled task or model bug: a 'failed' row, not a lost sweep
            fields = _failed(exc)
        on_done(futures[fut], fields)

    def wait_one() -> None:
        while True:
            try:
                return handle(finished.get(timeout=0.2))  # a timeout keeps Ctrl-C responsive
            except queue.Empty:
                continue

    try:
        for key, scenario in tasks:  # the next point loads while the workers are busy ...
            while max_in_flight and len(futures) - len(seen) >= max_in_flight:
                wait_one()  # ... and is handed over as soon as one is free
            fut = pool.submit(run_point, scenario, fidelity, source)
            futures[fut] = key
            if not callable(getattr(fut, "add_done_callback", None)):
                continue
            fut.add_done_callback(finished.put)
            while not finished.empty():
                handle(finished.get())
        for fut in futures:
            if not callable(getattr(fut, "add_done_callback", None)):
                handle(fut)  # futures without callbacks: wait for them in submission order
        while len(seen) < len(futures):
            wait_one()
    except BaseException:
        for fut in futures:
            fut.cancel()
        raise


def _dask_client(address: str | None, workers: int | None, connect_timeout_s: float = 10.0):
    """A Dask client on ``address`` (or on a new local cluster) and the function that closes it.

    An unreachable scheduler (after ``connect_timeout_s``) or a malformed address is a :class:`SweepError`.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("executor='dask' needs the 'distributed' package: pip install 'wss[dask]'") from None
    if address:
        try:
            client = Client(address, timeout=connect_timeout_s)
        except (OSError, ValueError) as exc:  # unreachable (OSError, incl. timeouts) or malformed (ValueError)
            raise SweepError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
        return client, client.close
    cluster = LocalCluster(
        n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)

    def close() -> None:
        client.close()
        cluster.close()

    return client, close


# --------------------------------------------------------------------------- the sweep


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
        :class:`SweepProgress` after each point.
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
    _check_arguments(base, fidelity, executor, workers)
    axes = _axes(vary, zip)
    points = _points(axes)
    _check_baseline(baseline, axes)  # before hours of points, not after
    _check_keys(axes, overrides)
    bar = _progress_bar(progress)
    report = bar if bar is not None else progress if callable(progress) else None
    run = _SweepRun(base, dict(overrides or {}), fidelity, Path(out) if out is not None else None, points, report)
    source = str(base) if isinstance(base, (str, Path)) else None
    try:
        _run_tasks(run.tasks(), fidelity, executor, workers, address, run.on_done, source)
    finally:
        if bar is not None:
            bar.close()
    return _frame(run.rows, axes, points, baseline)


def _progress_bar(progress: Any) -> Any:
    """The bar ``sweep`` draws itself for ``progress="auto"`` or True (None for a callable, False or None)."""
    if progress is True or progress == "auto":
        from wss.views.progress import SweepBar

        return SweepBar(enabled=True if progress is True else None)
    if progress not in (None, False) and not callable(progress):
        raise SweepError(f"progress must be 'auto', True, False, None or a callable, got {progress!r}")
    return None


def _check_arguments(base: Any, fidelity: str, executor: Any, workers: int | None) -> None:
    """Raise SweepError for a fidelity, executor, worker count or scenario file that cannot be run."""
    if fidelity not in FIDELITIES:
        raise SweepError(f"fidelity must be one of {', '.join(FIDELITIES)}, got {fidelity!r}")
    if isinstance(executor, str) and executor not in EXECUTORS:
        raise SweepError(f"executor must be one of {', '.join(EXECUTORS)} or have a submit method, got {executor!r}")
    if not isinstance(executor, str) and not callable(getattr(executor, "submit", None)):
        raise SweepError(f"executor {executor!r} has no submit method")
    if workers is not None and workers < 1:
        raise SweepError(f"workers must be at least 1, got {workers}")
    if isinstance(base, (str, Path)) and not Path(base).is_file():
        raise SweepError(f"{base}: no such scenario file")


def _varied(axes: list[_Axis]) -> list[str]:
    """Every varied key, in axis order."""
    return [k for ax in axes for k in ax.keys]


def _check_baseline(baseline: str | None, axes: list[_Axis]) -> None:
    """Raise SweepError if the speed-up reference is given but not varied."""
    varied = _varied(axes)
    if baseline is not None and baseline not in varied:
        raise SweepError(f"baseline {baseline!r} is not a varied key ({', '.join(varied) or 'none'})")


def _check_keys(axes: list[_Axis], overrides: Mapping[str, Any] | None) -> None:
    """Raise SweepError naming the first varied or fixed key that no scenario has (a typo would fail every point)."""
    from wss.model.scenario.loader import key_problem

    checks = [("vary", key, [row[i] for row in ax.values]) for ax in axes for i, key in enumerate(ax.keys)]
    checks += [("overrides", key, [value]) for key, value in (overrides or {}).items()]
    for what, key, values in checks:
        problem = key_problem(key, values)
        if problem is not None:
            raise SweepError(f"{what}: {problem}")


def _blank_row(values: dict[str, Any], fidelity: str) -> dict[str, Any]:
    """A point's row before it is loaded: its varied values, and every other field empty."""
    row: dict[str, Any] = {**values, "status": None, "error": None}
    row.update(dict.fromkeys(_RESOLVED))
    row["wafers"] = values.get(SCALE_KEY)
    row.update({"fidelity": fidelity, "key": None, "cached": False})
    return row


class _SweepRun:
    """The rows of one sweep as its points are loaded, looked up in the cache, run and reported.

    A point runs once per resolved scenario (its ``key``): points that resolve to one scenario
    share the first one's run, and a point already in the cache folder is read, not run.
    """

    def __init__(
        self,
        base: str | Path | Mapping[str, Any] | Scenario,
        fixed: dict[str, Any],
        fidelity: str,
        cache: Path | None,
        points: list[_Point],
        progress: Callable[[SweepProgress], None] | None,
    ):
        self.base, self.fixed, self.fidelity, self.cache = base, fixed, fidelity, cache
        self.points, self.progress = points, progress
        self.started = time.perf_counter()
        self.rows = [_blank_row(values, fidelity) for values, _ in points]
        self.waiting: dict[str, list[int]] = {}  # key -> the points waiting for its run
        self.results: dict[str, dict[str, Any]] = {}  # key -> fields of its finished run
        self.done = self.cached = self.errors = 0

    def finish(self, i: int, fields: dict[str, Any], cached: bool) -> None:
        """Fill point ``i``'s row and report progress."""
        self.rows[i].update(fields)
        self.rows[i]["cached"] = cached
        self.done += 1
        self.cached += cached
        self.errors += fields["status"] != "ok"
        if self.progress is not None:
            elapsed = time.perf_counter() - self.started
            self.progress(SweepProgress(self.done, len(self.points), self.cached, self.errors, elapsed))

    def tasks(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Load each point; finish bad and cached ones here, yield (key, resolved scenario) of the ones to run."""
        for i, (values, _) in enumerate(self.points):
            yield from self._prepare(i, values)

    def _prepare(self, i: int, values: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
        try:
            scenario = load_scenario(self.base, {**self.fixed, **values})
        except WssError as exc:
            log.info("sweep point %d %s: %s", i, values, exc)
            self.finish(i, {"status": "error", "error": str(exc), **dict.fromkeys(METRIC_COLUMNS)}, False)
            return
        key = scenario_key(scenario, self.fidelity)
        self.rows[i].update(
            model=scenario.workload.model.name,
            wafers=scenario.hardware.wafers,
            global_batch=scenario.training.global_batch,
            seq_len=scenario.seq_len,
            sparsity=scenario.workload.sparsity,
            key=key,
        )
        if (hit := _read_cached(self.cache, key)) is not None:
            log.debug("sweep point %d %s: cached (%s)", i, values, key[:12])
            self.finish(i, hit, True)
        elif key in self.results:
            self.finish(i, dict(self.results[key]), False)  # the same resolved scenario again, already run
        elif key in self.waiting:
            self.waiting[key].append(i)  # the same resolved scenario twice: run it once
        else:
            self.waiting[key] = [i]
            yield key, scenario.model_dump(mode="json")

    def on_done(self, key: str, fields: dict[str, Any]) -> None:
        """A run finished: cache it (unless it failed) and fill every point waiting for it."""
        self.results[key] = fields
        first = self.waiting[key][0]
        if self.cache is not None and fields["status"] != "failed":
            values = {k: self.rows[first][k] for k in self.points[first][0]}
            _write_cached(self.cache, key, self.fidelity, values, fields)
        for i in self.waiting[key]:
            self.finish(i, dict(fields), False)


def _frame(rows: list[dict[str, Any]], axes: list[_Axis], points: list[_Point], baseline: str | None) -> pd.DataFrame:
    """The sweep's DataFrame: one row per point, in point order, columns as documented, with scaling added."""
    import pandas as pd

    columns = [*_varied(axes), "status", "error", *_RESOLVED, *METRIC_COLUMNS[:3], "speedup", "efficiency",
               *METRIC_COLUMNS[3:], "fidelity", "key", "cached"]
    df = pd.DataFrame(rows)
    df["speedup"] = math.nan
    df["efficiency"] = math.nan
    df = df.reindex(columns=columns)
    if not len(df):
        return df
    ref_key = baseline or _default_baseline(axes)  # a given baseline was checked before any point ran
    df["_group"] = _scaling_groups(axes, points, ref_key)
    ref_col = "wafers" if ref_key in (None, SCALE_KEY) else ref_key
    df = add_scaling(df, by="_group", baseline=ref_col)
    return df.drop(columns="_group")


def _scaling_groups(axes: list[_Axis], points: list[_Point], ref_key: str | None) -> list[str]:
    """Each point's speed-up group: its value indices on every axis but the one holding ``ref_key``."""
    ref_axis = next((n for n, ax in enumerate(axes) if ref_key in ax.keys), None)
    group = [tuple(i for n, i in enumerate(idx) if n != ref_axis) for _, idx in points]
    return ["/".join(map(str, g)) for g in group]


def _default_baseline(axes: list[_Axis]) -> str | None:
    """The key speed-ups are measured along: the cluster size if varied, else the first numeric key.

    A categorical key (a model name) has no "smallest" value that means anything: measuring a
    sparsity sweep of two models against the alphabetically first model would be wrong.  With no
    numeric key, the first varied key is used and each group's first point that ran is the reference.
    """
    keys = [(k, [v[i] for v in ax.values]) for ax in axes for i, k in enumerate(ax.keys)]
    if any(k == SCALE_KEY for k, _ in keys):
        return SCALE_KEY
    for k, values in keys:
        if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
            return k
    return keys[0][0] if keys else None


def add_scaling(
    df: pd.DataFrame,
    by: str | Sequence[str] | None = None,
    baseline: str = "wafers",
    throughput: str = "tokens_per_s",
) -> pd.DataFrame:
    """Add ``speedup`` and ``efficiency`` against the smallest ``baseline`` row that ran in each group.

    ``speedup = throughput / reference throughput``;
    ``efficiency = speedup / (wafers / reference wafers)``, only in groups
    where the number of wafers varies (elsewhere it would just repeat the
    speed-up, e.g. in a sparsity sweep, so it is NaN).  Rows whose status
    is not ``"ok"`` get NaN; if the smallest point failed, the smallest one that
    ran is the reference.  Values of ``baseline`` that cannot be ordered fall
    back to the first row that ran.
    """
    df = df.copy()
    speedup = [math.nan] * len(df)
    efficiency = [math.nan] * len(df)
    keys = [by] if isinstance(by, str) else list(by or [])
    groups = df.groupby(keys, sort=False, dropna=False).indices.values() if keys else [range(len(df))]
    status = df["status"].tolist() if "status" in df else ["ok"] * len(df)
    thr = df[throughput].tolist()
    wafers = df["wafers"].tolist()
    base = df[baseline].tolist()
    for members in groups:
        ok = [int(i) for i in members if status[i] == "ok" and _finite(thr[i]) and thr[i] > 0]
        if not ok:
            continue
        try:
            ref = min(ok, key=lambda i: base[i])
        except TypeError:
            ref = ok[0]
        scales = len({wafers[i] for i in ok}) > 1 and all(_finite(wafers[i]) for i in ok)
        for i in ok:
            speedup[i] = thr[i] / thr[ref]
            if scales:
                efficiency[i] = speedup[i] / (wafers[i] / wafers[ref])
    df["speedup"] = speedup
    df["efficiency"] = efficiency
    return df


def _finite(x: Any) -> bool:
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
