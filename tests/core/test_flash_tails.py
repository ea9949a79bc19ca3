"""Slow flash reads (faults.flash) on a flash-bound stream, against the closed form.

One SGD kernel lives in flash and every other stage is all but free, so the step is the prefetch's
flash reads plus the optimizer's flash traffic.  With probability ``p`` a prefetch read takes ``f``
times as long: the reads' mean time scales by ``1 + p (f - 1)``, and exactly, each slow read adds
``(f - 1)`` times a read's time to the run.
"""

from __future__ import annotations

import json
import math

import pytest
from core_helpers import dense_model, ideal_hardware, scenario_dict

import wss
from wss.model.machine.flash_tails import flash_rng

KiB = 2**10
FLASH_READ, FLASH_WRITE = 1e9, 5e8
STEPS, CHUNKS = 40, 64


def _raw(**flash) -> dict:
    raw = scenario_dict(
        model=dense_model(2048, 2048),
        steps=STEPS,
        simulation={"chunk_bytes": 256 * KiB, "max_chunks_per_kernel": CHUNKS},
        hardware=ideal_hardware(memoryx={"shards": 1, "dram_capacity_bytes": 1e7, "flash_capacity_bytes": 1e9,
                                         "flash_read_bandwidth_Bps": FLASH_READ,
                                         "flash_write_bandwidth_Bps": FLASH_WRITE}),
    )
    if flash:
        raw["faults"] = {"flash": flash}
    return raw


@pytest.fixture(scope="module")
def runs():
    p, f = 0.01, 10.0
    return wss.plan(_raw()), wss.simulate(_raw()), wss.simulate(_raw(tail_probability=p, tail_factor=f)), p, f


def test_each_slow_read_adds_its_extra_time(runs):
    plan, base, r, p, f = runs
    (k,) = plan.kernels
    assert k.tier == "flash" and k.n_chunks >= 32 and base.breakdown_s["flash"] > 0
    assert r.wafer_folding.folded  # slow flash slows MemoryX, which every wafer shares
    reads = 2 * k.n_chunks * STEPS  # forward and backward, every step
    read_s = k.read_bytes / k.n_chunks / FLASH_READ
    rng = flash_rng(r.scenario.seed)
    slow = int((rng.random(reads) < p).sum())
    assert slow > 0
    assert r.total_time_s == pytest.approx(base.total_time_s + slow * (f - 1) * read_s, rel=1e-9)


def test_the_mean_read_time_scales_by_one_plus_p_f_minus_one(runs):
    plan, base, r, p, f = runs
    (k,) = plan.kernels
    reads = 2 * k.n_chunks * STEPS
    read_total = reads * k.read_bytes / k.n_chunks / FLASH_READ
    observed = 1 + (r.total_time_s - base.total_time_s) / read_total  # the reads' mean factor
    expected = 1 + p * (f - 1)
    err = (f - 1) * math.sqrt(p * (1 - p) / reads)  # the standard error of a mean of `reads` draws
    assert abs(observed - expected) < 4 * err, (observed, expected, err)


def test_flash_tails_are_deterministic_and_bad_ones_are_errors():
    raw = _raw(tail_probability=0.2, tail_factor=3)
    raw["training"]["steps"] = 2
    assert wss.simulate(raw).to_json() == wss.simulate(json.loads(json.dumps(raw))).to_json()
    for flash, words in (({"tail_probability": 1.5, "tail_factor": 2}, "must be at most 1"),
                         ({"tail_probability": 0.1, "tail_factor": -2}, "must be at least 1")):
        with pytest.raises(wss.ScenarioError, match=words):
            wss.load_scenario(_raw(**flash))
