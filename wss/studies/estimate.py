"""Closed-form step-time estimate: the simulator's machine, from the same Plan, without SimPy.

``wss.studies.estimate.estimate(scenario) -> Estimate`` times one training step in milliseconds
of wall time where the simulator takes seconds; a sweep can use it as a cheap fidelity level.  It
never simulates.  docs/fidelity.md derives every term and compares the result with the simulator.

It is a second model of the *timing* of the simulator's machine, not an independent model of the
machine.  What it shares with the simulator:

* **imported**: the plan (:func:`wss.model.plan.make_plan`: the ops, each kernel's streamed,
  gradient and MemoryX-read bytes, chunks, tier, non-zeros, tied-state owner and cycles per
  micro-batch size from the cycle model; the non-weight ops' seconds; the micro-batches; the tree
  depth; the optimizer's per-parameter costs), the scenario's hardware figures, the byte constants
  (fp32 state scalars, token ids, precisions), and the pacing rule
  (:func:`wss.model.result.results.pass_pacing`, :func:`~wss.model.result.results.bound_category`);
* **written again after the simulator's rules**: the pass order (:mod:`wss.model.program`), the
  per-stage costs (a MemoryX chunk takes ``max(read / DRAM, sent / network)``, a link
  ``bytes / bandwidth`` plus a hop latency with the leaf edge capped by the wafer's I/O, an
  optimizer job the coprocessor's formula, an input ``latency + bytes / bandwidth``), and the
  buffer-credit layout (the chunks each SwarmX port buffer holds, by bytes and at least two, waiting
  at each level and at the wafer's intake, one in serialisation), which sets the caps and the
  credit pacing below.

What it replaces by closed forms is the event-driven part: how the stream overlaps compute, chunks
queue stage by stage, credits flow back, the optimizer queues its jobs, the flash channel is shared,
steps meet at the iteration boundary, and identical micro-batches are folded.  Agreement with the
simulator checks those mechanics given the same plan (and a slip in either copy of a rewritten
rule).  It cannot catch an error in the plan, the cycle model, the byte counts, the per-stage cost
rules or the pacing definition, which both use; compute agrees by construction (both add the
plan's cycles), so its agreement shows only that every pass ran once.

Per pass (forward, block recompute and backward of every kernel, in every micro-batch):

* ``S`` - the weights' stream time over the slowest stage of the way down: MemoryX (DRAM read
  and network, which overlap), each SwarmX level, the last edge capped by the wafer's I/O; a
  flash-resident kernel streams no faster than the flash channel reads it;
* ``C`` - the wafer's cycles from the plan over the clock (the plan's busiest engine row, so
  the tail-worker effect is the plan's; non-weight work has only a ``C``);
* ``U`` - the gradients' time over the slowest stage of the way up (backward passes);
* the pass takes ``max(C + max(0, s - lead), S - lead + C/n, lag + U - cap_up)`` for ``n``
  chunks of stream time ``s = S/n``: the wafer needs the first chunk before it starts and the
  last one before it ends, and it cannot hand gradients to a full way up.  ``lead`` is the
  stream work already done for this pass while the wafer was busy with earlier ones, ``lag``
  the gradient work still queued on the way up; both carry from pass to pass (Lindley's
  recursion in fluid form) and are capped by the chunks the buffers hold past the slowest
  stage (``chunks_buffered`` per level).  A hop whose latency outlasts its ``b``
  buffered chunks paces them: ``b + 1`` chunks per latency plus chunk (credit flow control).
  One line of arithmetic per pass, not an event simulation; identical micro-batches are
  computed once.

Per step:

* **fill** - the step's first chunk crosses every stage once: its serialisation on every stage
  but the slowest (which the pass already counts) and one hop latency per hop;
* **drain** - the first kernel's last gradient chunk climbs the tree to MemoryX after whatever
  gradient work is still queued;
* **update** - MemoryX's optimizer is one FIFO server taking every accumulation and update in
  arrival order, and the first kernel's update, which arrives last, ends the step.  A FIFO
  server free at ``f`` that gets jobs ``(a_j, s_j)`` is free again at
  ``max(f, max_j (a_j - s_1 - ... - s_{j-1})) + sum_j s_j``: one line per micro-batch.  What
  the step waits beyond the first kernel's own update is the optimizer-bound term;
* **flash** - one flash channel serves every prefetch and every flash read of the optimizer;
  when that work (and the updates left after its last read) outlasts the step, the step
  stretches to it (the flash-bound term);
* **input** - inputs are double-buffered: micro-batch ``m``'s transfer starts as the wafer
  starts ``m - 1``, so the wafer waits ``max(0, input - previous micro-batch)``.  The run's first
  micro-batch waits for its whole transfer while the stream starts (the fill hides under it).

The simulator's ``step_time_s`` is the mean over ``training.steps`` steps, each holding one fill,
one drain and one update of the first kernel (the iteration-boundary bubble); so is this.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from wss.model.machine.figures import chunks_buffered, input_bytes_per_sample
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.machine.optimizer_costs import job_seconds, job_traffic
from wss.model.machine.runtime_costs import fixed_costs_s, weight_passes
from wss.model.machine.swarmx_path import edge_Bps, swarmx_path
from wss.model.plan import KernelPlan, Plan, make_plan
from wss.model.plan.activation_store import offload_bytes_per_token, store_extra_s, store_rates
from wss.model.result.results import BREAKDOWN_CATEGORIES, bound_category, pass_pacing
from wss.model.scenario import PRECISION_BYTES, Scenario, load_scenario
from wss.model.workload import WaferOp

__all__ = ["Estimate", "estimate", "estimate_plan", "TERMS"]

#: The additive terms of one step (``Estimate.terms_s``), in the order they are reported.
TERMS = ("passes", "fill", "drain", "update", "optimizer_tail", "flash_excess", "input", "switch", "runtime",
         "offload")


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


# --------------------------------------------------------------------------------------- the path


@dataclass(frozen=True)
class _Way:
    """One kernel's figures on the way down and up."""

    stream_s: float  # S: one pass over the slowest stage down
    up_s: float  # U: one backward pass's gradients over the slowest stage up
    slots_down: int  # chunks that can wait past the slowest stage down
    slots_up: int  # chunks that can wait before (and on) the slowest stage up
    fill_s: float  # a chunk's crossing beyond the slowest stage, plus hop latencies
    climb_s: float  # a gradient chunk's crossing to MemoryX, hop latencies included
    up_chunk_s: float  # a gradient chunk on the slowest stage up
    bottleneck: str


@dataclass(frozen=True)
class _Path:
    """Bandwidths of every stage between MemoryX and the wafer, and the hop latency."""

    down: tuple[tuple[str, float], ...]  # SwarmX levels, root to leaf; the last capped by the wafer's I/O
    up: tuple[tuple[str, float], ...]  # SwarmX levels, leaf to root, then MemoryX's network ports
    dram_Bps: float
    net_Bps: float
    flash_read_Bps: float
    flash_write_Bps: float
    opt_flops: float
    hop_s: float
    port_buffer_bytes: int
    ingress_buffer_bytes: int

    @classmethod
    def of(cls, plan: Plan) -> _Path:
        s = plan.scenario
        hw = s.hardware
        tree = swarmx_path(hw)
        levels = tuple((f"swarmx.l{lv}", bw) for lv, bw in enumerate(tree.level_Bps, start=1))
        rates = memoryx_rates(s)  # the shards' rates added up, each at the slowest shard's (faults.shards)
        net = rates.network_Bps
        return cls(
            down=levels,
            up=tuple(reversed(levels)) + (("memoryx.network", net),),
            dram_Bps=rates.dram_Bps,
            net_Bps=net,
            flash_read_Bps=rates.flash_read_Bps,
            flash_write_Bps=rates.flash_write_Bps,
            opt_flops=rates.optimizer_flops,
            hop_s=tree.hop_latency_s,
            port_buffer_bytes=tree.port_buffer_bytes,
            ingress_buffer_bytes=hw.wafer.ingress_buffer_bytes,
        )

    def slots(self, buffer_bytes: int, chunk_bytes: float) -> int:
        """Chunks of ``chunk_bytes`` a buffer of ``buffer_bytes`` holds (as the simulator's ByteStore)."""
        return chunks_buffered(buffer_bytes, chunk_bytes)

    def way(self, kp: KernelPlan) -> _Way:
        n = kp.n_chunks
        b = self.slots(self.port_buffer_bytes, kp.stream_bytes / n)
        b_in = self.slots(self.ingress_buffer_bytes, kp.stream_bytes / n)
        b_up = self.slots(self.port_buffer_bytes, kp.grad_bytes / n)
        # Down: MemoryX reads (DRAM) and sends (network) each chunk at once, then every SwarmX level.
        names = ["memoryx"] + [name for name, _ in self.down]
        per_chunk = [max(kp.read_bytes / self.dram_Bps, kp.stream_bytes / self.net_Bps) / n]
        per_chunk += [kp.stream_bytes / bw / n for _, bw in self.down]
        # A level starts a chunk only after its flight from the level above, and only b chunks wait
        # in its inbox: when a hop's latency outlasts b chunks, b + 1 chunks cross per latency + chunk.
        paced = [per_chunk[0]] + [max(t, (self.hop_s + t) / (b + 1)) for t in per_chunk[1:]]
        slow = max(range(len(paced)), key=lambda i: (paced[i], i))  # the last of equals
        # What has crossed the slowest stage: the chunk it holds while blocked, each later level's
        # inbox and wire, the wafer's intake.  Chunks before it still have to cross it.
        slots_down = 1 + (len(paced) - 1 - slow) * (b + 1) + b_in
        fill = sum(per_chunk) - per_chunk[slow] + (len(self.down) + 1) * self.hop_s
        # Up: the wafer's outlet feeds the leaf level; gradients queue up to the slowest stage.
        up_chunk = [kp.grad_bytes / bw / n for _, bw in self.up]
        up_paced = [max(t, (self.hop_s + t) / (b_up + 1)) for t in up_chunk]
        slow_up = min(range(len(up_paced)), key=lambda i: (-up_paced[i], i))  # the first of equals
        # ... and lands in MemoryX's DRAM (the gradient intake's write) before the optimizer can use it.
        climb = sum(t + self.hop_s for t in up_chunk) + kp.grad_bytes / n / self.dram_Bps
        return _Way(n * paced[slow], n * up_paced[slow_up], slots_down, (slow_up + 1) * (b_up + 1), fill, climb,
                    up_paced[slow_up], names[slow])


# ------------------------------------------------------------------------------------- optimizer


def _job_s(path: _Path, plan: Plan, kp: KernelPlan, kind: str, micro_batch: int) -> tuple[float, float]:
    """Service time of one optimizer job (update or accumulation) and its flash-channel seconds.

    An update moves the optimizer's state scalars (and the fp32 gradient accumulator when there
    are micro-batches); an accumulation adds one micro-batch's gradient into that accumulator; both
    read the incoming summed gradient from DRAM.  Each state component moves at its own tier, and
    the job's DRAM traffic, flash read-then-write and FLOPs run side by side (the optimizer's own
    closed form, :func:`~wss.model.machine.optimizer_costs.job_seconds`).  The DRAM it shares
    with the stream and the gradient intake is priced at its full rate, as if the job had it alone.
    """
    accumulated = kind == "update" and (len(plan.micro_batches) > 1 or plan.shares_accumulator(kp.index))
    first = micro_batch == 0 and not plan.shares_accumulator(kp.index)
    incoming = kp.nnz * PRECISION_BYTES[plan.scenario.training.gradient_precision]
    t = job_traffic(plan.optimizer, kind, kp.nnz, kp.state_tiers, first=first, accumulated=accumulated,
                    incoming_bytes=incoming)
    return job_seconds(t, path.dram_Bps, path.flash_read_Bps, path.flash_write_Bps, path.opt_flops)


# ---------------------------------------------------------------------------------------- passes


@dataclass(frozen=True)
class _Item:
    """One pass of one micro-batch as the estimate sees it."""

    kernel: int | None  # kernel index, None for non-weight work
    phase: str
    stream_s: float  # S (0 when nothing streams)
    compute_s: float  # C
    paced_s: float  # C, or more when the intake's credits cannot cover the last hop's latency
    up_s: float  # U (0 unless gradients go up)
    chunks: int  # chunks streamed (0 when nothing streams)
    slots_down: int
    slots_up: int
    up_chunks: int  # gradient chunks sent up (0 unless backward)
    flash_s: float  # flash-channel seconds to prefetch this pass's weights
    flash_share: float = 0.0  # the part of a stream wait due to the prefetch (flash slower than the stream)


def _items(plan: Plan, path: _Path, ways: list[_Way], tokens: int) -> list[_Item]:
    """The passes of one micro-batch in execution order: forward 1..L, then backward L..1 with each
    checkpointed block recomputed just before its backward.

    The rule of :mod:`wss.model.program`, written again rather than imported, so that a slip in
    either copy shows as a disagreement."""
    clock = plan.scenario.hardware.wafer.clock_Hz
    retain = plan.scenario.training.retain_output_layer
    recompute = plan.checkpointing in ("blocks", "offload")

    def item(pos: int, phase: str) -> _Item:
        op = plan.ops[pos]
        if isinstance(op, WaferOp):
            fwd, bwd = plan.wafer_op_seconds[(pos, tokens)]
            t = bwd if phase == "backward" else fwd
            return _Item(None, phase, 0.0, t, t, 0.0, 0, 0, 0, 0, 0.0)
        kp = plan.kernels[plan.kernel_of_op[pos]]
        w = ways[kp.index]
        cyc = kp.cycles[tokens]
        backward = phase == "backward"
        streamed = not (backward and retain and op.is_output)
        flash = kp.read_bytes / path.flash_read_Bps if streamed and kp.tier == "flash" else 0.0
        c = (cyc.backward if backward else cyc.forward) / clock
        # The wafer starts a chunk only after its flight from the last level, and the intake holds b.
        b_in = path.slots(path.ingress_buffer_bytes, kp.stream_bytes / kp.n_chunks)
        paced = max(c, kp.n_chunks * (path.hop_s + c / kp.n_chunks) / (b_in + 1)) if streamed else c
        return _Item(
            kp.index,
            phase,
            max(w.stream_s, flash) if streamed else 0.0,  # a flash-resident kernel streams no faster than it is read
            c,
            paced,
            w.up_s if backward else 0.0,
            kp.n_chunks if streamed else 0,
            w.slots_down,
            w.slots_up,
            kp.n_chunks if backward else 0,
            flash,
            max(0.0, 1.0 - w.stream_s / flash) if streamed and flash > 0 else 0.0,
        )

    out = [item(pos, "forward") for pos in range(len(plan.ops))]
    blocks: dict[int, list[int]] = {}
    for pos, op in enumerate(plan.ops):
        if op.block is not None:
            blocks.setdefault(op.block, []).append(pos)
    done: set[int] = set()
    for pos in range(len(plan.ops) - 1, -1, -1):
        b = plan.ops[pos].block
        if recompute and b is not None and b not in done:
            done.add(b)
            out += [item(r, "recompute") for r in blocks[b]]
        out.append(item(pos, "backward"))
    return out


def _windows(times: list[float], slots: list[int], at: list[int], ahead: bool) -> list[float]:
    """Sum of chunk times over a window of ``slots[at]`` chunks for each index in ``at``.

    ``ahead``: the window begins at the chunk and looks forward; otherwise it ends at the chunk
    and looks back.  Micro-batches repeat, so the sequence of chunks wraps around."""
    if not times:
        return [0.0] * len(at)
    n = len(times)
    reps = max(slots) // n + 1
    prefix = np.concatenate(([0.0], np.cumsum(np.tile(np.asarray(times, dtype=float), 2 * reps + 1))))
    i = reps * n + np.asarray(at, dtype=np.int64) % n  # a copy of each chunk with room on both sides
    k = np.asarray(slots, dtype=np.int64)[i % n]
    sums = prefix[i + k] - prefix[i] if ahead else prefix[i + 1] - prefix[i + 1 - k]
    return sums.tolist()


def _caps(items: list[_Item]) -> tuple[list[float], list[float]]:
    """What the buffers can hold, per pass: the stream work past the slowest stage down from its
    first chunk on (the cap of the lead), and the gradient work up to the slowest stage up
    ending with its last gradient chunk (the cap of the lag).  Buffers count chunks, so with
    chunks of different sizes the caps follow the chunks actually queued."""
    down_t: list[float] = []
    up_t: list[float] = []
    down_k: list[int] = []
    up_k: list[int] = []
    starts_down: list[int] = []
    ends_up: list[int] = []
    for it in items:
        starts_down.append(len(down_t))
        if it.chunks:
            down_t += [it.stream_s / it.chunks] * it.chunks
            down_k += [it.slots_down] * it.chunks
        if it.up_chunks:
            up_t += [it.up_s / it.up_chunks] * it.up_chunks
            up_k += [it.slots_up] * it.up_chunks
        ends_up.append(len(up_t) - 1)
    return _windows(down_t, down_k, starts_down, ahead=True), _windows(up_t, up_k, ends_up, ahead=False)


@dataclass
class _Sweep:
    """What one micro-batch took, from the stream's lead and the gradients' lag when it began."""

    duration: float = 0.0
    compute: float = 0.0
    flash: float = 0.0  # flash-channel seconds of the prefetches
    flash_wait: float = 0.0  # the wafer's waits due to prefetches
    lead_out: float = 0.0
    lag_out: float = 0.0
    ends: list[float] = field(default_factory=list)  # end of each pass from the micro-batch's start
    lags: list[float] = field(default_factory=list)  # gradient work queued at each pass's end
    paced: dict[str, float] = field(default_factory=dict)  # pass seconds by what paced them (paced_by)


def _sweep(items: list[_Item], caps: tuple[list[float], list[float]], lead: float, lag: float) -> _Sweep:
    """One micro-batch, pass by pass (see the module docstring for the formula)."""
    lead_caps, lag_caps = caps
    out = _Sweep()
    t = 0.0
    n = len(items)
    for i, it in enumerate(items):
        if it.chunks:
            s = it.stream_s / it.chunks
            dur = max(it.paced_s + max(0.0, s - lead), it.stream_s - lead + it.paced_s / it.chunks)
        else:
            dur = it.compute_s
        if it.up_chunks:
            # The last gradient chunk goes out when the way up has room, and only once it is computed.
            dur = max(dur, lag + it.up_s - lag_caps[i])
            lag = max(it.up_s / it.up_chunks, lag + it.up_s - dur)
        else:
            lag = max(0.0, lag - dur)
        # The stream never idles while the buffers have room: it runs ahead by what the pass left over.
        lead = min(lead_caps[(i + 1) % n], lead - it.stream_s + dur)
        t += dur
        out.compute += it.compute_s
        out.flash += it.flash_s
        wait = max(0.0, dur - it.compute_s)  # all for the weight path: updates and inputs are other terms
        out.flash_wait += wait * it.flash_share
        pace = pass_pacing(it.compute_s, {"flash": wait * it.flash_share, "stream": wait * (1.0 - it.flash_share)})
        for c, v in pace.items():
            out.paced[c] = out.paced.get(c, 0.0) + v
        out.ends.append(t)
        out.lags.append(lag)
    out.duration, out.lead_out, out.lag_out = t, lead, lag
    return out


# -------------------------------------------------------------------------------------- the step


@dataclass(frozen=True)
class _Step:
    """The additive terms of one step."""

    passes: float
    compute: float
    flash_wait: float
    channel: float  # flash-channel seconds of the step (prefetch and the optimizer's flash reads)
    after_channel: float  # optimizer work left after the channel's last read
    drain: float
    update: float
    queue: float
    input_wait: float  # waits for the inputs of micro-batches after the first
    last_micro_batch: float  # the wafer's time on the last micro-batch (its input wait included)
    paced: dict[str, float]  # pass seconds by what paced them


class _Model:
    """The estimate's pieces for one plan; each micro-batch size's passes are built once."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.path = _Path.of(plan)
        self.ways = [self.path.way(kp) for kp in plan.kernels]
        self._items: dict[int, tuple[list[_Item], tuple[list[float], list[float]]]] = {}
        self._memo: dict[tuple[int, float, float], _Sweep] = {}
        self._arrival_memo: dict[int, list[tuple[int, float]]] = {}
        self._fifo_memo: dict[tuple[int, tuple[str, int]], tuple[float, float, float]] = {}

    def items(self, tokens: int) -> tuple[list[_Item], tuple[list[float], list[float]]]:
        if tokens not in self._items:
            its = _items(self.plan, self.path, self.ways, tokens)
            self._items[tokens] = (its, _caps(its))
        return self._items[tokens]

    def _arrivals(self, its: list[_Item], sw: _Sweep) -> list[tuple[int, float]]:
        """(kernel, when its gradient reaches MemoryX from the micro-batch's start) per backward pass."""
        key = id(sw)
        if key not in self._arrival_memo:
            out = []
            for it, end, lag in zip(its, sw.ends, sw.lags):
                if it.kernel is not None and it.phase == "backward":
                    w = self.ways[it.kernel]
                    out.append((it.kernel, end + max(0.0, lag - w.up_chunk_s) + w.climb_s))
            self._arrival_memo[key] = out
        return self._arrival_memo[key]

    def input_s(self, micro_batch: int) -> float:
        """Transfer time of one micro-batch's input to the wafer."""
        s = self.plan.scenario
        inp = s.hardware.inputs
        per_sample = input_bytes_per_sample(s, self.plan.kernels[0].kernel.in_features)
        samples = self.plan.micro_batches[micro_batch]
        prepare = samples / inp.samples_per_s if inp.samples_per_s else 0.0
        return inp.latency_s + max(samples * per_sample / inp.bandwidth_Bps, prepare)

    def _fifo(
        self, its: list[_Item], sw: _Sweep, kind: tuple[str, int], svc: list[float]
    ) -> tuple[float, float, float]:
        """One micro-batch's optimizer jobs, in arrival order: (max_j a_j - sum_{i<j} s_i, sum s, last a)."""
        key = (id(sw), kind)
        if key not in self._fifo_memo:
            jobs = sorted(self._arrivals(its, sw), key=lambda kj: kj[1])
            best, done = -float("inf"), 0.0
            for k, a in jobs:
                best = max(best, a - done)
                done += svc[k]
            self._fifo_memo[key] = (best, done, jobs[-1][1])
        return self._fifo_memo[key]

    def _micro_batches(self, lead: float) -> tuple[list[tuple[list[_Item], _Sweep]], list[float]]:
        """Each micro-batch's passes and sweep, and its wait for input, for a step starting with ``lead``."""
        lag = 0.0
        runs: list[tuple[list[_Item], _Sweep]] = []
        waits: list[float] = []
        for m, mb in enumerate(self.plan.micro_batches):
            tokens = mb * self.plan.tokens_per_sample
            its, caps = self.items(tokens)
            # Inputs are double-buffered: micro-batch m's transfer starts as the wafer starts m - 1.
            wait = max(0.0, self.input_s(m) - runs[-1][1].duration) if m else 0.0
            if wait:  # the stream runs ahead and the gradients drain while the wafer waits
                lead, lag = min(caps[0][0], lead + wait), max(0.0, lag - wait)
            waits.append(wait)
            key = (tokens, lead, lag)
            if key not in self._memo:
                self._memo[key] = _sweep(its, caps, lead, lag)
            sw = self._memo[key]
            runs.append((its, sw))
            # Identical micro-batches settle on one lead and lag: snap to them so the rest repeat.
            tol = 1e-12 * sw.duration
            lead = lead if abs(sw.lead_out - lead) <= tol else sw.lead_out
            lag = lag if abs(sw.lag_out - lag) <= tol else sw.lag_out
        return runs, waits

    def _optimizer(self, runs: list[tuple[list[_Item], _Sweep]], waits: list[float]) -> tuple[float, float, float]:
        """The step's drain, the first kernel's own update and the optimizer's queue ahead of it.

        Gradients reach MemoryX after the gradient work queued ahead of them and their climb; the
        optimizer takes accumulations and updates in arrival order (one FIFO server, unbounded
        queue); the first kernel's update, the last job, ends the step.
        """
        plan, path = self.plan, self.path
        n_mb = len(plan.micro_batches)
        services = {kind: [_job_s(path, plan, kp, kind[0] if kp.owns_state else "accumulate", kind[1])[0]
                           for kp in plan.kernels]
                    for kind in {("accumulate", min(m, 1)) for m in range(n_mb - 1)} | {("update", n_mb - 1)}}
        start = free = 0.0
        arrival = 0.0
        for m, (its, sw) in enumerate(runs):
            start += waits[m]
            kind = ("update", n_mb - 1) if m == n_mb - 1 else ("accumulate", min(m, 1))
            # A FIFO server fed jobs (a_j, s_j) in order, free at f, is free again at
            # max(f, max_j (a_j - s_1 - ... - s_{j-1})) + sum_j s_j: one line per micro-batch.
            lead_in, total, last = self._fifo(its, sw, kind, services[kind])
            free = max(free, start + lead_in) + total
            arrival = start + last
            start += sw.duration
        own = services[("update", n_mb - 1)][0]
        drain = arrival - start
        queue = free - arrival - own
        queue = queue if queue > 1e-9 * (own + drain) else 0.0  # rounding, not a queue
        return drain, own, queue

    def step(self, lead: float) -> _Step:
        """One step whose first pass finds ``lead`` seconds of its stream already done."""
        plan, path = self.plan, self.path
        n_mb = len(plan.micro_batches)
        runs, waits = self._micro_batches(lead)
        passes = sum(sw.duration for _, sw in runs)
        compute = sum(sw.compute for _, sw in runs)

        # The flash channel serves every prefetch and every flash read of the optimizer, one at a time.
        channel = sum(sw.flash for _, sw in runs)
        acc_read = [sum(_job_s(path, plan, kp, "accumulate", m)[1] for kp in plan.kernels) for m in (0, 1)]
        channel += sum(acc_read[min(m, 1)] for m in range(n_mb - 1))

        drain, own, queue = self._optimizer(runs, waits)
        # After the channel's last read (the last flash-resident update), the optimizer still writes
        # that kernel and updates the DRAM-resident kernels queued behind it.
        updates = [
            (plan.kernels[it.kernel], it)
            for it in runs[-1][0]
            if it.kernel is not None and it.phase == "backward" and plan.kernels[it.kernel].owns_state
        ]
        after = 0.0
        for kp, _ in updates:
            service, read = _job_s(path, plan, kp, "update", n_mb - 1)
            channel += read
            after = service - read if read else after + service
        flash_wait = sum(sw.flash_wait for _, sw in runs)
        last = waits[-1] + runs[-1][1].duration
        paced = {c: math.fsum(sw.paced.get(c, 0.0) for _, sw in runs) for c in BREAKDOWN_CATEGORIES}
        return _Step(passes, compute, flash_wait, channel, after, drain, own, queue, sum(waits), last, paced)


# ----------------------------------------------------------------------------------------- the run


@dataclass(frozen=True)
class _Run:
    """The run's first step and every later one, and the waits at their starts."""

    opening: _Step
    later: _Step
    input_wait: float  # the first input's transfer (the run's first micro-batch waits for all of it)
    late_input: float  # how long a later step's first micro-batch waits for its input
    fill_open: float  # the part of the first step's fill not hidden under its input wait
    fill: float  # a later step's fill


def _run(model: _Model, n_steps: int) -> _Run:
    """Estimate the opening step and a later one.

    The run's first micro-batch waits for its input while the stream starts: the fill hides
    under the wait and the stream gets a head start (as far as the buffers allow).  Later
    steps' first inputs arrive during the previous step.
    """
    plan, way = model.plan, model.ways[0]
    input_wait = model.input_s(0)
    caps = model.items(plan.micro_batches[0] * plan.tokens_per_sample)[1]
    head = min(max(0.0, input_wait - way.fill_s), caps[0][0])
    opening = model.step(head)
    later = model.step(0.0) if n_steps > 1 else opening
    # A later step's first input was sent as the wafer began the previous step's last micro-batch;
    # the wafer waits for it if it takes longer than that micro-batch and the iteration boundary.
    boundary = later.drain + later.update + later.queue + way.fill_s
    late_input = max(0.0, input_wait - later.last_micro_batch - boundary) if n_steps > 1 else 0.0
    if late_input:
        later = model.step(min(late_input, caps[0][0]))
    return _Run(opening, later, input_wait, late_input, max(0.0, way.fill_s - input_wait), way.fill_s)


def _flash_excess(st: _Step, start: float) -> float:
    """How far the flash channel's work (and the updates left after it) outlasts a step starting at ``start``."""
    rest = start + st.input_wait + st.passes + st.drain + st.update + st.queue
    return max(0.0, st.channel + st.after_channel - rest)


def _per_step(run: _Run, n_steps: int) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """The mean step's terms (TERMS), breakdown and pacing (BREAKDOWN_CATEGORIES), over ``n_steps`` steps."""
    opening, later = run.opening, run.later

    def mean(first_step: float, other: float) -> float:
        return (first_step + (n_steps - 1) * other) / n_steps

    passes = mean(opening.passes, later.passes)
    compute = mean(opening.compute, later.compute)
    flash_wait = mean(opening.flash_wait, later.flash_wait)
    fill = mean(run.fill_open, run.fill)
    drain = mean(opening.drain, later.drain)
    update = mean(opening.update, later.update)
    queue = mean(opening.queue, later.queue)
    flash = mean(_flash_excess(opening, run.input_wait + run.fill_open), _flash_excess(later, run.fill))
    input_s = mean(run.input_wait, run.late_input) + mean(opening.input_wait, later.input_wait)
    terms = {
        "passes": passes,
        "fill": fill,
        "drain": drain,
        "update": update,
        "optimizer_tail": queue,
        "flash_excess": flash,
        "input": input_s,
    }
    breakdown = {
        "compute": compute,
        "stream": passes - compute - flash_wait,
        "flash": flash_wait + flash,
        "optimizer": queue,
        "bubble": fill + drain + update,
        "input": input_s,
    }
    pacing = {c: mean(opening.paced[c], later.paced[c]) for c in BREAKDOWN_CATEGORIES}
    for c in ("flash", "optimizer", "bubble", "input"):  # the terms outside the passes pace themselves
        pacing[c] += breakdown[c] - (flash_wait if c == "flash" else 0.0)
    return terms, breakdown, pacing


def _fixed_costs(plan: Plan) -> tuple[float, float]:
    """The runtime's fixed costs of a mean step, added in series: (kernel switches, step and micro-batch costs).

    In the simulator the stream runs ahead into the buffers while the wafer pays them, which this
    leaves out: where a fixed cost is large against a stream-bound pass, the estimate is pessimistic.
    """
    recomputing = plan.checkpointing in ("blocks", "offload")
    recomputed = sum(k.kernel.block is not None for k in plan.kernels) if recomputing else 0
    passes = weight_passes(len(plan.kernels), recomputed)
    return fixed_costs_s(plan.scenario.hardware.runtime, len(plan.micro_batches), passes)


def _offload_s(plan: Plan, passes_s: float, model: _Model) -> float:
    """With activation offload: what the block inputs add to a step, out and back over the wafer's edge.

    As the planner prices it: each micro-batch's block inputs cross the leaf edge out (beside the
    gradients) and back (beside the weights) in whatever time those have to spare; the rest adds.  A store
    slower than that (``hardware.activation_store``) adds what its own closed form says, where it is the
    larger (:func:`~wss.model.plan.activation_store.store_extra_s`).
    """
    if plan.checkpointing != "offload":
        return 0.0
    s = plan.scenario
    edge = edge_Bps(s.hardware)
    per_token = offload_bytes_per_token(s, plan.ops)
    retain = s.training.retain_output_layer
    down = sum(kp.stream_bytes * (2 + (kp.kernel.block is not None) - (retain and kp.kernel.is_output))
               for kp in plan.kernels)
    up = sum(kp.grad_bytes for kp in plan.kernels)
    busy = passes_s / len(plan.micro_batches)
    store = store_rates(s, plan.wafer_samples)
    out = 0.0
    for tokens in plan.tokens_per_micro_batch:
        act = tokens * per_token / edge
        extra = max(0.0, act - max(0.0, busy - down / edge), act - max(0.0, busy - up / edge))
        if store is not None:
            extra = max(extra, store_extra_s(store, tokens * per_token, busy, _backward_share(model, tokens), down))
        out += extra
    return out


def _backward_share(model: _Model, tokens: int) -> float:
    """The share of a micro-batch's passes in the backward sweep (recomputes included), each pass at the slower
    of its stream and its compute: when the returning block inputs have to cross the store."""
    its, _ = model.items(tokens)
    time = [max(it.stream_s, it.paced_s, it.up_s) for it in its]
    total = sum(time)
    return sum(t for t, it in zip(time, its) if it.phase != "forward") / total if total > 0 else 0.5


def estimate_plan(plan: Plan) -> Estimate:
    """Estimate from an existing plan (see :func:`estimate`)."""
    s = plan.scenario
    model = _Model(plan)
    way = model.ways[0]
    terms, breakdown, pacing = _per_step(_run(model, s.training.steps), s.training.steps)
    switch, runtime = _fixed_costs(plan)
    offload = _offload_s(plan, terms["passes"], model)
    for part in (terms, breakdown, pacing):
        part["switch"], part["runtime"], part["offload"] = switch, runtime, offload
    step = sum(terms.values())
    samples = s.training.global_batch
    return Estimate(
        scenario_name=s.name,
        step_time_s=step,
        samples_per_s=samples / step,
        tokens_per_s=samples * plan.tokens_per_sample / step,
        breakdown_s=breakdown,
        pacing_s=pacing,
        bound_by=bound_category(pacing),
        terms_s=terms,
        stream_bottleneck=way.bottleneck,
        micro_batches=len(plan.micro_batches),
        tokens_per_sample=plan.tokens_per_sample if s.workload.model.input == "tokens" else 1,
        buffered_chunks=way.slots_down,
    )
