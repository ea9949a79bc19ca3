"""The verdict names the part built to bound each scenario, and measures the fix by re-simulating."""

from __future__ import annotations

import pytest

import wss
from wss.studies.verdict import COST_FIELDS, PARTS, Verdict, candidate_parts, verdict

BASE = {
    "name": "dense-4x2048",
    "workload": {"model": {"name": "m", "input": "features", "layers": [
        {"kind": "dense", "in_features": 2048, "out_features": 2048, "repeat": 4, "activation": "relu"}]}},
    "hardware": {"preset": "cs2-cluster", "wafers": 4, "runtime": {"preset": "ideal"}},  # the parts, no fixed costs
    "training": {"global_batch": 64, "steps": 2, "optimizer": "adamw"},
}

# Scenarios built to be bound by one part: (overrides, expected bound_by, expected best change).
CASES = {
    "wafer compute": ({"hardware.wafer.clock_Hz": 1e6}, "wafer_compute", ["wafer_compute"]),
    "wafer I/O": ({"hardware.wafer.io_bandwidth_Bps": 1e8}, "wafer_io", ["wafer_io"]),
    "SwarmX": ({"hardware.swarmx.link_bandwidth_Bps": 1e8, "hardware.wafers": 64, "training.global_batch": 256},
               "swarmx", ["swarmx"]),
    "MemoryX network": ({"hardware.memoryx.network_bandwidth_Bps": 1e7}, "memoryx_network", ["memoryx_network"]),
    "MemoryX DRAM": ({"hardware.memoryx.dram_bandwidth_Bps": 1e7}, "memoryx_dram", ["memoryx_dram"]),
    "optimizer": ({"hardware.memoryx.optimizer_flops": 1e6}, "optimizer", ["optimizer"]),
    "MemoryX flash": ({"hardware.memoryx.preset": "memoryx-2.4pb", "hardware.memoryx.dram_capacity_bytes": 2e6,
                       "hardware.memoryx.flash_read_bandwidth_Bps": 1e6,
                       "hardware.memoryx.flash_write_bandwidth_Bps": 1e6}, "memoryx_flash", ["memoryx_flash"]),
    "input workers": ({"hardware.inputs.bandwidth_Bps": 1e5}, "inputs", ["inputs"]),
    # CS-2 defaults: SwarmX links and wafer I/O both 150 GB/s, so only relaxing both helps.
    # At the calibrated kernel efficiency the wafer computes longer than the stream: ideal kernels keep the regime.
    "co-bottleneck": ({"hardware.wafer.kernel_efficiency": 1.0}, "swarmx+wafer_io", ["swarmx", "wafer_io"]),
    # Faults: the part named is the one the run had, not the nominal one.
    "slow MemoryX shard": ({"faults.shards": [{"shard": 0, "network_factor": 0.001}]},
                           "memoryx_network", ["memoryx_network"]),
    # A leaf edge is the wafer's I/O too: at half rate both are slow, and only relaxing both helps.
    "degraded leaf edge": ({"faults.links": [{"edge": "swarmx.l1.0", "bandwidth_factor": 0.5}]},
                           "swarmx+wafer_io", ["swarmx", "wafer_io"]),
    # An edge above the leaves is SwarmX alone (64 wafers: two levels).
    "degraded inner edge": ({"faults.links": [{"edge": "swarmx.l1.0", "bandwidth_factor": 0.25}], "hardware.wafers": 64,
                             "training.global_batch": 256}, "swarmx", ["swarmx"]),
}


def _run(overrides):
    return wss.simulate(wss.load_scenario(BASE, overrides=overrides or None))


@pytest.mark.parametrize("case", list(CASES))
def test_verdict_names_the_bounding_part(case):
    overrides, bound, best = CASES[case]
    result = _run(overrides)
    v = verdict(result)
    assert isinstance(v, Verdict)
    assert v.bound_by == bound, v.format()
    assert v.best is not None and v.best.parts == best, v.format()
    if case == "degraded inner edge":
        # 64 wafers: the stream paces most of the step, not all of it (the compute and the fills stay).
        assert 0.4 < v.best.gain < 0.5
    elif case not in ("co-bottleneck", "degraded leaf edge"):
        # One part bounds it all: doubling it halves the step, but for fills and the parts it does not
        # bound (measured within 0.06% of a half).
        assert v.best.gain == pytest.approx(0.5, abs=0.05)
    assert v.share > 0.4
    assert v.best.step_time_s == pytest.approx(result.step_time_s * (1 - v.best.gain), rel=1e-12)
    gains = [c.gain for c in v.candidates]
    assert gains == sorted(gains, reverse=True)
    text = v.format()
    assert text.startswith(f"verdict: bound by {v.bound_label}")
    assert "would cut the step by" in v.best_change


def test_the_gain_is_measured_by_resimulating():
    result = _run({"hardware.wafer.clock_Hz": 1e6})
    v = verdict(result, parts=["wafer_compute"])
    again = wss.simulate(wss.load_scenario(BASE, overrides={"hardware.wafer.clock_Hz": 2e6}))
    assert v.candidates[0].step_time_s == again.step_time_s
    assert v.candidates[0].overrides == {"hardware.wafer.clock_Hz": 2e6}


def test_only_parts_that_matter_are_resimulated():
    result = _run({"hardware.wafer.clock_Hz": 1e6})
    calls = []

    def counting(scenario):
        calls.append(scenario)
        return wss.simulate(scenario)

    progress = []
    v = verdict(result, simulate=counting, progress=progress.append)
    assert [c.parts for c in v.candidates] == [["wafer_compute"]]
    assert len(calls) == 1 and progress == [1.0]
    # Nothing lives in flash: flash is never a candidate, even for a stream-bound run.
    for overrides in ({}, {"hardware.wafer.io_bandwidth_Bps": 1e8}):
        groups = candidate_parts(_run(overrides))
        assert all("memoryx_flash" not in g for g in groups)


def test_bubble_bound_run():
    # One small kernel, a slow optimizer and no queue: the next step waits for the update (the bubble).
    scenario = {**BASE, "workload": {"model": {"name": "m", "input": "features", "layers": [
        {"kind": "dense", "in_features": 256, "out_features": 256, "activation": "relu"}]}}}
    result = wss.simulate(wss.load_scenario(scenario, overrides={"hardware.memoryx.optimizer_flops": 1e4}))
    v = verdict(result)
    assert v.category == "bubble" and v.bound_by == "bubble"
    assert v.bound_label == "iteration-boundary bubble"
    assert v.best is not None and v.best.parts == ["optimizer"]


def test_no_gain_sentence_and_bad_part():
    result = _run({"hardware.wafer.clock_Hz": 1e6})
    v = verdict(result, parts=["inputs"])
    assert v.best is None
    assert v.best_change.startswith("no single doubling tried")
    with pytest.raises(ValueError, match="unknown part"):
        verdict(result, parts=["flux_capacitor"])


def test_parts_table_fields_exist():
    # On the shipped cluster preset (the base runs the ideal runtime, whose fixed costs are all 0).
    scenario = wss.load_scenario(BASE, {"hardware.runtime.preset": "cerebras-ws"})
    for _label, _change, fields in PARTS.values():
        for dotted in fields:
            node = scenario
            for part in dotted.split("."):
                node = getattr(node, part)
            # A rate is positive; a runtime cost may be 0 (not identified), but it is a number.
            assert isinstance(node, float) and (node > 0 or dotted in COST_FIELDS), dotted
