"""Uneven shards: a smaller shard's micro-batches must line up under the busiest wafer's.

Every wafer runs the busiest wafer's number of micro-batches in lock-step: the weights of each pass are
broadcast to all of them and each gradient reduction waits for every child, so each micro-batch takes as
long as the largest micro-batch any wafer runs in that slot.  docs/model.md ("the busiest wafer stands for
all") and docs/unfolded.md ("a smaller shard is never later than it") rest on no wafer running a larger
micro-batch than the busiest one in the same slot: then the folded chain and the unfolded run give the
same step, and so does the analytic level, which times the busiest wafer.

``wss.model.sim.unfolded.wafer_micro_batches`` once cut a smaller shard with ``split_evenly``, which puts
the more numerous size first (an order chosen for folding micro-batches, which an unfolded run with uneven
shards does not do).  When the busiest wafer has as many larger micro-batches as smaller ones and a smaller
shard has fewer, the two orders are opposite: 123 samples in six are 21, 21, 21, 20, 20, 20 but 122 were
20, 20, 20, 20, 21, 21, so slots 4 and 5 ran at 21 on one wafer and 20 on the others.  With buffers too
shallow for the smaller wafer to bank its lead from the first slots (GPT-3 175B's weights against 128 MiB
buffers; here 1 MB buffers), every such slot cost a larger micro-batch: GPT-3 175B on 4 wafers at 1031
sequences ran 11 slots at 22 instead of 6, 9.7 s a step, and the analytic level missed the step by -3.43%.
It now cuts a smaller shard with ``split_under``: its larger micro-batches go where the busiest wafer's do.
"""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS

from wss import load_scenario, simulate
from wss.model.plan import make_plan
from wss.model.sim.unfolded import wafer_micro_batches

BASE = SCENARIOS / "cerebras_gpt_13b.yaml"
#: Cerebras-GPT 111M on 4 wafers: 123, 123, 123 and 122 samples, six micro-batches of at most 21 each.
UNEVEN = {"workload.model": "cerebras-gpt-111m", "hardware.wafers": 4, "training.global_batch": 491,
          "training.micro_batch": 21, "training.activation_checkpointing": "none", "training.steps": 2,
          "hardware.runtime.preset": "ideal",
          # Buffers too shallow for a faster wafer to run far ahead: the wafers move in lock-step, as
          # GPT-3 175B's do with the shipped 128 MiB buffers.
          "hardware.swarmx.port_buffer_bytes": 1_000_000, "hardware.wafer.ingress_buffer_bytes": 1_000_000}


def test_no_wafer_runs_a_larger_micro_batch_than_the_busiest_in_any_slot() -> None:
    plan = make_plan(load_scenario(BASE, UNEVEN))
    busiest = list(plan.micro_batches)
    assert busiest == [21, 21, 21, 20, 20, 20]
    splits = wafer_micro_batches(plan)
    assert [sum(m) for m in splits] == [123, 123, 123, 122]
    for mbs in splits:
        assert all(m <= b for m, b in zip(mbs, busiest)), (mbs, busiest)


def test_uneven_shards_unfolded_take_the_busiest_wafers_step() -> None:
    """The busiest wafer paces the lock-step cluster: unfolded, the step is the folded chain's."""
    unfolded = simulate(load_scenario(BASE, UNEVEN))
    folded = simulate(load_scenario(BASE, {**UNEVEN, "simulation.fold_wafers": True}))
    assert not unfolded.wafer_folding.folded and folded.wafer_folding.folded
    assert unfolded.step_time_s == pytest.approx(folded.step_time_s, rel=1e-9)


@pytest.mark.parametrize(("samples", "busiest"), [
    (122, [21, 21, 21, 20, 20, 20]), (257, [22] * 6 + [21] * 6), (16, [6, 6, 5]), (0, [3, 3]), (30, [6] * 5),
    (7, [3, 2, 2]), (5, [3, 2, 2]),
])
def test_split_under_never_exceeds_the_busiest_and_keeps_every_sample(samples, busiest) -> None:
    from wss.model.plan.micro_batching import split_under

    out = split_under(samples, busiest)
    assert sum(out) == samples and len(out) == len(busiest)
    assert max(out) - min(out) <= 1 and all(m <= b for m, b in zip(out, busiest))
