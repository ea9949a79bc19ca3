"""Step 3b (after placement): rank the micro-batching candidates by a fast analytic step time and choose the fastest.

MemoryX streams every weight once per forward and once per backward pass of every micro-batch
(and a third time for a checkpointed block's recompute), so the split of a wafer's samples into
micro-batches and the checkpointing mode set how often the weights cross; larger micro-batches
need more activation SRAM, which ``'blocks'`` checkpointing frees at the price of the recompute.
:func:`choose` weighs every candidate from :func:`~wss.model.plan.micro_batching.micro_batch_candidates`
with :func:`rank`, a few vector operations per candidate (no SimPy, no per-pass loop):

* each streamed pass of a kernel takes ``max(S, C)``, a backward pass ``max(S, C, U)``: ``S`` the
  stream of its bytes over the slowest stage down (MemoryX's DRAM read or network, each SwarmX
  level, the last edge capped by the wafer's I/O, a flash-resident kernel's flash read; each
  chunk no faster than a hop's latency lets the credits through), ``C`` its cycles from the
  cycle model at that micro-batch's token count over the clock (the wafer's intake likewise
  paced by the last hop's latency), ``U`` the gradients over the slowest stage up;
* the non-weight ops add their seconds at the wafer's non-weight rate, while the stream runs ahead
  into the buffers (hiding stream-bound passes' waits, at most what the buffers past the slowest
  stage hold per op); a checkpointed block runs its kernels' and ops' forward again before its
  backward;
* a micro-batch takes no less than MemoryX's optimizer needs to accumulate its gradients, and
  waits for its input where the transfer outlasts the micro-batch before it;
* per step: one fill (the first chunk across every stage), one drain (the last gradient chunk
  up), the first kernel's update and whatever update work the last backward pass leaves queued;
* the runtime's fixed costs (:meth:`Costing.fixed_s`): a switch per weight-kernel pass, a cost per
  micro-batch and one per step, which the wafer pays in series with its work.

MemoryX's rates are the shards' added up, each at the slowest shard's
(:func:`~wss.model.machine.memoryx_rates.memoryx_rates`, ``faults.shards``), as the simulator runs them, so a
slow shard can change the choice.

It leaves out what the closed-form estimate (:mod:`wss.studies.estimate`) adds: the stream
running ahead from one weight pass into the next, and the optimizer's exact queue.
That makes it a little pessimistic where passes alternate between stream- and compute-bound,
the same for every candidate of a run; ``tests/core/test_planner.py`` checks against the
simulator that the candidate it chooses is within 1% of the best one simulated.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from wss.model.kernels.cycles import NnzProfile, kernel_cycles
from wss.model.machine.figures import chunks_buffered, input_bytes_per_sample
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.machine.optimizer_costs import SCALAR_BYTES, OptimizerCost, StateTiers, job_seconds, job_traffic
from wss.model.machine.runtime_costs import fixed_costs_s, weight_passes
from wss.model.machine.swarmx_path import swarmx_path
from wss.model.plan.activation_store import StoreRates, offload_bytes_per_token, store_extra_s, store_rates
from wss.model.plan.choice import CandidateCost, PlanChoice
from wss.model.plan.formats import WeightStream
from wss.model.plan.kernels import chunk_count
from wss.model.plan.micro_batching import Candidate
from wss.model.plan.placement import Placement
from wss.model.scenario import PRECISION_BYTES, Scenario, load_scenario
from wss.model.workload import Op, StreamedKernel, WaferOp

__all__ = ["ALTERNATIVES_KEPT", "Costing", "choose", "rank", "forced_scenario"]

#: Alternatives a :class:`~wss.model.plan.choice.PlanChoice` keeps beside the chosen candidate.
ALTERNATIVES_KEPT = 4


@dataclass(frozen=True)
class Costing:
    """Per-kernel figures that do not depend on the candidate, as arrays in kernel order.

    Built once per plan by :meth:`of`; :meth:`cost` then prices one candidate.
    """

    scenario: Scenario
    specs: tuple[StreamedKernel, ...]
    profiles: tuple[NnzProfile, ...]
    stream_s: np.ndarray  # S: one pass over the slowest stage down (0 when not streamed)
    up_s: np.ndarray  # U: one backward pass's gradients over the slowest stage up
    chunks: np.ndarray  # chunks per pass
    bwd_streamed: np.ndarray  # does the backward pass stream the weights (not a retained output layer)?
    in_block: np.ndarray  # is the kernel recomputed under 'blocks' checkpointing?
    stream_bytes: np.ndarray  # one pass, one wafer
    intake_chunks: np.ndarray  # chunks of each kernel the wafer's ingress buffer holds
    lookahead_s: float  # stream seconds the buffers past the slowest stage hold (median kernel)
    op_count: tuple[int, int]  # non-weight ops, and those inside blocks (recomputed under 'blocks')
    offload_bytes_per_token: float  # every block input's bytes per token (written and read back under 'offload')
    edge_Bps: float  # the wafer's edge: the leaf link, which offloaded activations share
    grad_bytes: float  # one micro-batch's gradients up the wafer's edge
    op_flops: tuple[float, float, float]  # non-weight FLOPs per token: forward, backward, blocks' forward
    acc_s: tuple[float, float]  # MemoryX accumulation of every kernel's gradient: first micro-batch, later ones
    update_s: np.ndarray  # each kernel's update (with and without accumulation): [single, accumulating]
    # The flash channel: each kernel's prefetch read per streamed pass (0 in DRAM); the accumulations' flash
    # reads (first micro-batch, later ones); the updates' flash reads (single, accumulating).
    flash_s: tuple[np.ndarray, tuple[float, float], np.ndarray, np.ndarray]  # ..., then the writes after it
    fill_s: float  # the first chunk across every stage down, and the last gradient chunk up
    input_s: tuple[float, float]  # an input transfer: latency, seconds per sample
    #: The pricing of one-micro-batch candidates when their placement differs (the gradient accumulators,
    #: idle without accumulation, then go to flash before the moments do): see placement.place_state.
    single: Costing | None = None
    #: The activation store's limits (``hardware.activation_store``); None: only the wafer's edge limits offload.
    store: StoreRates | None = None

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
    ) -> Costing:
        hw, s = scenario.hardware, scenario
        sx = hw.swarmx
        tree = swarmx_path(hw)
        hop, depth, edge = tree.hop_latency_s, tree.depth, tree.edge_Bps
        levels = np.array(tree.level_Bps)
        rates = memoryx_rates(scenario)  # the shards' rates added up, each at the slowest shard's (faults.shards)
        dram, net = rates.dram_Bps, rates.network_Bps
        stream_b = np.array([st.stream_bytes for st in streams], dtype=float)
        nnz = np.array([p.nnz for p in profiles], dtype=float)
        read_b = nnz * SCALAR_BYTES
        grad_b = nnz * PRECISION_BYTES[s.training.gradient_precision]
        chunks = np.array([chunk_count(x, s.simulation) for x in stream_b], dtype=float)
        # Chunks each port buffer holds (links.chunks_buffered: by bytes, at least MIN_CHUNKS_BUFFERED).
        b = np.array([chunks_buffered(sx.port_buffer_bytes, x / n) for x, n in zip(stream_b, chunks)])[:, None]
        # Per chunk on each stage, a hop's latency letting b + 1 chunks through per latency + chunk.
        down = np.maximum(read_b / dram, stream_b / net)[:, None] / chunks[:, None]
        link = stream_b[:, None] / levels[None, :] / chunks[:, None]
        link = np.maximum(link, (hop + link) / (b + 1))
        stream_s = chunks * np.maximum(down[:, 0], link.max(axis=1))
        flash = np.array([t == "flash" for t in placement.tiers])
        stream_s = np.where(flash, np.maximum(stream_s, read_b / rates.flash_read_Bps), stream_s)
        up = grad_b[:, None] / np.append(levels[::-1], net)[None, :] / chunks[:, None]
        b_up = np.array([chunks_buffered(sx.port_buffer_bytes, x / n) for x, n in zip(grad_b, chunks)])[:, None]
        up_s = chunks * np.maximum(up, (hop + up) / (b_up + 1)).max(axis=1)
        retain = s.training.retain_output_layer
        wafer_ops = [op for op in ops if isinstance(op, WaferOp)]
        op_flops = (
            sum(op.flops_per_token for op in wafer_ops),
            sum(op.flops_per_token * op.backward_factor for op in wafer_ops),
            sum(op.flops_per_token for op in wafer_ops if op.block is not None),
        )
        owns = np.array([o == i for i, o in enumerate(placement.owners)])
        acc0, acc1, update, channel = _optimizer_terms(scenario, optimizer, nnz, read_b, owns, placement)
        fill = float(down[0, 0] + link[0].sum() + up[0].sum() + 2 * (depth + 1) * hop)
        per_sample = input_bytes_per_sample(s, specs[0].in_features)
        return cls(
            scenario=s,
            specs=tuple(specs),
            profiles=tuple(profiles),
            stream_s=stream_s,
            up_s=up_s,
            chunks=chunks,
            bwd_streamed=np.array([not (retain and k.is_output) for k in specs]),
            in_block=np.array([k.block is not None for k in specs]),
            stream_bytes=stream_b,
            intake_chunks=np.array([chunks_buffered(hw.wafer.ingress_buffer_bytes, x / n)
                                    for x, n in zip(stream_b, chunks)], dtype=float),
            lookahead_s=float(np.median(
                (depth * (b[:, 0] + 1) + np.array([chunks_buffered(hw.wafer.ingress_buffer_bytes, x / n)
                                                   for x, n in zip(stream_b, chunks)])) * stream_s / chunks)),
            op_count=(len(wafer_ops), sum(op.block is not None for op in wafer_ops)),
            offload_bytes_per_token=offload_bytes_per_token(s, ops),
            edge_Bps=float(edge),
            grad_bytes=float(grad_b.sum()),
            op_flops=op_flops,
            acc_s=(float(acc0), float(acc1)),
            update_s=update,
            flash_s=channel,
            fill_s=fill,
            input_s=(hw.inputs.latency_s, max(per_sample / hw.inputs.bandwidth_Bps,
                                               1.0 / hw.inputs.samples_per_s if hw.inputs.samples_per_s else 0.0)),
            store=store_rates(s, wafer_samples),
        )

    def cycles_s(self, tokens: int, cache: dict[Any, Any]) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward seconds of every kernel at ``tokens`` tokens (kernels of one shape costed once)."""
        if ("cycles", tokens) not in cache:
            wafer = self.scenario.hardware.wafer
            seen: dict[tuple, tuple[float, float]] = {}
            fwd, bwd = [], []
            for k, p in zip(self.specs, self.profiles):
                key = (k.kind, p.out_features, p.in_features) if p.col_counts is None else (k.kind, id(p))
                if key not in seen:
                    c = kernel_cycles(k.kind, p, tokens, wafer)
                    seen[key] = (c.forward / wafer.clock_Hz, c.backward / wafer.clock_Hz)
                fwd.append(seen[key][0])
                bwd.append(seen[key][1])
            cache[("cycles", tokens)] = (np.array(fwd), np.array(bwd))
        return cache[("cycles", tokens)]

    def micro_batch(self, tokens: int, blocks: bool, cache: dict[Any, Any]) -> tuple[float, float, float, float]:
        """One micro-batch of ``tokens``: (seconds paced by compute, by the stream, streamed bytes, and the
        share of its weight passes' time spent in the backward sweep, recomputes included)."""
        if ("mb", tokens, blocks) in cache:
            return cache[("mb", tokens, blocks)]
        cf, cb = self.cycles_s(tokens, cache)
        hop, b = self.scenario.hardware.swarmx.hop_latency_s, self.intake_chunks
        # The wafer starts a chunk only after its flight from the last level; its intake holds b chunks.
        cf_p = np.maximum(cf, self.chunks * (hop + cf / self.chunks) / (b + 1))
        cb_p = np.where(self.bwd_streamed, np.maximum(cb, self.chunks * (hop + cb / self.chunks) / (b + 1)), cb)
        s_b = np.where(self.bwd_streamed, self.stream_s, 0.0)
        fwd = np.maximum(cf_p, self.stream_s)
        bwd = np.maximum(np.maximum(cb_p, s_b), self.up_s)
        rec = np.where(self.in_block, fwd, 0.0) if blocks else np.zeros_like(fwd)
        total = fwd + bwd + rec
        compute_paced = np.where(cf_p >= self.stream_s, fwd, 0.0)
        compute_paced += np.where(cb_p >= np.maximum(s_b, self.up_s), bwd, 0.0)
        compute_paced += np.where(self.in_block & (cf_p >= self.stream_s), rec, 0.0) if blocks else 0.0
        wafer = self.scenario.hardware.wafer
        f, fb, fr = self.op_flops
        ops_s = tokens * (f + fb + (fr if blocks else 0.0)) / (wafer.peak_flops * wafer.nonweight_efficiency)
        crossed = self.stream_bytes.sum() + (self.stream_bytes * self.bwd_streamed).sum()
        crossed += (self.stream_bytes * self.in_block).sum() if blocks else 0.0
        # While the wafer runs a non-weight op, or a compute-bound pass that leaves the stream spare time,
        # the stream runs ahead into the buffers (at most what they hold past the slowest stage), which
        # hides stream time of the stream-bound passes.
        deficit = float(np.maximum(0.0, fwd - cf_p).sum() + np.maximum(0.0, bwd - cb_p).sum())
        deficit += float(np.where(self.in_block, np.maximum(0.0, fwd - cf_p), 0.0).sum()) if blocks else 0.0
        spare_f = np.maximum(0.0, cf_p - self.stream_s)
        spare_b = np.where(self.bwd_streamed, np.maximum(0.0, cb_p - np.maximum(s_b, self.up_s)), 0.0)
        spare = float(spare_f.sum() + spare_b.sum())
        spare += float(np.where(self.in_block, spare_f, 0.0).sum()) if blocks else 0.0
        banks = int((spare_f > 0).sum() + (spare_b > 0).sum())
        banks += int((self.in_block & (spare_f > 0)).sum()) if blocks else 0
        n_ops, n_block_ops = self.op_count
        gaps = 2 * n_ops + (n_block_ops if blocks else 0) + banks
        hidden = min(ops_s + spare, deficit, gaps * self.lookahead_s)
        sweep = float(total.sum())
        back = float((bwd + rec).sum()) / sweep if sweep > 0 else 0.5
        out = (float(compute_paced.sum()) + ops_s, float(total.sum() - compute_paced.sum()) - hidden, float(crossed),
               back)
        cache[("mb", tokens, blocks)] = out
        return out

    def fixed_s(self, micro_batches: int, blocks: bool) -> float:
        """The runtime's fixed costs of one step: a switch per weight-kernel pass, then per micro-batch and step."""
        passes = weight_passes(len(self.specs), int(self.in_block.sum()) if blocks else 0)
        switches, runtime = fixed_costs_s(self.scenario.hardware.runtime, micro_batches, passes)
        return runtime + switches

    def offload_s(self, tokens: int, busy_s: float, crossed_bytes: float, back: float) -> float:
        """What offloading a micro-batch's block inputs adds: their bytes cross the wafer's edge out (with the
        gradients) and back (with the weights), in whatever time those links have to spare; and the activation
        store, where it is slower (:func:`~wss.model.plan.activation_store.store_extra_s`, ``back`` the share of
        ``busy_s`` in the backward sweep)."""
        act = tokens * self.offload_bytes_per_token / self.edge_Bps
        spare_down = max(0.0, busy_s - crossed_bytes / self.edge_Bps)
        spare_up = max(0.0, busy_s - self.grad_bytes / self.edge_Bps)
        edge = max(0.0, act - spare_down, act - spare_up)
        if self.store is None:
            return edge
        store = store_extra_s(self.store, tokens * self.offload_bytes_per_token, busy_s, back, crossed_bytes)
        return max(edge, store)

    def flash_channel_s(self, micro_batches: int, blocks: bool) -> float:
        """Seconds of flash-channel work in one step: prefetches, then the optimizer's flash reads."""
        prefetch, acc, upd, _ = self.flash_s
        passes = 1.0 + self.bwd_streamed + (self.in_block if blocks else 0.0)
        total = micro_batches * float((prefetch * passes).sum())
        total += sum(acc[min(m, 1)] for m in range(micro_batches - 1))
        return total + float(upd[1 if micro_batches > 1 else 0])

    def cost(self, cand: Candidate, cache: dict[Any, Any]) -> CandidateCost:
        """The analytic step time of one candidate (see the module docstring)."""
        if self.single is not None and len(cand.micro_batches) == 1:
            return self.single.cost(cand, cache.setdefault("single placement", {}))
        tokens_per_sample = self.scenario.seq_len
        blocks = cand.checkpointing in ("blocks", "offload")
        offload = cand.checkpointing == "offload"
        compute = stream = crossed = other = 0.0
        latency, per_sample = self.input_s
        prev = 0.0
        last_bwd = 0.0
        for m, samples in enumerate(cand.micro_batches):
            c, st, x, back = self.micro_batch(samples * tokens_per_sample, blocks, cache)
            if offload:
                st += self.offload_s(samples * tokens_per_sample, c + st, x, back)
            inp = latency + samples * per_sample
            # The optimizer accumulates every kernel's gradient once per micro-batch, in the background.
            acc = self.acc_s[min(m, 1)] if m < len(cand.micro_batches) - 1 else 0.0
            slack = max(0.0, acc - (c + st))
            first_input = inp if m == 0 else 0.0
            other += (0.0 if m == 0 else max(0.0, inp - prev)) + slack
            compute, stream, crossed = compute + c, stream + st, crossed + x
            prev = c + st + slack
            last_bwd = back * (c + st)  # the updates run while the last backward sweep (and its recomputes) runs
        other += self.fixed_s(len(cand.micro_batches), blocks)
        accumulating = len(cand.micro_batches) > 1
        update = self.update_s[:, 1 if accumulating else 0]
        # The first kernel's update arrives last; updates the last backward sweep could not absorb queue before it.
        boundary = self.fill_s + update[0]
        other += boundary + max(0.0, float(update.sum()) - last_bwd)
        # The step's first input: in the first step it arrives while the first chunk fills the path; in a
        # later one it was sent while the previous step ended (its last micro-batch, drain, update, fill).
        steps = self.scenario.training.steps
        later = max(0.0, first_input - (boundary + prev))
        other += (max(0.0, first_input - self.fill_s) + (steps - 1) * later) / steps
        total = compute + stream + other
        # One flash channel serves every prefetch and the optimizer's flash reads, one at a time: the step is
        # no shorter than that work and the writes left after its last read.
        channel = self.flash_channel_s(len(cand.micro_batches), blocks)
        if channel > 0:
            bound = channel + float(self.flash_s[3][1 if accumulating else 0])
            if bound > total:
                other += bound - total
                total = bound
        parts = {"compute": compute, "stream": stream, "other": other}
        return CandidateCost(
            checkpointing=cand.checkpointing,
            micro_batches=cand.micro_batches,
            step_time_s=total,
            compute_s=compute,
            stream_s=stream,
            other_s=other,
            bound_by=max(parts, key=lambda k: parts[k]),
            weight_crossings=crossed / float(self.stream_bytes.sum()) if self.stream_bytes.sum() else 0.0,
            sram_bytes_needed=cand.sram_bytes_needed,
        )


def _optimizer_terms(
    scenario: Scenario, optimizer: OptimizerCost, nnz: np.ndarray, read_b: np.ndarray, owns: np.ndarray,
    placement: Placement,
) -> tuple[float, float, np.ndarray, tuple[np.ndarray, tuple[float, float], np.ndarray, np.ndarray]]:
    """The optimizer's jobs and the flash channel, per kernel, for :meth:`Costing.of`.

    Returns the accumulation of every kernel's gradient (first micro-batch, later ones), each
    kernel's update ``[single, accumulating]``, and the flash channel's work: each kernel's
    prefetch read per streamed pass, the accumulations' and the updates' flash reads, and the writes
    left after the channel's last read.  Each job is priced as it runs alone
    (:func:`~wss.model.machine.optimizer_costs.job_seconds`), each state component at its tier:
    the DRAM the optimizer shares with the stream is left to the simulator.
    """
    mx = memoryx_rates(scenario)  # each at the slowest shard's rate (faults.shards), as the simulator runs them
    rates = (mx.dram_Bps, mx.flash_read_Bps, mx.flash_write_Bps, mx.optimizer_flops)
    incoming = PRECISION_BYTES[scenario.training.gradient_precision]
    # (kind, first, accumulated) of the four jobs a kernel can see: accumulations of the first and of later
    # micro-batches, and the update without and with an accumulated gradient.
    kinds = (("accumulate", True, False), ("accumulate", False, False), ("update", True, False),
             ("update", True, True))
    seconds = np.zeros((len(nnz), 4))
    channel_s = np.zeros((len(nnz), 4))
    priced: dict[tuple[float, StateTiers], list[tuple[float, float]]] = {}  # kernels of one shape priced once
    for i, (n, tiers) in enumerate(zip(nnz, placement.component_tiers)):
        if not owns[i]:
            continue
        if (n, tiers) not in priced:
            priced[(n, tiers)] = [
                job_seconds(job_traffic(optimizer, kind, float(n), tiers, first=first, accumulated=acc,
                                        incoming_bytes=float(n) * incoming), *rates)
                for kind, first, acc in kinds
            ]
        seconds[i], channel_s[i] = zip(*priced[(n, tiers)])
    update, upd_read = seconds[:, 2:], channel_s[:, 2:]
    # After the channel's last read (the update of the first kernel with flash-resident state, which comes
    # last), the optimizer still writes that kernel's state.
    in_flash = upd_read[:, 0] > 0
    last = int(np.argmax(in_flash)) if bool(in_flash.any()) else 0
    weights_in_flash = np.array([t == "flash" for t in placement.tiers])
    channel = (np.where(weights_in_flash, read_b / rates[1], 0.0),
               (float(channel_s[:, 0].sum()), float(channel_s[:, 1].sum())),
               upd_read.sum(axis=0), update[last] - upd_read[last])
    return float(seconds[:, 0].sum()), float(seconds[:, 1].sum()), update, channel


def rank(costing: Costing, candidates: Sequence[Candidate]) -> list[CandidateCost]:
    """Every candidate's analytic cost, fastest first (ties: fewer micro-batches, then ``'none'``)."""
    cache: dict[Any, Any] = {}
    costs = [costing.cost(c, cache) for c in candidates]
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
