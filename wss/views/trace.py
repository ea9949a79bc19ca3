"""Chrome trace-event JSON of a run, for Perfetto (ui.perfetto.dev) and chrome://tracing.

One process per part of the machine, one thread per activity::

    MemoryX            weight stream, prefetch (flash -> DRAM), gradient stream (network in)
    optimizer          update (updates and gradient accumulations)
    SwarmX level l     weights down, gradients up
    wafer (xN ...)     compute (one span per pass), stalls (every exposed wait, by cause)
    input workers      input
    user node          loss (an instant when each step's loss arrives)

Spans are complete events (``ph: "X"``, ``ts``/``dur`` in microseconds) named
``"<kernel> <phase> s<step>"`` with bytes, cycles and the micro-batch in
``args``.  Chunk spans of one pass that follow each other on a link (or in
MemoryX) are merged into one span whose ``args`` keep the chunk count and
the busy time, so a GPT-3 175B step stays a few MB.  Counter events
(``ph: "C"``) give each link's busy fraction and mean buffer occupancy per
time bucket, and the wafer's compute busy fraction.

Without a cluster (only a saved Result), the trace is drawn from the
Result's records: wafer passes, MemoryX updates and loss arrivals.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from wss.files import atomic_write_bytes
from wss.model.results import Result

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
             args: dict[str, Any]) -> None:
        ts = _us(start_s)
        dur = max(round(_us(end_s) - ts, _DECIMALS), 0.0)
        self.events.append({"ph": "X", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": ts, "dur": dur,
                            "args": args})

    def instant(self, pid: int, tid: int, name: str, cat: str, t_s: float, args: dict[str, Any]) -> None:
        self.events.append({"ph": "i", "s": "t", "name": name, "cat": cat, "pid": pid, "tid": tid, "ts": _us(t_s),
                            "args": args})

    def counter(self, pid: int, name: str, times: Sequence[float], values: Sequence[float], key: str) -> None:
        """One counter series, emitting a sample only where the (rounded) value changes."""
        last = None
        for t, v in zip(times, values):
            v = round(float(v), 4)
            if v != last:
                self.events.append({"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": _us(t), "args": {key: v}})
                last = v


def _merge(spans: Iterable[tuple[float, float, int, float]], merge: bool) -> list[tuple]:
    """(start, end, pass, bytes) -> (start, end, pass, bytes, chunks, busy_s), consecutive same-pass spans merged."""
    out: list[list] = []
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


def _stalls(timeline, per_chunk: bool) -> list[tuple[float, float, str, int, int, float]]:
    """Wafer waits as (start, end, cause, pass, waits, stalled seconds), merged per pass and cause unless per_chunk."""
    out: list[list] = []
    open_: dict[tuple[int, str], list] = {}
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


def _busy_fraction(spans: Sequence[tuple[float, float]], edges: np.ndarray) -> np.ndarray:
    """Busy fraction of each bucket for non-overlapping spans sorted by start."""
    if len(spans) == 0:
        return np.zeros(len(edges) - 1)
    arr = np.asarray(spans, dtype=float)[:, :2]
    starts, ends = arr[:, 0], arr[:, 1]
    durs = ends - starts
    cum = np.concatenate(([0.0], np.cumsum(durs)))

    def busy_until(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(starts, t, side="right") - 1  # last span starting at or before t
        inside = np.where(k >= 0, np.clip(t - starts[np.maximum(k, 0)], 0.0, durs[np.maximum(k, 0)]), 0.0)
        return np.where(k >= 0, cum[np.maximum(k, 0)] + inside, 0.0)

    width = np.diff(edges)
    b = busy_until(edges)
    return np.clip(np.diff(b) / np.where(width > 0, width, 1.0), 0.0, 1.0)


def _mean_level(samples: Sequence[tuple[float, int]], edges: np.ndarray) -> np.ndarray:
    """Time-weighted mean of a step function sampled as (time, value), per bucket."""
    if len(samples) == 0:
        return np.zeros(len(edges) - 1)
    arr = np.asarray(samples, dtype=float)
    times, values = arr[:, 0], arr[:, 1]
    seg = np.diff(np.append(times, max(times[-1], edges[-1])))
    cum = np.concatenate(([0.0], np.cumsum(values * seg)))

    def integral(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(times, t, side="right") - 1
        kk = np.maximum(k, 0)
        return np.where(k >= 0, cum[kk] + values[kk] * (t - times[kk]), 0.0)

    width = np.diff(edges)
    return np.diff(integral(edges)) / np.where(width > 0, width, 1.0)


def wafer_process_name(result: Result) -> str:
    """'wafer (x192 identical)', or the busiest wafer when shards are uneven."""
    n = int(result.cluster.get("wafers", result.scenario.hardware.wafers))
    hi, lo = result.cluster.get("samples_per_wafer_max"), result.cluster.get("samples_per_wafer_min")
    if n == 1:
        return "wafer"
    if hi == lo:
        return f"wafer (x{n} identical)"
    return f"wafer (busiest of {n})"


def build_trace(
    result: Result, cluster: Any | None = None, *, merge: bool = True, stalls: str = "pass", buckets: int = 500
) -> dict:
    """Build a Chrome trace-event document of one run.

    Parameters
    ----------
    result
        The run's Result.
    cluster
        The finished :class:`~wss.model.cluster.Cluster` from the same
        ``simulate_detailed(scenario, record=True)`` call as ``result``
        (recording simulates every micro-batch, so the two share one time
        axis).  Without it, or without recorded spans, only the Result's
        records are drawn.
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
    total = result.total_time_s
    edges = _bucket_edges(total, buckets)
    recorded = cluster is not None and getattr(cluster.memoryx, "stream_spans", None) is not None
    if not recorded:
        # A run without recording may fold identical micro-batches: its cluster holds fewer passes than
        # the Result, on another time axis.  Draw from the Result's records alone.
        cluster = None

    def label(pass_index: int) -> tuple[str, str, dict[str, Any]]:
        p = cluster.program[pass_index]
        op = cluster.plan.ops[p.op]
        return f"{op.name} {p.phase} s{p.step}", p.phase, {"step": p.step, "micro_batch": p.micro_batch}

    def link_spans(pid: int, thread: str, spans) -> None:
        tid = tb.thread(pid, thread)
        for a, b, p, nbytes, chunks, busy in _merge(spans, merge):
            name, phase, args = label(p)
            args["bytes"] = _num(nbytes)
            if chunks > 1:
                args["chunks"] = chunks
                if busy < 0.999 * (b - a):  # the link idled between the chunks of this pass
                    args["busy_us"] = _us(busy)
            tb.span(pid, tid, name, phase, a, b, args)

    def link_counters(pid: int, name: str, link) -> None:
        tb.counter(pid, f"{name} busy", edges[:-1], _busy_fraction(link.spans, edges), "fraction")
        if link.occupancy:
            tb.counter(pid, f"{name} buffer", edges[:-1], _mean_level(link.occupancy, edges), "chunks")

    # MemoryX and its optimizer.
    if recorded:
        mx = tb.process("MemoryX")
        link_spans(mx, "weight stream", cluster.memoryx.stream_spans)
        if cluster.memoryx.prefetch_spans:
            link_spans(mx, "prefetch", cluster.memoryx.prefetch_spans)
        link_spans(mx, "gradient stream", cluster.memoryx_in.spans)
        tb.counter(mx, "memoryx.stream busy", edges[:-1],
                   _busy_fraction(cluster.memoryx.stream_spans, edges), "fraction")
        link_counters(mx, cluster.memoryx_in.name, cluster.memoryx_in)
    opt = tb.process("optimizer")
    upd = tb.thread(opt, "update")
    for r in result.records:
        if r.where != "memoryx":
            continue
        tb.span(opt, upd, f"{r.name} {r.phase} s{r.step}", r.phase, r.start_s, r.end_s,
                {"step": r.step, "micro_batch": r.micro_batch, "bytes_read": _num(r.bytes_in),
                 "bytes_written": _num(r.bytes_out), "bound_by": r.bound_by, "queued_us": _us(r.exposed_stall_s)})

    # SwarmX, one process per level (root first).
    if recorded:
        sx = cluster.swarmx
        nodes = list(result.cluster.get("nodes_per_level", sx.nodes_per_level))
        ups = {link.name.rsplit(".", 1)[1]: link for link in sx.up}
        for i, down in enumerate(sx.down):
            level = i + 1
            n_nodes = nodes[i] if i < len(nodes) else 1
            pid = tb.process(f"SwarmX level {level} ({n_nodes} node{'s' if n_nodes != 1 else ''})")
            link_spans(pid, "weights down", down.spans)
            up = ups.get(f"l{level}")
            if up is not None:
                link_spans(pid, "gradients up", up.spans)
            link_counters(pid, down.name, down)
            if up is not None:
                link_counters(pid, up.name, up)

    # The wafer.
    wpid = tb.process(wafer_process_name(result))
    comp = tb.thread(wpid, "compute")
    for r in result.records:
        if r.where != "wafer":
            continue
        args = {"step": r.step, "micro_batch": r.micro_batch, "bound_by": r.bound_by}
        for key, value in (("bytes_in", r.bytes_in), ("bytes_out", r.bytes_out), ("cycles", r.cycles)):
            if value:
                args[key] = _num(value)
        if r.exposed_stall_s > 0:
            args["exposed_stall_us"] = _us(r.exposed_stall_s)
        tb.span(wpid, comp, f"{r.name} {r.phase} s{r.step}", r.phase, r.start_s, r.end_s, args)
    if cluster is not None and cluster.wafer.timeline:
        stid = tb.thread(wpid, "stalls")
        for a, b, cause, p, waits, stalled in _stalls(cluster.wafer.timeline, per_chunk=stalls == "chunk"):
            args = {"kernel": label(p)[0]} if p >= 0 else {}
            if waits > 1:
                args["waits"] = waits
                args["stalled_us"] = _us(stalled)
            tb.span(wpid, stid, f"{cause} stall", cause, a, b, args)
        compute_spans = [(a, b) for a, b, cause, _ in cluster.wafer.timeline if cause == "compute"]
        tb.counter(wpid, "wafer compute busy", edges[:-1], _busy_fraction(compute_spans, edges), "fraction")

    # Input workers.
    if cluster is not None and cluster.inputs.spans:
        ipid = tb.process("input workers")
        itid = tb.thread(ipid, "input")
        for a, b, step, mb in cluster.inputs.spans:
            tb.span(ipid, itid, f"micro-batch {mb} s{step}", "input", a, b, {"step": step, "micro_batch": mb})

    # User node: losses arriving.
    upid = tb.process("user node")
    utid = tb.thread(upid, "loss")
    for st in result.steps:
        if st.loss_at_user_s is not None:
            args: dict[str, Any] = {"step": st.step}
            if st.loss is not None:
                args["loss"] = st.loss
            tb.instant(upid, utid, f"loss s{st.step}", "loss", min(st.loss_at_user_s, total), args)

    return {
        "traceEvents": tb.events,
        "displayTimeUnit": "ms",
        "otherData": {
            "scenario": result.scenario.name,
            "wss_version": result.wss_version,
            "step_time_s": result.step_time_s,
            "total_time_s": total,
            "source": "cluster spans" if recorded else "result records",
        },
    }


def trace_json(trace: dict) -> str:
    """Compact JSON text of a trace document."""
    return json.dumps(trace, separators=(",", ":"), allow_nan=False)


def write_trace(path: str | Path, result: Result, cluster: Any | None = None, **kwargs: Any) -> Path:
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
