"""Invariants every Result must keep, on a handful of small but varied scenarios."""

from __future__ import annotations

import json
import math

import pytest
from core_helpers import SCENARIOS, dense_model, scenario_dict

import wss
from wss.model.result.results import BREAKDOWN_CATEGORIES, PACING_TOLERANCE, KernelRecord, Result

TINY_GPT = {
    "name": "tiny-gpt",
    "input": "tokens",
    "seq_len": 128,
    "layers": [
        {"kind": "embedding", "vocab_size": 1024, "d_model": 256, "max_positions": 128},
        {"kind": "transformer_block", "repeat": 2, "d_model": 256, "n_heads": 4},
        {"kind": "output_head", "d_model": 256, "vocab_size": 1024},
    ],
}

# The folded case and the full runs it is compared with must run the same machine: with DRAM shared by the
# stream and the optimizer, how far the stream runs ahead changes when the accumulations run.
SMALL_BUFFERS = {"wafer": {"ingress_buffer_bytes": 2**16}, "swarmx": {"port_buffer_bytes": 2**16}}

CASES = {
    "fc-mnist-3-steps": lambda: wss.load_scenario(SCENARIOS / "fc_mnist.yaml"),
    # Buffers of 64 KiB, a few of this tiny model's chunks: with the preset's 128 MiB the stream would run
    # ahead by whole micro-batches, the queues would still be growing at micro-batch 3, and nothing folds.
    "gpt-micro-batches-folded": lambda: scenario_dict(
        model=TINY_GPT, wafers=2, global_batch=20, steps=2, optimizer="adamw", training={"micro_batch": 1},
        hardware=SMALL_BUFFERS,
    ),
    "flash-resident": lambda: scenario_dict(
        model=dense_model(2048, 2048, 2048, 2048),
        steps=2,
        hardware={"memoryx": {"shards": 1, "dram_capacity_bytes": 4e7, "flash_capacity_bytes": 1e9}},
    ),
    "uneven-shards": lambda: scenario_dict(model="fc-mnist", wafers=4, global_batch=10, steps=2),
    "bubble-heavy": lambda: scenario_dict(
        model=dense_model(1024, 1024, 1024), steps=3, hardware={"memoryx": {"optimizer_flops": 1e9}}
    ),
}


@pytest.fixture(scope="module")
def results():
    return {name: wss.simulate(make()) for name, make in CASES.items()}


@pytest.fixture(params=sorted(CASES))
def result(request, results) -> Result:
    return results[request.param]


def test_cases_cover_what_they_claim(results):
    assert results["gpt-micro-batches-folded"].memory.micro_batches == 10
    assert results["gpt-micro-batches-folded"].cluster["micro_batches_simulated"] < 10
    assert results["flash-resident"].memory.memoryx_flash_bytes > 0
    assert results["flash-resident"].memory.memoryx_dram_bytes > 0
    assert results["flash-resident"].breakdown_s["flash"] > 0
    assert results["bubble-heavy"].breakdown_s["bubble"] + results["bubble-heavy"].breakdown_s["optimizer"] > 0
    assert results["uneven-shards"].cluster["samples_per_wafer_min"] == 2


def test_step_breakdown_sums_to_step_time(result):
    for step in result.steps:
        assert set(step.breakdown_s) == set(BREAKDOWN_CATEGORIES)
        assert all(v >= 0 for v in step.breakdown_s.values())
        assert math.fsum(step.breakdown_s.values()) == pytest.approx(step.time_s, rel=1e-9)
    assert math.fsum(result.breakdown_s.values()) == pytest.approx(result.step_time_s, rel=1e-9)
    for c in BREAKDOWN_CATEGORIES:
        mean = math.fsum(s.breakdown_s[c] for s in result.steps) / len(result.steps)
        assert result.breakdown_s[c] == pytest.approx(mean, rel=1e-9, abs=1e-15)


def test_pacing_sums_to_step_time_and_names_the_bound(result):
    assert set(result.pacing_s) == set(BREAKDOWN_CATEGORIES)
    assert all(v >= 0 for v in result.pacing_s.values())
    assert math.fsum(result.pacing_s.values()) == pytest.approx(result.step_time_s, rel=1e-9)
    assert result.pacing_s[result.bound_by] == max(result.pacing_s.values())
    # A pass paced by compute counts whole, so compute never paces more than its breakdown share
    # plus the waits of the passes it paced (at most PACING_TOLERANCE of them).
    assert result.pacing_s["compute"] <= result.breakdown_s["compute"] / (1 - PACING_TOLERANCE) * (1 + 1e-9)


def test_steps_chain_from_zero_to_total(result):
    steps = result.steps
    assert [s.step for s in steps] == list(range(result.scenario.training.steps))
    assert steps[0].start_s == 0.0
    for a, b in zip(steps, steps[1:]):
        assert b.start_s == a.end_s
    for s in steps:
        assert s.end_s > s.start_s
        assert s.time_s == pytest.approx(s.end_s - s.start_s, rel=1e-12)
    assert steps[-1].end_s == pytest.approx(result.total_time_s, rel=1e-12)
    assert result.step_time_s == pytest.approx(result.total_time_s / len(steps), rel=1e-12)
    assert result.samples_per_s == pytest.approx(result.scenario.training.global_batch / result.step_time_s, rel=1e-12)


def test_records_lie_inside_the_run(result):
    total = result.total_time_s
    assert result.records
    for r in result.records:
        assert 0.0 <= r.start_s <= r.end_s <= total * (1 + 1e-12), r
        assert r.exposed_stall_s >= 0 and r.bytes_in >= 0 and r.bytes_out >= 0
        assert r.where in ("wafer", "memoryx")
        assert r.phase in ("forward", "recompute", "backward", "accumulate", "norm", "update")


def test_wafer_records_are_in_program_order_and_do_not_overlap(result):
    wafer = [r for r in result.records if r.where == "wafer"]
    for a, b in zip(wafer, wafer[1:]):
        assert b.start_s >= a.end_s * (1 - 1e-12), (a, b)


def test_every_update_ends_its_step(result):
    for step in result.steps:
        updates = [r for r in result.records if r.phase == "update" and r.step == step.step]
        assert len(updates) == result.cluster["kernels"]
        assert max(u.end_s for u in updates) == pytest.approx(step.end_s, rel=1e-12)


def test_breakdown_compute_is_the_wafer_busy_time(result):
    compute = math.fsum(s.breakdown_s["compute"] for s in result.steps)
    assert compute == pytest.approx(result.utilisation["wafer.compute"] * result.total_time_s, rel=1e-9)


@pytest.mark.parametrize("name", sorted(CASES))
def test_wafer_records_account_for_the_weight_bytes(results, name):
    """Folded runs too: the records of the micro-batch that stands for the copies carry its repeat count."""
    result = results[name]
    weights_in = math.fsum(r.bytes_in * r.repeats for r in result.records if r.where == "wafer")
    grads_out = math.fsum(r.bytes_out * r.repeats for r in result.records if r.where == "wafer")
    steps = len(result.steps)
    (down,) = [v for k, v in result.link_bytes.items() if k.startswith("swarmx.") and k.endswith("->wafer")]
    (up,) = [v for k, v in result.link_bytes.items() if k.startswith("wafer->")]
    assert weights_in / steps == pytest.approx(down.per_link_bytes, rel=1e-9)
    assert grads_out / steps == pytest.approx(up.per_link_bytes, rel=1e-9)


def test_loss_reaches_the_user_inside_its_step(result):
    for step in result.steps:
        assert step.loss_at_user_s is not None
        assert step.start_s < step.loss_at_user_s < step.end_s


def test_utilisation_is_a_fraction(result):
    for name, u in result.utilisation.items():
        assert 0.0 <= u <= 1.0 + 1e-9, name


def test_to_records_gives_plain_dicts(result):
    rows = result.to_records()
    assert len(rows) == len(result.records)
    fields = set(KernelRecord.model_fields)
    for row in rows:
        assert type(row) is dict
        assert set(row) == fields
        assert all(type(v) in (int, float, str) for v in row.values()), row
    json.dumps(rows)  # plain data
    assert rows[0] == result.records[0].model_dump()


def test_json_round_trip(result, tmp_path):
    path = result.save(tmp_path / "sub" / "result.json")
    assert path.is_file()
    assert Result.load(path) == result
    assert json.loads(path.read_text())["step_time_s"] == result.step_time_s
    assert [p.name for p in path.parent.iterdir()] == ["result.json"]  # no temporary left behind


# ---------------------------------------------------------------------------- uneven shards, folding


def test_uneven_shards_fold_onto_the_busiest_wafer(results):
    uneven = results["uneven-shards"]
    assert uneven.cluster["samples_per_wafer_max"] == 3
    assert uneven.cluster["samples_per_wafer_min"] == 2
    even = wss.simulate(scenario_dict(model="fc-mnist", wafers=4, global_batch=12, steps=2))
    assert uneven.step_time_s == pytest.approx(even.step_time_s, rel=1e-12)
    assert uneven.samples_per_s == pytest.approx(10 / uneven.step_time_s, rel=1e-12)
    assert uneven.samples_per_s < even.samples_per_s
    lighter = wss.simulate(scenario_dict(model="fc-mnist", wafers=4, global_batch=8, steps=2))
    assert lighter.step_time_s <= uneven.step_time_s


def test_folded_micro_batches_agree_with_the_full_simulation(results):
    folded = results["gpt-micro-batches-folded"]
    full = wss.simulate(
        scenario_dict(
            model=TINY_GPT, wafers=2, global_batch=20, steps=2, optimizer="adamw",
            training={"micro_batch": 1}, simulation={"fold_micro_batches": False}, hardware=SMALL_BUFFERS,
        )
    )
    assert full.cluster["micro_batches_simulated"] == 10
    assert folded.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    for a, b in zip(folded.steps, full.steps):
        assert a.end_s == pytest.approx(b.end_s, rel=1e-9)
        for c in BREAKDOWN_CATEGORIES:
            assert a.breakdown_s[c] == pytest.approx(b.breakdown_s[c], rel=1e-9, abs=1e-15), c
    for name, lb in full.link_bytes.items():
        assert folded.link_bytes[name].per_link_bytes == pytest.approx(lb.per_link_bytes, rel=1e-9), name
    for name, u in full.utilisation.items():
        assert folded.utilisation[name] == pytest.approx(u, rel=1e-9), name
    assert folded.weight_crossings_per_micro_batch == pytest.approx(full.weight_crossings_per_micro_batch, rel=1e-9)
    assert folded.phase_s.keys() == full.phase_s.keys()
    for key, seconds in full.phase_s.items():
        assert folded.phase_s[key] == pytest.approx(seconds, rel=1e-9), key


def test_folded_records_match_the_full_simulation(results):
    folded = results["gpt-micro-batches-folded"]
    full = wss.simulate(
        scenario_dict(
            model=TINY_GPT, wafers=2, global_batch=20, steps=2, optimizer="adamw",
            training={"micro_batch": 1}, simulation={"fold_micro_batches": False}, hardware=SMALL_BUFFERS,
        )
    )
    by_key = {(r.step, r.micro_batch, r.name, r.phase, r.where): r for r in full.records}
    tol = 1e-9 * full.total_time_s
    wrong = []
    for r in folded.records:
        ref = by_key[(r.step, r.micro_batch, r.name, r.phase, r.where)]
        if abs(r.start_s - ref.start_s) > tol or abs(r.end_s - ref.end_s) > tol:
            wrong.append((r.step, r.micro_batch, r.name, r.phase, r.end_s - r.start_s, ref.end_s - ref.start_s))
    assert wrong == []


def test_a_run_that_is_not_periodic_is_not_folded():
    """A slow optimizer falls further behind every micro-batch: the fold check must refuse it."""
    slow = scenario_dict(
        model=TINY_GPT, wafers=2, global_batch=20, steps=1, optimizer="adamw", training={"micro_batch": 1}
    )
    slow["hardware"].setdefault("memoryx", {})["optimizer_flops"] = 1e6
    result = wss.simulate(slow)
    assert result.cluster["micro_batches_simulated"] == 10  # fell back to simulating every micro-batch
    full = wss.simulate({**slow, "simulation": {"fold_micro_batches": False}})
    assert result.step_time_s == full.step_time_s
    assert result.records == full.records
