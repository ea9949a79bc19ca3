"""Flash-resident kernels: prefetch through DRAM staging, flash-bound closed form, and causality across steps."""

from __future__ import annotations

import pytest
from core_helpers import dense_model, ideal_hardware, scenario_dict

import wss
from wss.model.simulate import simulate_detailed

MiB = 2**20
FLASH_READ, FLASH_WRITE = 1e9, 5e8


def flash_scenario(steps: int, chunk_bytes: float = 1 * MiB) -> dict:
    """One 2048 x 2048 SGD kernel (32 MiB of state) that cannot live in a 10 MB DRAM: it goes to flash."""
    return scenario_dict(
        model=dense_model(2048, 2048),
        steps=steps,
        simulation={"chunk_bytes": chunk_bytes},
        hardware=ideal_hardware(
            memoryx={
                "shards": 1,
                "dram_capacity_bytes": 1e7,
                "flash_capacity_bytes": 1e9,
                "flash_read_bandwidth_Bps": FLASH_READ,
                "flash_write_bandwidth_Bps": FLASH_WRITE,
            }
        ),
    )


def flash_step_seconds(plan) -> float:
    """Both passes read the fp32 weights from flash; then SGD reads and writes them over flash."""
    (k,) = plan.kernels
    return 2 * k.read_bytes / FLASH_READ + k.nnz * 4 / FLASH_READ + k.nnz * 4 / FLASH_WRITE


@pytest.mark.parametrize("chunk_bytes", [64 * MiB, 1 * MiB], ids=["one-chunk", "eight-chunks"])
def test_flash_bound_step_matches_the_closed_form(chunk_bytes):
    raw = flash_scenario(steps=1, chunk_bytes=chunk_bytes)
    plan = wss.plan(raw)
    (k,) = plan.kernels
    assert k.tier == "flash"
    assert plan.staging_bytes == pytest.approx(0.25e7, rel=1e-12)
    r = wss.simulate(raw)
    # The closed form leaves out the wafer's compute, of which the last chunk's cannot overlap a read:
    # the step lies between it and it plus all the compute (2.4e-5 s over for one chunk, 3e-6 s for eight).
    flash = flash_step_seconds(plan)
    assert flash * (1 - 1e-12) <= r.step_time_s <= flash + r.breakdown_s["compute"]
    assert r.memory.memoryx_flash_bytes == k.state_bytes
    assert r.breakdown_s["flash"] > 0
    # the flash read channel is busy for every read (weights twice, state once); writes go at their own rate
    reads = (2 * k.read_bytes + k.nnz * 4) / FLASH_READ
    assert r.utilisation["memoryx.flash"] == pytest.approx(reads / r.step_time_s, rel=1e-12)


def test_prefetch_of_the_next_step_waits_for_the_update():
    _, cluster = simulate_detailed(flash_scenario(steps=2))
    done = {(j.kernel, j.step): j.end for j in cluster.optimizer.jobs if j.kind == "update"}
    early = []
    for start, _end, pass_index, _ in cluster.memoryx.prefetch_spans:
        p = cluster.program[pass_index]
        first_of_a_later_step = p.step > 0 and p.phase == "forward" and p.micro_batch == 0
        if first_of_a_later_step and start < done[(p.kernel, p.step - 1)]:
            early.append((p.step, p.kernel, start, done[(p.kernel, p.step - 1)]))
    assert early == []


def test_every_step_of_a_flash_bound_run_takes_the_same_time():
    one = wss.simulate(flash_scenario(steps=1)).step_time_s
    r = wss.simulate(flash_scenario(steps=2))
    for step in r.steps:
        assert step.time_s == pytest.approx(one, rel=1e-12)
