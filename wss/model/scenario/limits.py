"""Work bounds: a valid scenario whose run would take hours or gigabytes is refused before planning.

Each field has its own range (:mod:`wss.model.scenario.base`), but work multiplies across fields: a
thousand steps are quick on a three-layer network and most of a day on GPT-3.  These checks bound
the products, from the scenario alone (no plan is made), with upper estimates:

* **layers**: at most :data:`MAX_LAYERS` layers, repeats included;
* **simulated work**: steps x streamed kernels x simulated micro-batches x 3 passes (forward,
  recompute, backward) x chunks per pass, at most :data:`MAX_CHUNK_PASSES`.  Kernels are counted
  per layer at their most (a transformer block 5, an embedding with positions 2, ...); micro-batches
  at their most too: with ``simulation.fold_micro_batches`` at most 5 are simulated per step, else
  every one, and an 'auto' micro-batch may be a single sample; an unfolded run (faults, uneven shards)
  counts every wafer, since each is its own process.  At the simulator's speed on one core the bound is
  a few minutes;
* **real numerics**: at most :data:`MAX_NUMERICS_PARAMS` trained weights, :data:`MAX_NUMERICS_ACTIVATIONS`
  activations held for one step (global batch x the widths of every layer), and
  :data:`MAX_NUMERICS_WORK` sample-weights over the run (steps x global batch x weights): a few
  hundred megabytes and a few minutes of numpy at most.

Every message names the field to change and the figures that exceeded the bound.
"""

from __future__ import annotations

import math
from typing import Any

from wss.errors import FieldProblem
from wss.model.scenario.scenario import Scenario
from wss.model.scenario.workload import MAX_LAYERS

__all__ = [
    "work_checks",
    "MAX_LAYERS",
    "MAX_CHUNK_PASSES",
    "MAX_NUMERICS_PARAMS",
    "MAX_NUMERICS_ACTIVATIONS",
    "MAX_NUMERICS_WORK",
    "FOLDED_MICRO_BATCHES",
]

#: Streamed chunk passes one run may simulate (steps x kernels x micro-batches x 3 x chunks per pass, x the
#: wafers simulated when unfolded: one per class of identical wafers, or all of them with jitter or
#: simulation.wafer_classes false).  One GPT-3 175B step on 192 wafers all apart fits (11,151,360: what
#: jitter on every wafer does to a step is a question worth five minutes); at the measured 40,000 unfolded
#: and 100,000 folded chunk passes a second, the bound is about five minutes of one core.
MAX_CHUNK_PASSES = 12_000_000
#: Micro-batches simulated per step when folding (micro-batches 0-3 and the last).
FOLDED_MICRO_BATCHES = 5
#: Weights trained for real when numerics are on.
MAX_NUMERICS_PARAMS = 10_000_000
#: Activations (samples x features) one step of real numerics holds.
MAX_NUMERICS_ACTIVATIONS = 50_000_000
#: Sample-weight products of a whole run of real numerics (steps x global batch x weights).
MAX_NUMERICS_WORK = 1e12

#: The most streamed kernels one layer of each kind expands into.
_KERNELS_PER_LAYER = {"dense": 1, "embedding": 2, "transformer_block": 5, "pooler": 2, "output_head": 2,
                      "patch_embedding": 3, "timestep_embedding": 2, "label_embedding": 1, "dit_block": 6,
                      "classification_head": 1, "diffusion_head": 2}


def work_checks(s: Scenario) -> list[FieldProblem]:
    """Problems of a scenario whose run would exceed the work bounds (empty if it is within them)."""
    layers = s.workload.model.layers
    total = sum(layer.repeat for layer in layers)
    if total > MAX_LAYERS:
        return [FieldProblem(
            "workload.model.layers",
            f"{total:,} layers (repeats included); a model has at most {MAX_LAYERS:,}",
        )]
    problems = _simulated_work(s)
    if s.numerics.enabled:
        problems += _numerics_work(s)
    return problems


def simulated_micro_batches(s: Scenario) -> int:
    """The most micro-batches a step of this scenario may simulate (before planning: an upper bound).

    At most :data:`FOLDED_MICRO_BATCHES` when micro-batches fold; every one when folding is off, when slow
    flash reads make each micro-batch differ, or when an unfolded run has uneven shards (the rules of
    :func:`wss.model.simulate.simulate_detailed`).
    """
    from wss.model.scenario.fold_rules import folds_wafers, uniform_shards  # lazy: they import this package
    from wss.model.scenario.shards import shard_samples

    per_wafer = max(shard_samples(s))
    size = s.training.micro_batch
    count = per_wafer if size == "auto" else math.ceil(per_wafer / min(size, per_wafer))
    folds = (s.simulation.fold_micro_batches and s.faults.flash is None
             and (folds_wafers(s) or uniform_shards(s)))
    return min(count, FOLDED_MICRO_BATCHES) if folds else count


def _simulated_work(s: Scenario) -> list[FieldProblem]:
    from wss.model.scenario.fold_rules import folds_wafers, simulated_wafers

    kernels = sum(layer.repeat * _kernels_of(layer) for layer in s.workload.model.layers)
    micro = simulated_micro_batches(s)
    chunks = s.simulation.max_chunks_per_kernel
    # Unfolded (faults, uneven shards, fold_wafers false), every simulated wafer runs every pass as its own
    # process: one per class of identical wafers, or every wafer with simulation.wafer_classes false.
    wafers = 1 if folds_wafers(s) else simulated_wafers(s)
    work = s.training.steps * kernels * micro * 3 * chunks * wafers
    if work <= MAX_CHUNK_PASSES:
        return []
    fold = "" if s.simulation.fold_micro_batches else "; simulation.fold_micro_batches: true simulates at most 5"
    if wafers > 1 and not s.faults.sets_wafers_apart:
        fold += "; simulation.fold_wafers: true folds the wafers (the busiest stands for all)"
    apart = f" x {wafers:,} wafers simulated apart" if wafers > 1 else ""
    return [FieldProblem(
        "training.steps",
        f"the run would simulate up to {work:,} chunk passes ({s.training.steps:,} steps x {kernels:,} streamed "
        f"kernels x {micro:,} micro-batches x 3 passes x {chunks:,} chunks{apart}); a run simulates at most "
        f"{MAX_CHUNK_PASSES:,} (a few minutes): lower training.steps, simulation.max_chunks_per_kernel or the "
        f"micro-batch count (training.micro_batch){fold}",
    )]


def _kernels_of(layer: Any) -> int:
    moe = getattr(layer, "moe", None)
    if moe is not None:  # qkv, attn_out, the router, and up to three matmuls per expert and for the shared FFN
        return 3 + 3 * (moe.experts + 1)
    return _KERNELS_PER_LAYER.get(layer.kind, 2)


def _numerics_work(s: Scenario) -> list[FieldProblem]:
    """Real numerics train dense layers in numpy: bound their weights, activations and total work."""
    layers = s.workload.model.layers
    params = sum(layer.repeat * layer.in_features * layer.out_features for layer in layers if layer.kind == "dense")
    widths = sum(layer.repeat * layer.out_features for layer in layers if layer.kind == "dense")
    widths += max((layer.in_features for layer in layers if layer.kind == "dense"), default=0)
    batch, steps = s.training.global_batch, s.training.steps
    if params > MAX_NUMERICS_PARAMS:
        return [FieldProblem(
            "numerics.enabled",
            f"real numerics train {params:,} weights; they train at most {MAX_NUMERICS_PARAMS:,} "
            "(turn numerics off to time a larger model)",
        )]
    if batch * widths > MAX_NUMERICS_ACTIVATIONS:
        return [FieldProblem(
            "training.global_batch",
            f"real numerics would hold {batch * widths:,} activations per step ({batch:,} samples x {widths:,} "
            f"features); they hold at most {MAX_NUMERICS_ACTIVATIONS:,}",
        )]
    if steps * batch * params > MAX_NUMERICS_WORK:
        return [FieldProblem(
            "training.steps",
            f"real numerics would compute {steps * batch * params:.2e} sample-weights ({steps:,} steps x {batch:,} "
            f"samples x {params:,} weights); a run computes at most {MAX_NUMERICS_WORK:.0e} (a few minutes)",
        )]
    return []
