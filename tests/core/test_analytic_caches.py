"""The analytic level works out per-plan figures once per model, not once per candidate it evaluates."""

from __future__ import annotations

from pathlib import Path

import wss
from wss.model.plan import plan_inputs
from wss.model.plan.analytic import model as analytic_model

REPO = Path(__file__).resolve().parents[2]


def test_block_inputs_are_worked_out_once_per_model(monkeypatch):
    """Every offload candidate's sends and returns read the block inputs; with a new micro-batch size per
    candidate, working them out each time was a fifth of a cold evaluation on GPT-3 175B/192."""
    inp = plan_inputs(wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml"), None)
    model = analytic_model.StepModel(inp.costing.model.scenario, inp.costing.model.ops, inp.costing.model.kernels,
                                     inp.costing.model.wafer_samples, inp.costing.model.jobs.optimizer)
    calls = []
    real = analytic_model.offloaded_block_inputs
    monkeypatch.setattr(analytic_model, "offloaded_block_inputs", lambda *a: calls.append(a) or real(*a))
    offload = [c for c in inp.candidates if c.checkpointing == "offload"]
    assert len({c.micro_batches for c in offload}) > 1
    first = [model.evaluate(c.micro_batches, c.checkpointing).step_time_s for c in offload]
    again = [model.evaluate(c.micro_batches, c.checkpointing).step_time_s for c in offload]
    assert len(calls) == 1 and first == again
