"""Closed-form step-time estimate: the analytic level's view of a finished plan, without SimPy.

``wss.studies.estimate.estimate(scenario) -> Estimate`` times one training step in milliseconds of wall
time where the simulator takes seconds; a sweep can use it as a cheap fidelity level.  It never simulates.

The model is the planner's own analytic level (:mod:`wss.model.plan.analytic`, which says what it shares
with the simulator and what it replaces by closed forms): the planner ranks its candidates with it, and
this view times the candidate the plan runs and reports the step in the categories of :class:`wss.Result`,
with the model's additive terms beside them.  docs/fidelity.md derives every term and compares the result
with the simulator.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from wss.model.plan import Plan, make_plan
from wss.model.plan.analytic import TERMS, StepModel
from wss.model.plan.analytic.faults import left_out
from wss.model.plan.pacing import bound_category
from wss.model.scenario import Scenario, load_scenario

__all__ = ["Estimate", "estimate", "estimate_plan", "TERMS"]


class Estimate(BaseModel):
    """A closed-form estimate of one training step, in the categories of :class:`wss.Result`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario_name: str = Field(description="Name of the scenario estimated.")
    step_time_s: float = Field(description="Estimated mean time per step, seconds.")
    samples_per_s: float = Field(description="Global batch over step time.")
    tokens_per_s: float = Field(description="Global batch x tokens per sample over step time.")
    breakdown_s: dict[str, float] = Field(
        description="Step time split into compute, stream, flash, optimizer, bubble and input; sums to step_time_s."
    )
    pacing_s: dict[str, float] = Field(
        description="Step time by what paced it: passes whole by compute or their wait's cause, the rest by "
        "their term (as Result.pacing_s)."
    )
    bound_by: str = Field(description="The category pacing most of the step (the largest of pacing_s).")
    terms_s: dict[str, float] = Field(
        description="The model's additive terms per step (see TERMS); sum to step_time_s."
    )
    stream_bottleneck: str = Field(description="Slowest stage on the first kernel's way down (memoryx or swarmx.lN).")
    micro_batches: int = Field(description="Micro-batches per step on the busiest wafer.")
    tokens_per_sample: int = Field(description="Tokens in one sample (1 for feature models).")
    buffered_chunks: int = Field(
        description="Chunks the buffers hold past the slowest stage of the first kernel's way down (caps the lead)."
    )
    faults_left_out: list[str] = Field(
        default_factory=list,
        description="The scenario's faults the estimate does not price (a straggler, a slow edge, jitter, slow "
        "flash reads, failures), in words; a slow MemoryX shard and a node that is down are priced.",
    )

    @property
    def step_time_ms(self) -> float:
        return self.step_time_s * 1e3


def estimate(scenario: Scenario | Mapping[str, Any] | str | Path) -> Estimate:
    """Estimate a scenario's step time in closed form: plan it, never simulate it.

    Accepts what :func:`wss.simulate` accepts (a Scenario, a mapping or a YAML path), is pure and
    deterministic, and raises :class:`wss.errors.WssError` for bad input as the simulator does.
    """
    s = scenario if isinstance(scenario, Scenario) else load_scenario(scenario)
    return estimate_plan(make_plan(s))


def estimate_plan(plan: Plan) -> Estimate:
    """Estimate from an existing plan (see :func:`estimate`)."""
    s = plan.scenario
    step = StepModel.of_plan(plan).evaluate(plan.micro_batches, plan.checkpointing)
    samples = s.training.global_batch
    return Estimate(
        scenario_name=s.name,
        step_time_s=step.step_time_s,
        samples_per_s=samples / step.step_time_s,
        tokens_per_s=samples * plan.tokens_per_sample / step.step_time_s,
        breakdown_s=step.breakdown,
        pacing_s=step.pacing,
        bound_by=bound_category(step.pacing),
        terms_s=step.terms,
        stream_bottleneck=step.bottleneck,
        micro_batches=len(plan.micro_batches),
        tokens_per_sample=plan.tokens_per_sample if s.workload.model.input != "features" else 1,
        buffered_chunks=step.buffered_chunks,
        faults_left_out=left_out(s.faults),
    )
