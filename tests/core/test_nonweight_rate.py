"""Non-weight work runs at the rate the wafer's SRAM bandwidth allows (wss/model/machine/wafer_rates.py).

WSE-3's 8-wide datapath doubles its peak over WSE-2's 4-wide one, but its SRAM bandwidth rose only from 20 to
21 PB/s; non-weight work reads and writes its operands in SRAM (3 bytes per FLOP), so on WSE-3 it runs at what
21 PB/s feeds, not at 2.38x WSE-2.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import wss
from wss.model.machine.wafer_rates import NONWEIGHT_SRAM_BYTES_PER_FLOP, nonweight_flops, nonweight_peak_flops
from wss.model.plan import make_plan
from wss.model.workload import WaferOp

ROOT = Path(__file__).resolve().parents[2]


def _wafer(preset: str):
    cluster = {"wse2": "cs2-cluster", "wse3": "cs3-cluster"}[preset]
    wafer = wss.load_scenario(ROOT / "scenarios" / "bert_large.yaml",
                              overrides={"hardware.preset": cluster}).hardware.wafer
    assert wafer.name == preset
    return wafer


def test_the_presets_state_their_sram_bandwidth():
    assert _wafer("wse2").sram_bandwidth_Bps == 20e15
    assert _wafer("wse3").sram_bandwidth_Bps == 21e15


def test_wse2_runs_non_weight_work_at_peak_and_wse3_at_what_its_sram_feeds():
    w2, w3 = _wafer("wse2"), _wafer("wse3")
    assert nonweight_peak_flops(w2) == w2.peak_flops  # 20 PB/s feeds more than the peak
    assert nonweight_peak_flops(w3) == pytest.approx(21e15 / NONWEIGHT_SRAM_BYTES_PER_FLOP)
    assert nonweight_peak_flops(w3) < w3.peak_flops
    ratio = nonweight_flops(w3) / nonweight_flops(w2)
    assert ratio == pytest.approx(1.36, abs=0.01) and w3.peak_flops / w2.peak_flops == pytest.approx(2.38, abs=0.01)


def test_without_a_figure_non_weight_work_runs_at_peak():
    w = _wafer("wse3").model_copy(update={"sram_bandwidth_Bps": None})
    assert nonweight_flops(w) == w.peak_flops * w.nonweight_efficiency


def test_the_plan_prices_a_cs3_wafer_op_at_the_sram_rate():
    s = wss.load_scenario(ROOT / "scenarios" / "cs3_gpt3_13b.yaml")
    plan = make_plan(s)
    pos, op = next((i, op) for i, op in enumerate(plan.ops) if isinstance(op, WaferOp))
    tokens = plan.tokens_per_micro_batch[0]
    forward, _ = plan.wafer_op_seconds[(pos, tokens)]
    assert forward == pytest.approx(op.flops_per_token * tokens / (21e15 / 3 * s.hardware.wafer.nonweight_efficiency))
