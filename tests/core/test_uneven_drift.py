"""Why an uneven slot's blocks do not fold: the smaller shards drift ahead, block after block (issue #23).

In a micro-batch slot where the wafers' micro-batches differ in size (the plan's ``uneven_slots``), the busiest
wafer paces every broadcast and reduction, and its blocks repeat from the second on.  A wafer with one sample
fewer computes each block a little faster and starts the next one a little earlier: its lead over the busiest
grows by the same amount every block, as far as the buffers between them let it, and in the backward passes its
offloaded-activation intake fills by a chunk a block.  No two consecutive blocks of such a wafer start in the same
state, so the layer fold's check (:mod:`wss.model.folding.layer_fold`) fails at every block and the ladder
simulates every block of the slot (:mod:`wss.model.folding.ladder`).  ``tools/uneven_blocks.py`` measures this
block by block; these tests pin what it finds on Cerebras-GPT 13B on 13 wafers (2 of 119 samples, 11 of 118, one
micro-batch, block inputs offloaded), the premise of any fold that would carry the drift over the copies.
"""

from __future__ import annotations

import sys
from functools import cache
from types import ModuleType

import pytest
from core_helpers import REPO, SCENARIOS

import wss


def _tool() -> ModuleType:
    import importlib.util

    spec = importlib.util.spec_from_file_location("uneven_blocks", REPO / "tools" / "uneven_blocks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["uneven_blocks"] = module
    spec.loader.exec_module(module)
    return module


#: The calibration these dynamics were measured at (as in test_uneven_folding.py: the shipped one moves with refits).
#: ... and the activation store they were found with: each wafer's own, limited only by its edge.
PINNED = {"hardware.wafer.kernel_efficiency": 0.59, "hardware.runtime.step_overhead_s": 0.084,
          "hardware.activation_store.bandwidth_Bps": None}


@cache
def _blocks() -> tuple:
    tool = _tool()
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",
                          overrides={**PINNED, "hardware.wafers": 13, "training.steps": 1})
    cluster, slots = tool.uneven_slot_blocks(s)
    return tool, cluster, slots


def test_the_uneven_slot_is_simulated_block_by_block() -> None:
    tool, cluster, slots = _blocks()
    assert cluster.plan.uneven_slots == {0} and cluster.plan.checkpointing == "offload"
    assert set(slots) == {(0, "forward"), (0, "backward")}
    for (mb, d), starts in slots.items():
        assert len(starts) == 40
        assert [p.block for p in tool.pairs(cluster, mb, d, starts) if p.verdict is None] == [], d


@pytest.mark.parametrize("direction", ["forward", "backward"])
def test_the_smaller_shards_lead_grows_by_the_same_amount_every_block(direction: str) -> None:
    tool, cluster, slots = _blocks()
    pairs = tool.pairs(cluster, 0, direction, slots[(0, direction)])
    settled = pairs[1:]  # the first block fills the pipeline
    period = settled[0].period
    assert all(abs(p.period - period) <= 1e-9 * period for p in settled)  # the busiest wafer repeats
    samples = cluster.plan.wafer_samples
    smaller = [w for w in settled[0].leads if samples[int(w.split(".")[1])] < max(samples)]
    assert smaller  # the wafers with one sample fewer (a stand-in per subtree)
    for w in settled[0].leads.keys() - set(smaller):  # the busiest wafers' stand-ins keep in step
        assert all(abs(p.leads[w]) <= 1e-9 * period for p in settled), w
    for w in smaller:
        steps = [b.leads[w] - a.leads[w] for a, b in zip(settled, settled[1:])]
        assert steps[0] > 0.0
        assert all(abs(x - steps[0]) <= 1e-6 * steps[0] for x in steps), w


def test_the_smaller_shards_activation_intake_fills_by_a_chunk_a_block() -> None:
    tool, cluster, slots = _blocks()
    pairs = tool.pairs(cluster, 0, "backward", slots[(0, "backward")])
    growing = [p for p in pairs if any(name.endswith(".act_intake") for name in p.differs)]
    assert len(growing) > len(pairs) // 2  # most blocks
    for p in growing:
        assert all(b == a + 1 for name, (a, b) in p.differs.items() if name.endswith(".act_intake")), p.block
