"""Everything about a run that is fixed before time starts.

From a Scenario, :func:`make_plan` derives the static quantities the SimPy
model needs and the capacity checks that can fail: the operations, each
kernel's non-zero profile, streamed bytes and chunks, MemoryX placement
across DRAM and flash, the wafers' shards, micro-batching against SRAM, and
the SwarmX tree.  ``wss validate`` runs this and stops.

Byte conventions:

* weights down, per pass and per wafer: dense ``M K b_w``; sparse
  ``nnz (b_w + 2) + 4 M`` (a 16-bit index per weight, one 32-bit control
  wavelet per output feature); the smaller format is chosen per kernel;
* gradients up: ``nnz b_g`` (MemoryX knows the mask, no indices);
* MemoryX reads the fp32 master weights (4 B per non-zero) for every stream
  and converts to the streamed precision on the way out (an assumption: no
  second copy is stored);
* a pruned kernel's mask is stored beside its state as a bitmask (``M K / 8``
  bytes) or an int32 index per non-zero, whichever is smaller (an
  assumption: the storage format of MemoryX is not public), so the state
  shrinks monotonically as sparsity grows.

:func:`make_plan` is a short sequence of steps, one module each:

* :mod:`~wss.model.plan.profiles`: each kernel's non-zero profile (real, dense or sampled);
* :mod:`~wss.model.plan.formats`: the byte conventions above, as stream and mask sizes;
* :mod:`~wss.model.plan.micro_batching`: the batch across wafers, and the candidates
  (checkpointing x micro-batches, split evenly) that fit activation SRAM;
* :mod:`~wss.model.plan.placement`: MemoryX capacity, tied-weight owners, DRAM and flash tiers;
* :mod:`~wss.model.plan.search`: each candidate's analytic step time; the fastest is chosen
  (``'auto'``) and :mod:`~wss.model.plan.micro_batching` picks which of its micro-batches are
  simulated when folding;
* :mod:`~wss.model.plan.kernels`: cycles and chunks per kernel, seconds per non-weight op.

:mod:`~wss.model.plan.types` holds the :class:`Plan` and :class:`KernelPlan` records they fill,
and :mod:`~wss.model.plan.problems` the errors they raise.

The capacity checks run in that order, so a scenario that fails several reports the SRAM
problem before the MemoryX ones.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from dataclasses import dataclass, replace

from wss.model.kernels.cycles import NnzProfile
from wss.model.machine.optimizer_costs import OPTIMIZER_COSTS
from wss.model.machine.release_rates import release_wafer
from wss.model.machine.swarmx_path import swarmx_path
from wss.model.plan.activation_store import fit_store
from wss.model.plan.choice import CandidateCost, PlanChoice
from wss.model.plan.formats import CONTROL_BYTES as CONTROL_BYTES
from wss.model.plan.formats import INDEX_BYTES as INDEX_BYTES
from wss.model.plan.formats import STORED_INDEX_BYTES as STORED_INDEX_BYTES
from wss.model.plan.formats import WeightStream, weight_streams
from wss.model.plan.kernels import kernel_of_op, plan_kernels, wafer_op_seconds
from wss.model.plan.layer_runs import BlockRun as BlockRun
from wss.model.plan.layer_runs import block_runs
from wss.model.plan.micro_batching import FOLD_MIN_COPIES as FOLD_MIN_COPIES
from wss.model.plan.micro_batching import FOLDED_PREFIX as FOLDED_PREFIX
from wss.model.plan.micro_batching import (
    Candidate,
    micro_batch_candidates,
    plan_micro_batching,
    retained_weight_bytes,
    simulated_steps,
)
from wss.model.plan.placement import Placement, place_state
from wss.model.plan.profiles import kernel_profiles
from wss.model.plan.search import Costing, choose, rank
from wss.model.plan.types import KernelPlan, Plan
from wss.model.scenario import PRECISION_BYTES, Scenario
from wss.model.scenario.shards import shard_samples
from wss.model.workload import Op, StreamedKernel, expand_model

__all__ = [
    "Plan", "KernelPlan", "make_plan", "rank_candidates", "plan_inputs", "PlanInputs", "PlanChoice", "CandidateCost",
]


@dataclass(frozen=True)
class PlanInputs:
    """What the steps before the choice derive: the ops, each kernel's profile and stream, the candidates."""

    ops: list[Op]
    specs: list[StreamedKernel]
    profiles: list[NnzProfile]
    streams: list[WeightStream]
    samples: list[int]
    candidates: list[Candidate]
    placement: Placement  # with gradient accumulation over micro-batches
    costing: Costing
    placement_single: Placement | None = None  # with one micro-batch per step, where it differs

    def placement_for(self, candidate: Candidate) -> Placement:
        """The placement a candidate runs with: idle accumulators go to flash first without accumulation."""
        if self.placement_single is not None and len(candidate.micro_batches) == 1:
            return self.placement_single
        return self.placement


def plan_inputs(s: Scenario, profiles: dict[str, NnzProfile] | None) -> PlanInputs:
    """Run the steps up to the choice (profiles, formats, candidates against SRAM, placement)."""
    ops = expand_model(s.workload.model, s.workload.sparsity, s.seq_len)
    opt = OPTIMIZER_COSTS[s.training.optimizer]
    samples = shard_samples(s)  # over the wafers a node that is down does not cut off (faults.nodes)
    specs = [op for op in ops if isinstance(op, StreamedKernel)]
    nnz_profiles = kernel_profiles(s, specs, profiles)
    streams = weight_streams(specs, nnz_profiles, PRECISION_BYTES[s.training.weight_precision])
    candidates = micro_batch_candidates(s, ops, retained_weight_bytes(s, specs, streams), max(samples))
    placement = place_state(s, specs, nnz_profiles, opt)
    single: Placement | None = place_state(s, specs, nnz_profiles, opt, accumulates=False)
    if single is not None and single.component_tiers == placement.component_tiers:
        single = None
    costing = Costing.of(s, ops, specs, nnz_profiles, streams, placement, opt, samples, single)
    inputs = PlanInputs(ops, specs, nnz_profiles, streams, samples, candidates, placement, costing, single)
    # Offload needs room in the activation store for a micro-batch's block inputs (after placement: in MemoryX
    # they share the DRAM the model state leaves).
    return replace(inputs, candidates=fit_store(s, ops, samples, candidates, inputs.placement_for))


#: The choice made for a scenario, by the scenario's identity while it lives: a scenario is often planned again
#: (``wss.plan`` then ``wss.simulate``, a run's plan with other folds), and the choice, the analytic costing of
#: every candidate, is most of a small scenario's plan.  A Scenario is immutable, so its choice cannot change.
_CHOICES: dict[int, tuple[weakref.ref[Scenario], tuple[Candidate, PlanChoice]]] = {}


#: The inputs derived for the scenarios planned last, by identity: ``wss.plan`` then ``wss.simulate`` (and a
#: folded run's plans with other folds) derive them two to four times over for one scenario.  The inputs hold
#: their scenario (the costing prices it), so an entry keeps it alive and its id cannot be reused while kept;
#: the few kept are the most recently planned, the others let go.  A Scenario is immutable and the inputs are
#: a function of it alone (without given profiles), so they cannot change.
_INPUTS: OrderedDict[int, tuple[Scenario, PlanInputs]] = OrderedDict()
#: How many scenarios' inputs are kept: a run plans one scenario at a time, a study a few side by side.
INPUTS_KEPT = 8


def _inputs(s: Scenario) -> PlanInputs:
    """:func:`plan_inputs` of ``s`` without given profiles, derived once while ``s`` is among the last planned."""
    kept = _INPUTS.get(id(s))
    if kept is not None and kept[0] is s:
        _INPUTS.move_to_end(id(s))
        return kept[1]
    made = plan_inputs(s, None)
    _INPUTS[id(s)] = (s, made)
    while len(_INPUTS) > INPUTS_KEPT:
        _INPUTS.popitem(last=False)
    return made


def _choice(s: Scenario, inp: PlanInputs) -> tuple[Candidate, PlanChoice]:
    """:func:`~wss.model.plan.search.choose` on ``inp`` (the inputs of ``s`` without given profiles), once per
    scenario object."""
    kept = _CHOICES.get(id(s))
    if kept is not None and kept[0]() is s:
        return kept[1]
    made = choose(inp.costing, inp.candidates)
    key = id(s)
    _CHOICES[key] = (weakref.ref(s, lambda _ref: _CHOICES.pop(key, None)), made)
    return made


def rank_candidates(scenario: Scenario, profiles: dict[str, NnzProfile] | None = None) -> list[CandidateCost]:
    """Every candidate :func:`make_plan` weighs for this scenario, fastest first by the analytic step time.

    The first is the one :func:`make_plan` runs.  Force another with
    :func:`~wss.model.plan.search.forced_scenario`.
    """
    inp = plan_inputs(scenario, profiles)
    return rank(inp.costing, inp.candidates)


def make_plan(scenario: Scenario, profiles: dict[str, NnzProfile] | None = None, fold: bool = True,
              fold_steps: bool = True, fold_layers: bool | tuple[str, ...] = False) -> Plan:
    """Derive the static plan; raise :class:`InfeasibleError` when the machine cannot run it.

    Parameters
    ----------
    profiles
        Real non-zero profiles by kernel name (from numerics masks).  Kernels
        not given are dense or sampled from an i.i.d. mask of their density.
    fold
        Allow folding of identical micro-batches and steps (``simulation.fold_micro_batches`` must also
        be on); layers follow ``fold_layers`` alone.
    fold_steps
        Allow folding of identical steps (with ``fold``): off, only micro-batches are folded.
    fold_layers
        Allow folding of runs of identical blocks (:mod:`wss.model.folding.layer_fold`;
        ``simulation.fold_micro_batches`` must also be on): in the forward and the backward passes (true),
        in those named (``("forward",)``, ``("backward",)``), or not (the default: only a simulation needs
        the runs of identical blocks).
    """
    s = scenario
    hw = s.hardware
    inp = _inputs(s) if profiles is None else plan_inputs(s, profiles)
    ops = list(inp.ops)  # the plan's own list: the kept inputs are shared by every plan of the scenario
    chosen, choice = _choice(s, inp) if profiles is None else choose(inp.costing, inp.candidates)
    batching = plan_micro_batching(s, chosen, fold)
    placement = inp.placement_for(chosen)
    tree = swarmx_path(hw)
    plan = Plan(
        scenario=s,
        ops=ops,
        kernels=plan_kernels(s, inp.specs, inp.profiles, inp.streams, placement, batching.token_counts),
        kernel_of_op=kernel_of_op(ops),
        wafer_samples=list(inp.samples),
        micro_batches=batching.micro_batches,
        simulated_micro_batches=batching.simulated,
        uneven_slots=batching.uneven,
        simulated_steps=simulated_steps(s, fold and fold_steps),
        tokens_per_sample=s.seq_len,
        checkpointing=batching.checkpointing,
        sram_bytes_needed=batching.sram_bytes_needed,
        sram_bytes_available=batching.sram_bytes_available,
        optimizer=OPTIMIZER_COSTS[s.training.optimizer],
        memoryx_state_bytes=placement.total_bytes,
        memoryx_dram_bytes=placement.dram_bytes,
        memoryx_flash_bytes=placement.flash_bytes,
        staging_bytes=placement.staging_bytes,
        memoryx_components=placement.component_bytes,
        tree_levels=tree.depth,
        nodes_per_level=list(tree.nodes_per_level),
        wafer_op_seconds=wafer_op_seconds(release_wafer(hw), ops, batching.token_counts),
        choice=choice,
    )
    directions = ("forward", "backward") if fold_layers is True else tuple(fold_layers or ())
    if directions and s.simulation.fold_micro_batches:
        plan = replace(plan, layer_runs=block_runs(plan), layer_directions=directions)
    return plan
