"""Chrome trace-event JSON of a run, for Perfetto (ui.perfetto.dev) and chrome://tracing.

One process per part of the machine, one thread per activity::

    MemoryX            weight stream, prefetch (flash -> DRAM), gradient stream (network in)
    optimizer          update (updates and gradient accumulations)
    SwarmX level l     weights down, gradients up
    wafer (xN ...)     compute (one span per pass), stalls (every exposed wait, by cause)
    wafers (N, ...)    an unfolded run only: one thread per wafer, its compute and waits per pass
    SwarmX edges       an unfolded run only: one thread per tree link (swarmx.down.l<l>.<c>, swarmx.up...)
    input workers      input
    user node          loss (an instant when each step's loss arrives)

Spans are complete events (``ph: "X"``, ``ts``/``dur`` in microseconds) named
``"<kernel> <phase> s<step>"`` with bytes, cycles and the micro-batch in
``args``.  Chunk spans of one pass that follow each other on a link (or in
MemoryX) are merged into one span whose ``args`` keep the chunk count and
the busy time, so a GPT-3 175B step stays a few MB.  Counter events
(``ph: "C"``) give each link's busy fraction and mean buffer occupancy per
time bucket, and the wafer's compute busy fraction.

A folded run (identical blocks, micro-batches or steps simulated once, see
docs/model.md) is traced as it ran: its recorded spans are placed on the
Result's unfolded time axis (:mod:`wss.model.folding.folded_spans`), and on every
track one span named e.g. ``"x379 folded copies of micro-batch 3 s0"``
(category ``folded``) marks each stretch the copies fill, with the copy
count, the period and what they stand for in ``args``.  The counters run
through those stretches at the copied block's (micro-batch's, step's) rate.

The parts that record transfers offer their own tracks (``Cluster.tracks()``:
MemoryX's streams, the SwarmX levels, any part added the same way, through
:class:`~wss.model.components.part.Traced`); this view draws whatever they
offer, each process's spans and then its busy and buffer counters.

Without a cluster (only a saved Result), the trace is drawn from the
Result's records: wafer passes, MemoryX updates and loss arrivals.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from wss.files import atomic_write_bytes
from wss.model.folding.folded_spans import FoldedStretch, UnfoldedSpans
from wss.model.result.results import Result
from wss.views.summary import cluster_int

if TYPE_CHECKING:  # only the type: a view draws a cluster it is handed, it never builds one
    from wss.model.components.part import Track
    from wss.model.sim.cluster import Cluster

__all__ = ["build_trace", "write_trace", "trace_json", "wafer_process_name", "atomic_write_bytes"]

_US = 1e6
#: Decimals kept on microsecond times (nanosecond resolution).
_DECIMALS = 3


def _us(t: float) -> float:
    return round(t * _US, _DECIMALS)


class _Builder:
    """Collects events and hands out pid/tid numbers with their metadata."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[int, str], int] = {}

    def process(self, name: str) -> int:
        if name not in self._pids:
            pid = len(self._pids) + 1
            self._pids[name] = pid
            self.events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}})
            self.events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                                "args": {"sort_index": pid}})
        return self._pids[name]

    def thread(self, pid: int, name: str) -> int:
        key = (pid, name)
        if key not in self._tids:
            tid = len(self._tids) + 1  # unique across processes: no viewer can mix two threads up
            self._tids[key] = tid
            self.events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": name}})
            self.events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                                "args": {"sort_index": tid}})
        return self._tids[key]

    def span(self, pid: int, tid: int, name: str, cat: str, start_s: float, end_s: float,
             args: dict[str, Any], at: int | None = None) -> None:
        """A complete event, appended or (``at``) inserted at that position."""
        ts = _us(start_s)
        dur = max(round(_us(end_s) - ts, _DECIMALS), 0.0)
        event = {"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
        if at is None:
            self.events.append(event)
        else:
            self.events.insert(at, event)

    def instant(self, pid: int, tid: int, name: str, cat: str, t_s: float, args: dict[str, Any]) -> None:
        self.events.append({"ph": "i", "s": "t", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": _us(t_s),
                            "args": args})

    def counter(self, pid: int, name: str, times: Iterable[float], values: Iterable[float], key: str) -> None:
        """One counter series, emitting a sample only where the (rounded) value changes."""
        last = None
        for t, v in zip(times, values):
            v = round(float(v), 4)
            if v != last:
                self.events.append({"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": _us(t), "args": {key: v}})
                last = v


def _merge(
    spans: Iterable[tuple[float, float, int, float]], merge: bool
) -> list[tuple[float, float, int, float, int, float]]:
    """(start, end, pass, bytes) -> (start, end, pass, bytes, chunks, busy_s), consecutive same-pass spans merged."""
    out: list[list[Any]] = []
    for a, b, p, nbytes in spans:
        if merge and out and out[-1][2] == p:
            last = out[-1]
            last[1] = max(last[1], b)
            last[3] += nbytes
            last[4] += 1
            last[5] += b - a
        else:
            out.append([a, b, p, nbytes, 1, b - a])
    return [tuple(x) for x in out]


def _num(x: float) -> int | float:
    """Integral floats as ints: shorter JSON."""
    return int(x) if float(x).is_integer() and abs(x) < 2**53 else x


def _stalls(
    timeline: Iterable[tuple[float, float, str, int]], per_chunk: bool
) -> list[tuple[float, float, str, int, int, float]]:
    """Wafer waits as (start, end, cause, pass, waits, stalled seconds), merged per pass and cause unless per_chunk."""
    out: list[list[Any]] = []
    open_: dict[tuple[int, str], list[Any]] = {}
    for a, b, cause, p in timeline:
        if cause == "compute":
            continue
        key = (p, cause)
        cur = open_.get(key)
        if cur is not None and (not per_chunk or a - cur[1] <= 1e-12):
            cur[1] = b
            cur[4] += 1
            cur[5] += b - a
        else:
            cur = [a, b, cause, p, 1, b - a]
            open_[key] = cur
            out.append(cur)
    return [tuple(x) for x in out]


def _bucket_edges(total_s: float, buckets: int) -> np.ndarray:
    return np.linspace(0.0, total_s, max(int(buckets), 1) + 1)


def _busy_until(spans: Sequence[tuple[float, ...]]) -> Callable[[np.ndarray], np.ndarray]:
    """Busy seconds up to each time, for non-overlapping spans (start, end, ...) sorted by start."""
    if len(spans) == 0:
        return np.zeros_like
    arr = np.asarray([s[:2] for s in spans], dtype=float)
    starts, ends = arr[:, 0], arr[:, 1]
    durs = ends - starts
    cum = np.concatenate(([0.0], np.cumsum(durs)))

    def busy_until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(starts, t, side="right") - 1  # last span starting at or before t
        inside = np.where(k >= 0, np.clip(t - starts[np.maximum(k, 0)], 0.0, durs[np.maximum(k, 0)]), 0.0)
        return np.where(k >= 0, cum[np.maximum(k, 0)] + inside, 0.0)

    return busy_until


def _level_integral(samples: Sequence[tuple[float, int]]) -> Callable[[np.ndarray], np.ndarray]:
    """Integral over time of a step function sampled as (time, value), up to each time."""
    if len(samples) == 0:
        return np.zeros_like
    arr = np.asarray(samples, dtype=float)
    times, values = arr[:, 0], arr[:, 1]
    cum = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))

    def integral(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(times, t, side="right") - 1
        kk = np.maximum(k, 0)
        return np.where(k >= 0, cum[kk] + values[kk] * (t - times[kk]), 0.0)

    return integral


def _per_bucket(cumulative: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Growth of a cumulative quantity per bucket, over the bucket's width."""
    width = np.diff(edges)
    return np.diff(cumulative) / np.where(width > 0, width, 1.0)


_PLURAL = {"block": "blocks", "micro-batch": "micro-batches", "step": "steps"}


def _stretch_args(s: FoldedStretch) -> dict[str, Any]:
    """What a folded-copies span says: how many copies of what, their period, what they stand for."""
    first, last = s.stands_for
    args: dict[str, Any] = {"copies": s.copies, "period_us": _us(s.period_s), "copy_of": f"{s.kind} {s.copied}",
                            "stands_for": f"{_PLURAL[s.kind]} {first}-{last}"}
    if s.kind == "block":
        args["direction"] = s.direction
        args["micro_batch"] = s.micro_batch
    if s.step is not None:
        args["step"] = s.step
    return args


def _gap(drawn: Sequence[tuple[float, float]], lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] narrowed until no drawn span sticks out of it (spans inside stay inside: they nest)."""
    near = [(a, b) for a, b in drawn if a < hi and b > lo]  # only these can narrow it
    changed = True
    while changed and lo < hi:
        changed = False
        for a, b in near:
            if a < lo < b:
                lo, changed = b, True
            if a < hi < b:
                hi, changed = a, True
    return lo, hi


def wafer_process_name(result: Result) -> str:
    """'wafer (x192 identical)', or the busiest wafer when shards are uneven."""
    n = cluster_int(result, "wafers", result.scenario.hardware.wafers)
    hi, lo = result.cluster.get("samples_per_wafer_max"), result.cluster.get("samples_per_wafer_min")
    if n == 1:
        return "wafer"
    if hi == lo:
        return f"wafer (x{n} identical)"
    return f"wafer (busiest of {n})"


def _recorded(cluster: Cluster | None) -> Cluster | None:
    """The cluster if it kept its spans, else None (the trace is then drawn from the Result's records alone)."""
    if cluster is not None and getattr(cluster.memoryx, "stream_spans", None) is not None:
        return cluster
    return None


@dataclass
class _SpanTracks:
    """Draws a recorded cluster's spans: the parts' tracks (:meth:`process`), the wafer's stalls, an unfolded run's
    wafers and edges, and the input workers.

    The spans are placed on the Result's unfolded axis, and each track marks the stretches that folded
    copies fill (:meth:`folded`).
    """

    tb: _Builder
    cluster: Cluster
    edges: np.ndarray  # counter bucket edges
    merge: bool  # merge consecutive chunk spans of one pass

    def __post_init__(self) -> None:
        self.placed = UnfoldedSpans(self.cluster)
        self._worlds: dict[int, UnfoldedSpans] = {}

    def label(self, pass_index: int) -> tuple[str, str, dict[str, Any]]:
        """Span name, category (the phase) and base args of a pass."""
        p = self.cluster.program[pass_index]
        op = self.cluster.plan.ops[p.op]
        step = self.placed.step_of_pass(pass_index)
        return f"{op.name} {p.phase} s{step}", p.phase, {"step": step, "micro_batch": p.micro_batch}

    def in_world(self, world: int) -> UnfoldedSpans:
        """The placement of a drifting world's parts (``world`` 0: the rest of the run's, :attr:`placed`)."""
        drift = self.cluster.folding.drift
        if not world or drift is None or world not in drift.world_layers:
            return self.placed
        if world not in self._worlds:
            self._worlds[world] = self.placed.in_world(drift.world_layers[world])
        return self._worlds[world]

    def folded(self, pid: int, tid: int, drawn: Sequence[tuple[Any, ...]], first: int,
               placed: UnfoldedSpans | None = None) -> None:
        """One span per stretch of folded copies on a track, narrowed so that the track's spans nest in it.

        They go before the track's spans (``first``: the position of its first), so that a viewer reading
        spans that start together in file order opens the mark first and nests the span in it.
        """
        at = first
        spans = [(d[0], d[1]) for d in drawn]
        for s in (placed or self.placed).stretches:
            lo, hi = _gap(spans, s.start_s, s.end_s)
            if hi > lo:
                self.tb.span(pid, tid, s.name, "folded", lo, hi, _stretch_args(s), at=at)
                at += 1

    def link_spans(self, pid: int, thread: str, spans: Iterable[tuple[float, float, int, float]] | None,
                   world: int = 0) -> None:
        """One thread of chunk spans, merged per pass unless ``merge`` is off (a drifting world's placed on its
        own block copies)."""
        tid = self.tb.thread(pid, thread)
        first = len(self.tb.events)
        placed = self.in_world(world)
        merged = _merge(placed.pass_spans(spans or []), self.merge)
        for a, b, p, nbytes, chunks, busy in merged:
            name, phase, args = self.label(p)
            args["bytes"] = _num(nbytes)
            if chunks > 1:
                args["chunks"] = chunks
                if busy < 0.999 * (b - a):  # the link idled between the chunks of this pass
                    args["busy_us"] = _us(busy)
            self.tb.span(pid, tid, name, phase, a, b, args)
        self.folded(pid, tid, merged, first, placed)

    def busy(self, spans: Sequence[tuple[float, ...]], moved: bool = False) -> np.ndarray:
        """Busy fraction per bucket of recorded spans (non-overlapping, in order): simulated times, or with
        ``moved`` the wafer timeline's (its block copies in place)."""
        b = self.placed.cumulative(_busy_until(spans), self.edges, moved)
        return np.clip(_per_bucket(b, self.edges), 0.0, 1.0)

    def process(self, name: str, tracks: Sequence[Track]) -> None:
        """One process of the parts' tracks: each track's spans, then each track's counters (its busy fraction
        and, where it queued, its mean buffer occupancy per bucket)."""
        pid = self.tb.process(name)
        for track in tracks:
            self.link_spans(pid, track.thread, track.spans)
        for track in tracks:
            if track.counter is None:
                continue
            self.tb.counter(pid, f"{track.counter} busy", self.edges[:-1], self.busy(track.spans), "fraction")
            if track.occupancy:
                level = self.placed.cumulative(_level_integral(track.occupancy), self.edges)
                self.tb.counter(pid, f"{track.counter} buffer", self.edges[:-1], _per_bucket(level, self.edges),
                                "chunks")

    def wafer_stalls(self, pid: int, per_chunk: bool) -> None:
        """The wafer's waits by cause, and its compute busy fraction."""
        timeline = self.cluster.wafer.timeline
        if not timeline:
            return
        tid = self.tb.thread(pid, "stalls")
        first = len(self.tb.events)
        stalls = _stalls(self.placed.timeline(timeline), per_chunk)
        for a, b, cause, p, waits, stalled in stalls:
            args: dict[str, Any] = {"kernel": self.label(p)[0]} if p >= 0 else {}
            if waits > 1:
                args["waits"] = waits
                args["stalled_us"] = _us(stalled)
            self.tb.span(pid, tid, f"{cause} stall", cause, a, b, args)
        self.folded(pid, tid, stalls, first)
        compute = [(a, b) for a, b, cause, _ in timeline if cause == "compute"]
        self.tb.counter(pid, "wafer compute busy", self.edges[:-1], self.busy(compute, moved=True), "fraction")

    def unfolded(self) -> None:
        """An unfolded run: one thread per wafer (its compute and waits, per pass) and one per tree link."""
        from wss.model.sim.unfolded import UnfoldedCluster

        cluster = self.cluster
        if not isinstance(cluster, UnfoldedCluster):
            return
        drift = cluster.folding.drift
        pid = self.tb.process(f"wafers ({len(cluster.wafers)}, each apart)")
        for wafer in cluster.wafers:
            tid = self.tb.thread(pid, wafer.name)
            first = len(self.tb.events)
            joined = _joined(self.placed.timeline(wafer.timeline))
            for a, b, cause, p in joined:
                name = self.label(p)[0] if cause == "compute" and p >= 0 else f"{cause} stall"
                self.tb.span(pid, tid, name, cause, a, b, {"pass": p} if p >= 0 else {})
            world = drift.members.get(id(wafer), 0) if drift is not None else 0
            self.folded(pid, tid, joined, first, self.in_world(world))
        pid = self.tb.process(f"SwarmX edges ({len(cluster.tree.links())} links)")
        for link in cluster.tree.links():
            self.link_spans(pid, link.name, link.spans, link.world)

    def inputs(self) -> None:
        """The input workers' transfers, one span per micro-batch."""
        spans = self.cluster.inputs.spans
        if not spans:
            return
        pid = self.tb.process("input workers")
        tid = self.tb.thread(pid, "input")
        first = len(self.tb.events)
        placed = self.placed.micro_batch_spans(spans)
        for a, b, step, mb in placed:
            self.tb.span(pid, tid, f"micro-batch {mb} s{step}", "input", a, b, {"step": step, "micro_batch": mb})
        self.folded(pid, tid, placed, first)


def _joined(timeline: Sequence[tuple[float, float, str, int]]) -> list[tuple[float, float, str, int]]:
    """A wafer's timeline with back-to-back spans of one cause in one pass joined into one."""
    out: list[tuple[float, float, str, int]] = []
    for a, b, cause, p in timeline:
        if out and out[-1][2] == cause and out[-1][3] == p and out[-1][1] == a:
            out[-1] = (out[-1][0], b, cause, p)
        else:
            out.append((a, b, cause, p))
    return out


def _by_process(tracks: Sequence[Track]) -> dict[str, list[Track]]:
    """The parts' tracks by trace process, the processes in the order they first appear."""
    out: dict[str, list[Track]] = {}
    for track in tracks:
        out.setdefault(track.process, []).append(track)
    return out


def _optimizer_updates(tb: _Builder, result: Result) -> tuple[int, int, list[tuple[float, float]], int]:
    """MemoryX's optimizer: one span per update or accumulation, from the Result's records.

    Returns the process and thread ids, the spans drawn and the position of the first."""
    pid = tb.process("optimizer")
    tid = tb.thread(pid, "update")
    first = len(tb.events)
    drawn = []
    for r in result.records:
        if r.where != "memoryx":
            continue
        drawn.append((r.start_s, r.end_s))
        tb.span(pid, tid, f"{r.name} {r.phase} s{r.step}", r.phase, r.start_s, r.end_s,
                {"step": r.step, "micro_batch": r.micro_batch, "bytes_read": _num(r.bytes_in),
                 "bytes_written": _num(r.bytes_out), "bound_by": r.bound_by, "queued_us": _us(r.exposed_stall_s)})
    return pid, tid, drawn, first


def _wafer_passes(tb: _Builder, result: Result) -> tuple[int, int, list[tuple[float, float]], int]:
    """The wafer's process and its compute thread, one span per pass; returns the process and thread ids, the
    spans drawn and the position of the first."""
    pid = tb.process(wafer_process_name(result))
    tid = tb.thread(pid, "compute")
    first = len(tb.events)
    drawn = []
    for r in result.records:
        if r.where != "wafer":
            continue
        drawn.append((r.start_s, r.end_s))
        args: dict[str, Any] = {"step": r.step, "micro_batch": r.micro_batch, "bound_by": r.bound_by}
        for key, value in (("bytes_in", r.bytes_in), ("bytes_out", r.bytes_out), ("cycles", r.cycles)):
            if value:
                args[key] = _num(value)
        if r.exposed_stall_s > 0:
            args["exposed_stall_us"] = _us(r.exposed_stall_s)
        tb.span(pid, tid, f"{r.name} {r.phase} s{r.step}", r.phase, r.start_s, r.end_s, args)
    return pid, tid, drawn, first


def _losses(tb: _Builder, result: Result) -> None:
    """The user node: an instant when each step's loss arrives (clipped to the end of the run)."""
    pid = tb.process("user node")
    tid = tb.thread(pid, "loss")
    for st in result.steps:
        if st.loss_at_user_s is not None:
            args: dict[str, Any] = {"step": st.step}
            if st.loss is not None:
                args["loss"] = st.loss
            tb.instant(pid, tid, f"loss s{st.step}", "loss", min(st.loss_at_user_s, result.total_time_s), args)


def build_trace(
    result: Result, cluster: Cluster | None = None, *, merge: bool = True, stalls: str = "pass", buckets: int = 500
) -> dict[str, Any]:
    """Build a Chrome trace-event document of one run.

    Parameters
    ----------
    result
        The run's Result.
    cluster
        The finished :class:`~wss.model.sim.cluster.Cluster` from the same
        ``simulate_detailed(scenario, record=True)`` call as ``result``
        (its spans are placed on the Result's axis, folded copies marked).
        Without it, or without recorded spans, only the Result's records
        are drawn.
    merge
        Merge consecutive chunk spans of the same pass into one span.
    stalls
        ``"pass"``: one span per pass and cause, from its first wait to its
        last, with the number of waits and the time actually stalled in
        ``args``; ``"chunk"``: every wait (larger files).
    buckets
        Time buckets of the counter tracks (busy fraction, buffer occupancy).
    """
    if stalls not in ("pass", "chunk"):
        raise ValueError(f"stalls must be 'pass' or 'chunk', got {stalls!r}")
    tb = _Builder()
    recorded = _recorded(cluster)
    # Processes are numbered in the order they are first drawn: the parts' tracks (``Cluster.tracks()``: MemoryX,
    # the optimizer's updates from the Result's records right after it, the SwarmX levels, any other part's), the
    # wafer, the input workers, the user node.
    tracks = None if recorded is None else _SpanTracks(tb, recorded, _bucket_edges(result.total_time_s, buckets), merge)
    drew_optimizer = False
    if tracks is not None:
        for process, group in _by_process(tracks.cluster.tracks()).items():
            tracks.process(process, group)
            if not drew_optimizer and process == "MemoryX":  # the optimizer coprocessor is MemoryX's
                tracks.folded(*_optimizer_updates(tb, result))
                drew_optimizer = True
    if not drew_optimizer:
        optimizer = _optimizer_updates(tb, result)
        if tracks is not None:
            tracks.folded(*optimizer)
    wafer = _wafer_passes(tb, result)
    if tracks is not None:
        tracks.folded(*wafer)
        tracks.wafer_stalls(wafer[0], per_chunk=stalls == "chunk")
        tracks.unfolded()
        tracks.inputs()
    _losses(tb, result)
    return {
        "traceEvents": tb.events,
        "displayTimeUnit": "ms",
        "otherData": {
            "scenario": result.scenario.name,
            "wss_version": result.wss_version,
            "step_time_s": result.step_time_s,
            "total_time_s": result.total_time_s,
            "source": "cluster spans" if tracks is not None else "result records",
        },
    }


def trace_json(trace: dict[str, Any]) -> str:
    """Compact JSON text of a trace document."""
    return json.dumps(trace, separators=(",", ":"), allow_nan=False)


def write_trace(path: str | Path, result: Result, cluster: Cluster | None = None, **kwargs: Any) -> Path:
    """Build the trace and write it atomically (temporary file, then rename); return the path.

    A path ending in ``.gz`` is gzip-compressed (Perfetto opens ``.json.gz``
    directly; a GPT-3 175B step shrinks about ten-fold).  Keyword arguments
    go to :func:`build_trace`.
    """
    path = Path(path)
    data = trace_json(build_trace(result, cluster, **kwargs)).encode("utf-8")
    if path.suffix == ".gz":
        data = gzip.compress(data, mtime=0)
    return atomic_write_bytes(path, data)
