"""MemoryX places state by component (weights, gradient accumulators, moments) and shares one DRAM bandwidth.

The placement fills DRAM hottest first: the weights that every stream pass reads, then the gradient
accumulators, then the moments the update touches once per step.  The stream, the gradient intake,
flash staging and the optimizer all move their bytes through the same DRAM.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from core_helpers import dense_model, ideal_hardware, scenario_dict

import wss
from wss.model.machine.optimizer_costs import SCALAR_BYTES
from wss.model.simulate import simulate_detailed

REPO = Path(__file__).resolve().parents[2]
GPT3 = REPO / "scenarios" / "gpt3_175b.yaml"
SPILL = {"hardware.memoryx.preset": "memoryx-2.4pb", "hardware.memoryx.dram_capacity_bytes": 1e11}


def test_gpt3_spill_keeps_the_streamed_weights_in_dram_and_idle_accumulators_in_flash():
    """1.2 TB of DRAM holds GPT-3's 0.7 TB of fp32 weights: no stream waits for flash.  The plan runs one
    micro-batch per step, so the gradient accumulators are idle and go to flash first, then what of the
    moments does not fit."""
    # Unclipped, each update overlaps the backward pass that follows its gradient, and the flash-resident
    # moments' reads hide there; clipped, the updates run after the last gradient, where they show.
    unclipped = {"training.gradient_clipping": "none"}
    result = wss.simulate(wss.load_scenario(GPT3, {**SPILL, **unclipped}))
    assert result.memory.micro_batches == 1
    parts = result.memory.memoryx_components
    assert parts["weights"]["flash"] == 0 and result.memory.memoryx_staging_bytes == 0
    assert parts["gradient"]["dram"] == 0 and parts["moments"]["dram"] > 0 and parts["moments"]["flash"] > 0
    assert math.fsum(v for p in parts.values() for v in p.values()) == pytest.approx(
        result.memory.memoryx_state_bytes, rel=1e-12)
    assert result.breakdown_s["flash"] == 0  # every weight streams from DRAM
    assert result.utilisation["memoryx.flash"] > 0  # the updates read the flash-resident moments
    baseline = wss.simulate(wss.load_scenario(GPT3, unclipped))
    assert result.step_time_s == pytest.approx(baseline.step_time_s, rel=0.01)
    clipped, clipped_baseline = wss.simulate(wss.load_scenario(GPT3, SPILL)), wss.simulate(wss.load_scenario(GPT3))
    assert clipped.step_time_s > 1.1 * clipped_baseline.step_time_s


def test_placement_follows_the_micro_batches_the_plan_runs():
    """The same spill with 2 micro-batches per step: the accumulators are touched every micro-batch, so they
    take DRAM before the moments; with one micro-batch the moments do (and the analytic pricing follows)."""
    two = wss.plan(wss.load_scenario(GPT3, {**SPILL, "training.micro_batch": 4,
                                             "training.activation_checkpointing": "offload"}))
    one = wss.plan(wss.load_scenario(GPT3, {**SPILL, "training.micro_batch": 8,
                                             "training.activation_checkpointing": "offload"}))
    assert len(two.micro_batches) == 2 and len(one.micro_batches) == 1
    assert two.memoryx_components["gradient"]["flash"] < one.memoryx_components["gradient"]["flash"]
    assert two.memoryx_components["moments"]["flash"] > one.memoryx_components["moments"]["flash"]
    assert two.memoryx_state_bytes == one.memoryx_state_bytes


def _adam_with_moments_in_flash(flash_read: float, flash_write: float) -> dict:
    """Two 2048 x 2048 Adam kernels, two micro-batches of one sample: 32 MiB of weights and 32 MiB of gradient
    accumulators (touched every micro-batch) fit a 70 MB DRAM, the moments (64 MiB) go to flash."""
    return scenario_dict(
        model=dense_model(2048, 2048, 2048),
        optimizer="adam",
        global_batch=2,
        training={"micro_batch": 1},
        hardware=ideal_hardware(memoryx={
            "shards": 1, "dram_capacity_bytes": 7e7, "flash_capacity_bytes": 1e9,
            "flash_read_bandwidth_Bps": flash_read, "flash_write_bandwidth_Bps": flash_write,
        }),
    )


def test_an_update_with_flash_resident_moments_reads_and_writes_them_over_flash():
    flash_read, flash_write = 1e9, 5e8
    result, cluster = simulate_detailed(wss.load_scenario(_adam_with_moments_in_flash(flash_read, flash_write)))
    plan = cluster.plan
    assert len(plan.micro_batches) == 2
    assert [k.state_tiers.moments for k in plan.kernels] == ["flash", "flash"]
    assert [(k.state_tiers.weights, k.state_tiers.gradient) for k in plan.kernels] == [("dram", "dram")] * 2
    nnz = 2048 * 2048
    updates = [j for j in cluster.optimizer.jobs if j.kind == "update"]
    assert len(updates) == 2
    for job in updates:
        t = job.traffic
        assert t is not None
        # m and v: read 2 scalars over the channel, write 2; in DRAM the weight (read, write), the accumulated
        # gradient (read) and the incoming fp16 gradient
        assert (t.flash_read_bytes, t.flash_write_bytes) == (2 * nnz * SCALAR_BYTES, 2 * nnz * SCALAR_BYTES)
        assert t.dram_bytes == 3 * nnz * SCALAR_BYTES + nnz * 2
        # the DRAM side is fast (ideal hardware): the job lasts its flash read then write
        assert job.end - job.start == pytest.approx(
            t.flash_read_bytes / flash_read + t.flash_write_bytes / flash_write, rel=1e-9)
    assert all(j.traffic.flash_read_bytes == 0 for j in cluster.optimizer.jobs if j.kind == "accumulate")
    assert result.breakdown_s["flash"] == 0


def test_every_byte_through_dram_is_counted_once():
    """DRAM utilisation x bandwidth x run time = the stream's reads + the gradient intake + the optimizer's
    DRAM traffic (+ flash staging writes, none here)."""
    result, cluster = simulate_detailed(wss.load_scenario(scenario_dict(model="gpt3-125m", global_batch=4)))
    mx = cluster.memoryx
    expected = mx.bytes_read + mx.bytes_in + sum(j.traffic.dram_bytes for j in cluster.optimizer.jobs)
    assert mx.dram.bytes_moved == pytest.approx(expected, rel=1e-12)
    run_s = result.steps[-1].end_s
    assert result.utilisation["memoryx.dram"] * mx.dram.bandwidth_Bps * run_s == pytest.approx(expected, rel=1e-9)


def test_the_optimizer_slows_when_it_shares_dram_with_the_stream():
    """With a slow DRAM, updates that overlap the next kernels' stream take longer than they would alone,
    and no job ever takes less than its alone time."""
    raw = scenario_dict(model=dense_model(4096, 4096, 4096, 4096), optimizer="adamw", steps=2,
                        hardware=ideal_hardware(memoryx={"shards": 1, "dram_bandwidth_Bps": 2e10}))
    _, cluster = simulate_detailed(wss.load_scenario(raw))
    opt = cluster.optimizer
    stretched = 0
    for job in opt.jobs:
        alone = job.traffic.dram_bytes / opt.dram.bandwidth_Bps
        assert job.end - job.start >= alone * (1 - 1e-12)
        stretched += job.end - job.start > alone * (1 + 1e-6)
    assert stretched > 0
