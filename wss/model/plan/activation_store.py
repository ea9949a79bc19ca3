"""The activation store before the run: its room for a micro-batch's block inputs, and its rate in closed form.

With ``training.activation_checkpointing: offload`` every block's input leaves the wafer in the forward pass
and waits in the store (``hardware.activation_store``) until the block's recompute.  Two things follow, and
both the planner (:mod:`wss.model.plan.search`) and the closed-form estimate (:mod:`wss.studies.estimate`)
take them from here, so they agree:

* **room** (:func:`fit_store`): a micro-batch's block inputs are all in the store at the end of its forward
  pass (they leave before the next micro-batch's arrive), so an offload candidate needs room for its largest
  micro-batch: per wafer in a host store (``capacity_bytes``), for every wafer at once in MemoryX (the DRAM
  that the placement of the model state and the flash staging leave).  ``auto`` drops the candidates that do
  not fit; an explicit ``offload`` that fits nowhere is an error naming the field and the sizes.
* **rate** (:func:`store_extra_s`): the block inputs go in during the forward pass and come back during the
  backward one, so each direction has that phase's time to cross the store.  A host store moves one wafer's
  bytes at ``bandwidth_Bps``.  MemoryX moves every wafer's: going in over its network ports (which the
  gradients use only in the backward pass), coming back over the ports the weight stream uses, beside that
  phase's stream, and through its DRAM both ways.  What a phase cannot hide adds to the micro-batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from wss.model.machine.figures import block_input_bytes_per_token
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.plan.activation_sram import block_input_widths
from wss.model.plan.micro_batching import Candidate, split_evenly
from wss.model.plan.placement import Placement
from wss.model.plan.problems import fmt_bytes, infeasible
from wss.model.scenario import Scenario
from wss.model.workload import Op

__all__ = ["StoreRates", "store_rates", "store_extra_s", "offload_bytes_per_token", "store_room", "fit_store",
           "offload_bytes"]


@dataclass(frozen=True)
class StoreRates:
    """What limits a store in the closed forms: a host store's bandwidth, or MemoryX's rates and its wafers.

    ``host_Bps`` is one wafer's store (both directions share it); with MemoryX, ``network_Bps`` is each
    direction of its ports and ``dram_Bps`` its DRAM (all shards), shared by ``wafers`` wafers.
    """

    host_Bps: float | None = None
    network_Bps: float = 0.0
    dram_Bps: float = 0.0
    wafers: float = 1.0


def store_rates(scenario: Scenario, wafer_samples: Sequence[int]) -> StoreRates | None:
    """The store's rates, or None when it has no limit beyond the wafer's edge (the default)."""
    store = scenario.hardware.activation_store
    if store.location == "host":
        return StoreRates(host_Bps=store.bandwidth_Bps) if store.bandwidth_Bps is not None else None
    rates = memoryx_rates(scenario)
    return StoreRates(network_Bps=rates.network_Bps, dram_Bps=rates.dram_Bps,
                      wafers=sum(wafer_samples) / max(wafer_samples))


def store_extra_s(rates: StoreRates, act_bytes: float, busy_s: float, back: float, stream_bytes: float) -> float:
    """What the store adds to one micro-batch of one wafer.

    Parameters
    ----------
    act_bytes
        The wafer's block inputs of the micro-batch (every block's), sent in and read back once each.
    busy_s
        The micro-batch without offload.
    back
        The share of ``busy_s`` in the backward sweep (recomputes included): the returns' time; the rest is
        the forward pass, the block inputs' time going in.
    stream_bytes
        Weight bytes MemoryX streams in the micro-batch (the weight stream's share of its ports going out).
    """
    forward, backward = (1.0 - back) * busy_s, back * busy_s
    if rates.host_Bps is not None:
        t = act_bytes / rates.host_Bps
        return max(0.0, t - forward) + max(0.0, t - backward)
    every = rates.wafers * act_bytes
    going_in = max(every / rates.network_Bps, every / rates.dram_Bps)
    coming_back = max((back * stream_bytes + every) / rates.network_Bps, every / rates.dram_Bps)
    return max(0.0, going_in - forward) + max(0.0, coming_back - backward)


def offload_bytes_per_token(scenario: Scenario, ops: list[Op]) -> float:
    """Every block's input, bytes per token: what offload sends out and reads back per token."""
    return float(sum(block_input_bytes_per_token(scenario, block_input_widths(ops)).values()))


def offload_bytes(scenario: Scenario, ops: list[Op], wafer_samples: Sequence[int],
                  micro_batches: Sequence[int]) -> tuple[float, float]:
    """Bytes a micro-batch's block inputs take in the store: the busiest wafer's largest micro-batch's, and all
    wafers' at once (each wafer's shard cut into as many micro-batches, its largest)."""
    per_sample = offload_bytes_per_token(scenario, ops) * scenario.seq_len
    n = len(micro_batches)
    every = sum(max(split_evenly(s, n)) for s in wafer_samples if s > 0)
    return per_sample * max(micro_batches), per_sample * every


def store_room(scenario: Scenario, placement: Placement) -> float | None:
    """Bytes of block inputs the store holds: per wafer (host), for all wafers (MemoryX), or None: no limit."""
    store = scenario.hardware.activation_store
    if store.location == "host":
        return store.capacity_bytes
    mx = scenario.hardware.memoryx
    return max(0.0, mx.dram_total_bytes - placement.dram_bytes - placement.staging_bytes)


def fit_store(scenario: Scenario, ops: list[Op], wafer_samples: Sequence[int], candidates: list[Candidate],
              placement_for: Callable[[Candidate], Placement]) -> list[Candidate]:
    """The candidates whose block inputs fit the store (all but offload ones that do not).

    Raises
    ------
    InfeasibleError
        No candidate is left: ``offload`` was asked for (or was the only mode that fits SRAM) and none of its
        micro-batches fits the store.
    """
    kept: list[Candidate] = []
    refused: list[tuple[Candidate, float, float]] = []
    for cand in candidates:
        room = store_room(scenario, placement_for(cand)) if cand.checkpointing == "offload" else None
        if room is not None:
            one, every = offload_bytes(scenario, ops, wafer_samples, cand.micro_batches)
            need = one if scenario.hardware.activation_store.location == "host" else every
            if need > room:
                refused.append((cand, need, room))
                continue
        kept.append(cand)
    if kept:
        return kept
    cand, need, room = min(refused, key=lambda r: r[1])
    samples = f"{cand.largest} sample{'s' if cand.largest > 1 else ''}"
    if scenario.hardware.activation_store.location == "host":
        field = "hardware.activation_store.capacity_bytes"
        what = f"needs {fmt_bytes(need)} in each wafer's activation store, which holds {fmt_bytes(room)}"
        more = "give the store more room"
    else:
        field = "hardware.activation_store.location"
        what = (f"on all {len([w for w in wafer_samples if w > 0])} wafers needs {fmt_bytes(need)} of MemoryX's DRAM, "
                f"but the model state leaves {fmt_bytes(room)} of it")
        more = "use a MemoryX with more DRAM (hardware.memoryx) or a store on the hosts"
    smaller = " or a smaller training.micro_batch" if cand.largest > 1 else ""
    raise infeasible(
        scenario, field,
        f"offloading the block inputs of a micro-batch of {samples} (every block's) {what}; {more}, or use "
        f"training.activation_checkpointing 'blocks'{smaller}",
    )
