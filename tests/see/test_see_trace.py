"""Trace-event JSON: structure valid for Perfetto / chrome://tracing, every span inside the run."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

import wss
from wss.model.simulate import simulate_detailed
from wss.views.trace import build_trace, trace_json, write_trace

ROOT = Path(__file__).resolve().parents[2]
FC_MNIST = ROOT / "scenarios" / "fc_mnist.yaml"
EPS_US = 1e-2  # times are rounded to the nanosecond

FLASH = {
    "name": "flash-resident",
    "workload": {"model": {"name": "m", "input": "features", "layers": [
        {"kind": "dense", "in_features": 2048, "out_features": 2048, "repeat": 4, "activation": "relu"}]}},
    "hardware": {"preset": "cs2-cluster", "wafers": 4,
                 "memoryx": {"preset": "memoryx-2.4pb", "dram_capacity_bytes": 2.0e6}},
    "training": {"global_batch": 64, "steps": 2},
}


@pytest.fixture(scope="module")
def fc_run():
    return simulate_detailed(FC_MNIST, record=True)


@pytest.fixture(scope="module")
def flash_run():
    return simulate_detailed(wss.load_scenario(FLASH), record=True)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _tid(doc: dict, pid: int, thread: str) -> int:
    return next(e["tid"] for e in doc["traceEvents"] if e["name"] == "thread_name" and e["pid"] == pid
                and e["args"]["name"] == thread)


def validate_trace(doc: dict, total_s: float) -> None:
    """Check a document against the trace-event format (the subset wss writes)."""
    assert isinstance(doc, dict)
    assert isinstance(doc["traceEvents"], list) and doc["traceEvents"]
    assert doc.get("displayTimeUnit") in ("ms", "ns")
    process_names: dict[int, str] = {}
    thread_names: set[tuple[int, int]] = set()
    used_pids: set[int] = set()
    used_threads: set[tuple[int, int]] = set()
    total_us = total_s * 1e6
    for ev in doc["traceEvents"]:
        ph = ev["ph"]
        assert isinstance(ev["name"], str) and ev["name"]
        for key in ("pid", "tid"):
            assert isinstance(ev[key], int) and not isinstance(ev[key], bool), ev
        if ph == "M":
            assert ev["name"] in {"process_name", "thread_name", "process_sort_index", "thread_sort_index"}
            args = ev["args"]
            if ev["name"] == "process_name":
                assert isinstance(args["name"], str)
                process_names[ev["pid"]] = args["name"]
            elif ev["name"] == "thread_name":
                assert isinstance(args["name"], str)
                thread_names.add((ev["pid"], ev["tid"]))
            else:
                assert isinstance(args["sort_index"], int)
            continue
        assert _number(ev["ts"]) and ev["ts"] >= 0, ev
        used_pids.add(ev["pid"])
        if ph == "X":
            assert _number(ev["dur"]) and ev["dur"] >= 0, ev
            assert isinstance(ev["cat"], str)
            assert isinstance(ev["args"], dict)
            assert ev["ts"] + ev["dur"] <= total_us + EPS_US, ev
            used_threads.add((ev["pid"], ev["tid"]))
        elif ph == "C":
            assert isinstance(ev["args"], dict) and ev["args"]
            assert all(_number(v) for v in ev["args"].values()), ev
            assert ev["ts"] <= total_us + EPS_US
        elif ph == "i":
            assert ev["s"] in ("g", "p", "t")
            assert ev["ts"] <= total_us + EPS_US
            used_threads.add((ev["pid"], ev["tid"]))
        else:
            raise AssertionError(f"unexpected phase {ph!r}")
    assert used_pids <= set(process_names), "every process has a process_name"
    assert used_threads <= thread_names, "every thread with spans has a thread_name"
    tids = [tid for _, tid in thread_names]
    assert len(tids) == len(set(tids)), "thread ids are unique across processes"


def test_trace_is_valid_and_inside_the_run(fc_run):
    result, cluster = fc_run
    doc = json.loads(trace_json(build_trace(result, cluster)))
    validate_trace(doc, result.total_time_s)
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert {"MemoryX", "optimizer", "SwarmX level 1 (1 node)", "wafer (x4 identical)", "input workers",
            "user node"} <= names
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert {"weight stream", "gradient stream", "weights down", "gradients up", "compute", "stalls", "update",
            "input", "loss"} <= threads
    phases = {e["ph"] for e in doc["traceEvents"]}
    assert phases == {"M", "X", "C", "i"}
    losses = [e for e in doc["traceEvents"] if e["ph"] == "i"]
    assert len(losses) == len(result.steps)


def test_spans_carry_kernel_step_phase_bytes_and_cycles(fc_run):
    result, cluster = fc_run
    doc = build_trace(result, cluster)
    wafer_pid = next(e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"
                     and e["args"]["name"].startswith("wafer"))
    compute = _tid(doc, wafer_pid, "compute")
    passes = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == wafer_pid and e["tid"] == compute]
    assert len(passes) == sum(1 for r in result.records if r.where == "wafer")
    fc1 = next(e for e in passes if e["name"] == "fc1 forward s0")
    assert fc1["cat"] == "forward"
    assert fc1["args"]["bytes_in"] > 0 and fc1["args"]["cycles"] > 0 and fc1["args"]["step"] == 0


def test_merging_keeps_bytes_and_shrinks_the_trace(fc_run):
    result, cluster = fc_run
    merged = build_trace(result, cluster)
    raw = build_trace(result, cluster, merge=False, stalls="chunk")
    assert len(merged["traceEvents"]) <= len(raw["traceEvents"])
    validate_trace(raw, result.total_time_s)

    def link_bytes(doc, process):
        pid = next(e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name"
                   and e["args"]["name"] == process)
        tid = _tid(doc, pid, "weights down")
        return sum(e["args"]["bytes"] for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == pid
                   and e["tid"] == tid)

    down = cluster.swarmx.down[0]
    assert link_bytes(merged, "SwarmX level 1 (1 node)") == pytest.approx(down.bytes, rel=1e-12)
    assert link_bytes(raw, "SwarmX level 1 (1 node)") == pytest.approx(down.bytes, rel=1e-12)


def test_counters_are_fractions(fc_run):
    result, cluster = fc_run
    doc = build_trace(result, cluster, buckets=50)
    busy = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"].endswith(" busy")]
    assert busy
    assert all(0.0 <= e["args"]["fraction"] <= 1.0 for e in busy)
    buffers = [e for e in doc["traceEvents"] if e["ph"] == "C" and e["name"].endswith(" buffer")]
    # A port buffer holds as many chunks as fit in its bytes (at least one).
    hw = result.scenario.hardware
    smallest = min(k.stream_bytes / k.n_chunks for k in cluster.plan.kernels)
    cap = max(1, max(hw.swarmx.port_buffer_bytes, hw.wafer.ingress_buffer_bytes) // math.ceil(smallest))
    assert buffers and all(0.0 <= e["args"]["chunks"] <= cap for e in buffers)


def test_flash_prefetch_track(flash_run):
    result, cluster = flash_run
    assert result.memory.memoryx_flash_bytes > 0
    doc = build_trace(result, cluster)
    validate_trace(doc, result.total_time_s)
    threads = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "thread_name"}
    assert "prefetch" in threads


def test_trace_from_records_only(fc_run):
    result, _ = fc_run
    doc = build_trace(result)
    validate_trace(doc, result.total_time_s)
    assert doc["otherData"]["source"] == "result records"
    names = {e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"}
    assert names == {"optimizer", "wafer (x4 identical)", "user node"}


def test_an_unrecorded_cluster_is_ignored():
    # Without recording the cluster kept no spans: the trace is drawn from the Result's records alone.
    result, cluster = simulate_detailed(FC_MNIST, record=False)
    assert build_trace(result, cluster) == build_trace(result)


def test_write_trace_atomic_plain_and_gzip(fc_run, tmp_path):
    result, cluster = fc_run
    plain = write_trace(tmp_path / "t" / "trace.json", result, cluster)
    packed = write_trace(tmp_path / "trace.json.gz", result, cluster)
    doc = json.loads(plain.read_text(encoding="utf-8"))
    validate_trace(doc, result.total_time_s)
    assert json.loads(gzip.decompress(packed.read_bytes())) == doc
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["t", "trace.json", "trace.json.gz"]  # no temp files left
