"""Step 3b (after placement): rank the micro-batching candidates by the analytic step time and choose the fastest.

MemoryX streams every weight once per forward and once per backward pass of every micro-batch
(and a third time for a checkpointed block's recompute), so the split of a wafer's samples into
micro-batches and the checkpointing mode set how often the weights cross; larger micro-batches
need more activation SRAM, which ``'blocks'`` checkpointing frees at the price of the recompute.
:func:`choose` weighs every candidate from :func:`~wss.model.plan.micro_batching.micro_batch_candidates`
with :func:`rank`: each candidate's step as the analytic level times it (:mod:`wss.model.plan.analytic`,
the model ``wss estimate`` reports too), built once per plan and shared by every candidate with the same
micro-batch sizes.  One-micro-batch candidates are priced with their own placement where it differs (the
gradient accumulators, idle without accumulation, then go to flash before the moments do).

MemoryX's rates are the shards' added up, each at the slowest shard's
(:func:`~wss.model.machine.memoryx_rates.memoryx_rates`, ``faults.shards``), as the simulator runs them, so a
slow shard can change the choice.  ``tests/core/test_planner.py`` checks against the simulator that the
candidate it chooses is within 1% of the best one simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from wss.model.kernels.cycles import NnzProfile
from wss.model.machine.optimizer_costs import OptimizerCost
from wss.model.plan.analytic import StepModel
from wss.model.plan.choice import CandidateCost, PlanChoice
from wss.model.plan.formats import WeightStream
from wss.model.plan.kernels import plan_kernels
from wss.model.plan.micro_batching import Candidate
from wss.model.plan.placement import Placement
from wss.model.scenario import Scenario, load_scenario
from wss.model.workload import Op, StreamedKernel

__all__ = ["ALTERNATIVES_KEPT", "Costing", "choose", "rank", "forced_scenario"]

#: Alternatives a :class:`~wss.model.plan.choice.PlanChoice` keeps beside the chosen candidate.
ALTERNATIVES_KEPT = 4


@dataclass(frozen=True)
class Costing:
    """The analytic level of one plan's candidates: its model with the placement of accumulating candidates,
    and (where it differs) with the placement of one-micro-batch candidates."""

    scenario: Scenario
    model: StepModel
    #: The pricing of one-micro-batch candidates when their placement differs: see placement.place_state.
    single: StepModel | None = None

    @classmethod
    def of(
        cls,
        scenario: Scenario,
        ops: list[Op],
        specs: list[StreamedKernel],
        profiles: list[NnzProfile],
        streams: list[WeightStream],
        placement: Placement,
        optimizer: OptimizerCost,
        wafer_samples: Sequence[int] = (1,),
        single: Placement | None = None,
    ) -> Costing:
        def model(place: Placement) -> StepModel:
            kernels = plan_kernels(scenario, specs, profiles, streams, place, [])  # cycles: at each size as needed
            return StepModel(scenario, ops, kernels, wafer_samples, optimizer)

        return cls(scenario, model(placement), model(single) if single is not None else None)

    def cost(self, cand: Candidate) -> CandidateCost:
        """The analytic step time of one candidate."""
        model = self.single if self.single is not None and len(cand.micro_batches) == 1 else self.model
        est = model.evaluate(cand.micro_batches, cand.checkpointing)
        compute, stream, flash = est.passes_paced
        parts = {"compute": compute, "stream": stream + flash, "other": est.step_time_s - compute - stream - flash}
        return CandidateCost(
            checkpointing=cand.checkpointing,
            micro_batches=cand.micro_batches,
            step_time_s=est.step_time_s,
            compute_s=parts["compute"],
            stream_s=parts["stream"],
            other_s=parts["other"],
            bound_by=max(parts, key=lambda k: parts[k]),
            weight_crossings=est.weight_crossings,
            sram_bytes_needed=cand.sram_bytes_needed,
        )


def rank(costing: Costing, candidates: Sequence[Candidate]) -> list[CandidateCost]:
    """Every candidate's analytic cost, fastest first (ties: fewer micro-batches, then ``'none'``)."""
    costs = [costing.cost(c) for c in candidates]
    return sorted(costs, key=lambda c: (c.step_time_s, len(c.micro_batches), c.checkpointing != "none"))


def choose(costing: Costing, candidates: Sequence[Candidate]) -> tuple[Candidate, PlanChoice]:
    """The fastest candidate by :func:`rank`, and the record of the choice."""
    tr = costing.scenario.training
    searched = tuple(f for f in ("activation_checkpointing", "micro_batch") if getattr(tr, f) == "auto")
    ranked = rank(costing, candidates)
    best = ranked[0]
    if not searched:
        reason = "asked for: training.activation_checkpointing and training.micro_batch are set"
    else:
        fields = " and ".join(f"training.{f}" for f in searched)
        reason = f"{fields} 'auto': the fastest of {len(ranked)} candidates by the planner's analytic step time"
    chosen = next(c for c in candidates
                  if c.checkpointing == best.checkpointing and c.micro_batches == best.micro_batches)
    choice = PlanChoice(
        chosen=best,
        alternatives=tuple(ranked[1 : 1 + ALTERNATIVES_KEPT]),
        candidates=len(ranked),
        searched=searched,
        reason=reason,
    )
    return chosen, choice



def forced_scenario(scenario: Scenario, candidate: CandidateCost) -> Scenario:
    """The scenario with ``training.activation_checkpointing`` and ``training.micro_batch`` set to force ``candidate``.

    An explicit micro-batch is the largest size of an even split into the fewest micro-batches
    that allow it, which is how every candidate is built, so the plan of the forced scenario runs
    exactly ``candidate.micro_batches``.
    """
    return load_scenario(scenario, {
        "training.activation_checkpointing": candidate.checkpointing,
        "training.micro_batch": candidate.largest,
    })
