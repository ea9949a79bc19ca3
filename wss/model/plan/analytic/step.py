"""One candidate's step: its micro-batches swept in turn, the optimizer's queue, the flash channel, the run's
first step and the later ones, averaged as the simulator averages them.

Per step: the **fill** (the step's first chunk across every stage), the **drain** (the first kernel's last
gradient chunk up), the **update** of the first kernel, which arrives last and ends the step, and whatever
of the optimizer's queue is still ahead of it; the **flash** channel's work where it outlasts the step;
the **input** waits (inputs are double-buffered: micro-batch ``m``'s transfer starts as the wafer begins
``m - 1``); the runtime's fixed costs; and, with activation offload, what the block inputs add.

The wafer pays its fixed costs (a step's, a micro-batch's) as it begins, before it waits for anything, and
the rest of the machine does not stop meanwhile: the previous step's gradients drain, the optimizer updates,
the stream crosses the tree and fills the buffers, the next input travels.  So the fill, drain and update
between two steps are waited for only where they outlast the next step's fixed costs (:class:`_Boundary`),
the stream begins a step (or micro-batch) as far ahead as those costs let it, and only the run's last step
waits for all of its updates, as in the simulator (components/wafer.py, components/inputs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from wss.model.machine.figures import input_bytes_per_sample
from wss.model.machine.input_rate import input_transfer_s, preparation_samples_per_s
from wss.model.machine.runtime_costs import fixed_costs_s, weight_passes
from wss.model.machine.swarmx_path import edge_Bps
from wss.model.plan.activation_store import store_extra_s, store_rates
from wss.model.plan.analytic.sweep import Sweep, Sweeper
from wss.model.plan.pacing import BREAKDOWN_CATEGORIES

if TYPE_CHECKING:
    from wss.model.plan.analytic.model import StepModel

__all__ = ["StepEstimate", "Inputs", "evaluate", "TERMS", "RECOMPUTING"]

#: The additive terms of one step (``StepEstimate.terms``), in the order they are reported.
TERMS = ("passes", "fill", "drain", "update", "optimizer_tail", "flash_excess", "input", "switch", "runtime",
         "offload")

#: Checkpointing modes that recompute every block before its backward pass.
RECOMPUTING = ("blocks", "offload")


@dataclass(frozen=True)
class StepEstimate:
    """One candidate's mean step, as the analytic level times it."""

    step_time_s: float
    terms: dict[str, float]  # the additive terms (TERMS), summing to the step
    breakdown: dict[str, float]  # BREAKDOWN_CATEGORIES, summing to the step
    pacing: dict[str, float]  # BREAKDOWN_CATEGORIES by what paced them (pass_pacing for the passes)
    passes_paced: tuple[float, float, float]  # the passes' seconds per step paced by compute, the stream, flash
    bottleneck: str  # the slowest stage on the first kernel's way down
    buffered_chunks: int  # chunks the buffers hold past it
    weight_crossings: float  # full copies of the weights streamed into a wafer per step


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
    closing: float  # the update term when the step ends the run (with clipping every update, not the first)
    input_wait: float  # waits for the inputs of micro-batches after the first
    held: float  # the wafer's waits for its offloaded block inputs (in the passes)
    readied: float  # the wafer's waits for its next pass to be readied (kernel_pass_min_s; in the passes)
    last_micro_batch: float  # the wafer's time on the last micro-batch once its input is there
    slack: float  # how long before the last micro-batch's passes the next input's transfer could start
    paced: tuple[float, float, float]  # pass seconds paced by compute, the stream, flash
    since: float  # from the start of its last weight kernel's pass to its end (at most kernel_pass_min_s)


@dataclass(frozen=True)
class Inputs:
    """What a candidate's inputs and fixed costs read of the scenario (the same for every candidate of a plan)."""

    tokens_per_sample: int
    per_sample: float  # bytes of one sample's input
    prepare_rate: float | None  # samples per second the input workers prepare (None: no limit)
    # The wafer pays a micro-batch's fixed costs (and a step's, at its first) before it waits for the input,
    # so they hide under that wait, and the stream and the inputs move on meanwhile (components/wafer.py).
    before_input: tuple[float, float]  # a micro-batch's fixed costs, and the step's first micro-batch's

    @classmethod
    def of(cls, model: StepModel) -> Inputs:
        s = model.scenario
        runtime = s.hardware.runtime
        return cls(s.seq_len, input_bytes_per_sample(s, model.kernels[0].kernel.in_features),
                   preparation_samples_per_s(s),
                   (runtime.micro_batch_overhead_s, runtime.micro_batch_overhead_s + runtime.step_overhead_s))


class _Candidate:
    """One candidate's micro-batches on the model's shared sweeps."""

    def __init__(self, model: StepModel, micro_batches: tuple[int, ...], checkpointing: str):
        self.model = model
        self.micro_batches = micro_batches
        self.recompute = checkpointing in RECOMPUTING
        self.offload = checkpointing == "offload"
        self.sched = model.schedule(self.recompute, self.offload)
        inputs = model.inputs()
        self.tokens_per_sample = inputs.tokens_per_sample
        self.per_sample = inputs.per_sample
        self.prepare_rate = inputs.prepare_rate
        self.before_input = inputs.before_input
        self.pass_min = model.scenario.hardware.runtime.kernel_pass_min_s  # the wafer's shortest from pass to pass

    def sweeper(self, m: int) -> Sweeper:
        return self.model.sweeper(self.recompute, self.micro_batches[m] * self.tokens_per_sample, self.offload)

    def input_s(self, m: int) -> float:
        """Transfer time of one micro-batch's input to the wafer."""
        inp = self.model.scenario.hardware.inputs
        return inp.latency_s + input_transfer_s(self.micro_batches[m], self.per_sample, inp.bandwidth_Bps,
                                                self.prepare_rate)

    def runs(self, lead: float, slack: float, since: float) -> tuple[list[Sweep], list[float], float]:
        """Each micro-batch's sweep and its wait for input, for a step starting with ``lead``, whose first
        micro-batch's passes began ``slack`` after the next input's transfer could and ``since`` after the last
        weight kernel's pass began (at most ``kernel_pass_min_s``); and that slack of the last.

        Inputs are double-buffered: micro-batch m's transfer starts once m - 1's input is there and the wafer
        has begun m - 1, before it pays m - 1's fixed costs and waits for anything (components/inputs.py)."""
        lag = 0.0
        runs: list[Sweep] = []
        waits: list[float] = []
        fixed = self.before_input[0]
        for m in range(len(self.micro_batches)):
            sweeper = self.sweeper(m)
            wait = 0.0
            if m:  # the wafer pays m's fixed cost, then waits for its input (the step's first: see _run)
                early = self.input_s(m) - slack - runs[-1].duration  # the input's arrival after the wafer begins m
                wait = max(0.0, early - fixed)
                slack = fixed + wait - max(0.0, early)
                idle = fixed + wait
                if idle:  # the stream runs ahead and the gradients drain while the wafer pays and waits
                    lead, lag = min(sweeper.first_cap, lead + idle), max(0.0, lag - idle)
                    since = min(self.pass_min, since + idle)
            waits.append(wait)
            sw = sweeper.sweep(lead, lag, since)
            runs.append(sw)
            # Identical micro-batches settle on one lead and lag: snap to them so the rest repeat.
            tol = 1e-12 * sw.duration
            lead = lead if abs(sw.lead_out - lead) <= tol else sw.lead_out
            lag = lag if abs(sw.lag_out - lag) <= tol else sw.lag_out
            since = since if abs(sw.since_out - since) <= tol else sw.since_out
        return runs, waits, slack

    def optimizer(self, runs: list[Sweep], waits: list[float]) -> tuple[float, float, float, float]:
        """The step's drain, the first kernel's own update, the optimizer's queue ahead of it, and the update
        term when the step ends the run.

        Gradients reach MemoryX after the gradient work queued ahead of them and their climb; the
        optimizer takes accumulations and updates in arrival order (one FIFO server, unbounded
        queue); the first kernel's update, the last job, ends the step.  With global-norm clipping the
        last micro-batch's jobs are norm jobs; the updates follow the last of them in the model's order,
        and the next step's wafer waits for them as far as :meth:`Jobs.clipped_updates` says, the run's
        last step for all of them.
        """
        jobs, n_mb = self.model.jobs, len(self.micro_batches)
        start = free = arrival = 0.0
        for m, sw in enumerate(runs):
            start += waits[m] + (self.before_input[0] if m else 0.0)  # a micro-batch's fixed cost, then its input
            kind, index = (jobs.last_kind(), n_mb - 1) if m == n_mb - 1 else ("accumulate", min(m, 1))
            lead_in, total, last = self.model.fifo(sw, self.sched.backward_kernels, kind, index, n_mb)
            free = max(free, start + lead_in) + total
            arrival = start + last
            start += sw.duration
        drain = arrival - start
        if jobs.clipped:
            kernels, starts = self.model.forward_starts(self.recompute, self.micro_batches[0] * self.tokens_per_sample)
            wait, total = jobs.clipped_updates(n_mb, kernels, starts)
            return drain, wait, free - arrival, total
        own = float(jobs.services("update", n_mb - 1, n_mb)[0][0])
        queue = free - arrival - own
        queue = queue if queue > 1e-9 * (own + drain) else 0.0  # rounding, not a queue
        return drain, own, queue, own

    def step(self, lead: float, slack: float, since: float) -> _Step:
        """One step whose first pass finds ``lead`` seconds of its stream already done, begins ``slack`` after
        its second input's transfer could and ``since`` after the last weight kernel's pass began (:meth:`runs`)."""
        n_mb = len(self.micro_batches)
        jobs = self.model.jobs
        runs, waits, slack = self.runs(lead, slack, since)
        passes = sum(sw.duration for sw in runs)
        compute = sum(sw.compute for sw in runs)
        # The flash channel serves every prefetch and every flash read of the optimizer, one at a time.
        channel = sum(sw.flash for sw in runs)
        acc_read = [jobs.accumulation_reads(m) for m in (0, 1)]
        channel += sum(acc_read[min(m, 1)] for m in range(n_mb - 1))
        drain, own, queue, closing = self.optimizer(runs, waits)
        # After the channel's last read (the last flash-resident update), the optimizer still writes
        # that kernel and updates the DRAM-resident kernels queued behind it.
        reads, after = jobs.after_channel(jobs.update_order(self.sched.backward_kernels), n_mb)
        channel += reads
        flash_wait = sum(sw.flash_wait for sw in runs)
        last = runs[-1].duration
        paced = (math.fsum(sw.paced[0] for sw in runs), math.fsum(sw.paced[1] for sw in runs),
                 math.fsum(sw.paced[2] for sw in runs))
        held = sum(sw.held for sw in runs)
        readied = sum(sw.readied for sw in runs)
        return _Step(passes, compute, flash_wait, channel, after, drain, own, queue, closing, sum(waits), held,
                     readied, last, slack, paced, runs[-1].since_out)


@dataclass(frozen=True)
class _Boundary:
    """The iteration boundary before a later step: what the wafer waits for after the previous step's last pass.

    The wafer pays the step's fixed costs first (``runtime``: the step's and its first micro-batch's), then
    waits for its first input, then for its first kernel's weights.  Meanwhile the previous step's gradients
    drain, the optimizer works through its queue and updates the first kernel (with clipping: the updates the
    next step waits for), and the stream crosses the tree again (the fill): a chain that runs beside the wafer's
    fixed costs and input wait, not after them.  Only what the chain outlasts them by is waited for (each part
    of it in turn: ``drain``, ``queue``, ``update``, ``fill``), and what they outlast it by the stream spends
    running ahead (``lead``, up to the buffers).
    """

    late_input: float  # the wafer's wait for the step's first input, after the fixed costs
    drain: float
    queue: float
    update: float
    fill: float
    lead: float  # the stream done for the step's first pass as it begins
    slack: float  # how long after the step's second input's transfer could start its first pass begins
    start: float  # the step's own time before its first pass (the rest of the boundary is the previous step's)
    since: float  # from the previous step's last weight kernel's pass to the first pass (at most kernel_pass_min_s)

    @classmethod
    def after(cls, cand: _Candidate, prev: _Step) -> _Boundary:
        """The boundary after step ``prev``, before a later step."""
        way = cand.model.ways[0]
        runtime = cand.before_input[1]
        # A later step's first input was sent once the previous step's last one was there and the wafer had
        # begun that micro-batch (:meth:`_Candidate.runs`); the wafer waits for it after the fixed costs.
        early = cand.input_s(0) - prev.slack - prev.last_micro_batch
        late = max(0.0, early - runtime)
        chain = (prev.drain, prev.queue, prev.update, way.fill_s)
        covered = runtime + late
        exposed = []
        for part in chain:  # the fixed costs and the input wait cover the chain from its start
            hidden = min(part, covered)
            exposed.append(part - hidden)
            covered -= hidden
        lead = min(covered, cand.sweeper(0).first_cap)
        begins = runtime + late + sum(exposed)  # the first pass, after the previous step's last one
        start = begins - (prev.drain + prev.queue + prev.update)
        return cls(late, exposed[0], exposed[1], exposed[2], exposed[3], lead, begins - max(0.0, early), start,
                   min(cand.pass_min, prev.since + begins))


@dataclass(frozen=True)
class _Run:
    """The run's first step, every later one and the boundaries before them, and the waits at their starts."""

    opening: _Step
    later: _Step
    second: _Boundary  # before the run's second step (after the opening)
    boundary: _Boundary  # before each later step after the second (after a later step)
    input_wait: float  # the first input's transfer (the run's first micro-batch waits for all of it)
    opening_wait: float  # of which the wafer waits beyond the step's fixed costs, which it pays first
    opening_start: float  # the first step's time before its first pass: fixed costs, input wait, fill
    fill_open: float  # the part of the first step's fill not hidden under its fixed costs and input wait


def _run(cand: _Candidate, n_steps: int) -> _Run:
    """The opening step, a later one and the boundaries before the later ones.

    The run's first micro-batch waits for its input while the stream starts: the wafer pays the step's fixed
    costs before it waits, the fill hides under both, and the stream gets a head start (as far as the buffers
    allow).  A later step's fixed costs run beside the iteration boundary before it (:class:`_Boundary`).  The
    later steps all start as the second does (their boundaries differ from its only if the opening ends
    otherwise than they do).
    """
    way = cand.model.ways[0]
    input_wait = cand.input_s(0)
    runtime = cand.before_input[1]
    start = max(runtime, input_wait)
    begins = max(start, way.fill_s)  # the first pass; the second input's transfer could start at input_wait
    # No weight kernel's pass before the run's first: it waits for none.
    opening = cand.step(min(max(0.0, start - way.fill_s), cand.sweeper(0).first_cap), begins - input_wait,
                        cand.pass_min)
    if n_steps > 1:
        second = _Boundary.after(cand, opening)
        later = cand.step(second.lead, second.slack, second.since)
        boundary = _Boundary.after(cand, later)
    else:
        later, second = opening, _Boundary(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
        boundary = second
    return _Run(opening, later, second, boundary, input_wait, max(0.0, input_wait - runtime), begins,
                max(0.0, way.fill_s - start))


def _flash_excess(st: _Step, start: float) -> float:
    """How far the flash channel's work (and the updates left after it) outlasts a step whose own time before
    its first pass is ``start`` (the channel works on through the step's fixed costs)."""
    rest = start + st.input_wait + st.passes + st.drain + st.update + st.queue
    return max(0.0, st.channel + st.after_channel - rest)


def _per_step(run: _Run, n_steps: int) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """The mean step's terms (TERMS), breakdown and pacing (BREAKDOWN_CATEGORIES), over ``n_steps`` steps.

    Of the boundaries, the ``n_steps - 1`` between steps count what the next step waits for beyond its fixed
    costs (:class:`_Boundary`); the run's last step waits for all of its own (drain, queue and updates)."""
    opening, later, second, boundary = run.opening, run.later, run.second, run.boundary
    last = later if n_steps > 1 else opening

    def mean(first_step: float, other: float) -> float:
        return (first_step + (n_steps - 1) * other) / n_steps

    def between(part: str) -> float:  # the boundaries before the later steps, per step of the run
        return (getattr(second, part) + max(0, n_steps - 2) * getattr(boundary, part)) / n_steps if n_steps > 1 \
            else 0.0

    held = mean(opening.held, later.held)  # waits for block inputs: the offload term, not the passes'
    readied = mean(opening.readied, later.readied)  # waits for the next pass to be readied: the switch term
    passes = mean(opening.passes, later.passes) - held - readied
    compute = mean(opening.compute, later.compute)
    flash_wait = mean(opening.flash_wait, later.flash_wait)
    fill = run.fill_open / n_steps + between("fill")
    drain = between("drain") + last.drain / n_steps
    update = between("update") + last.update / n_steps
    queue = between("queue") + (last.queue + last.closing - last.update) / n_steps
    flash = _flash_excess(opening, run.opening_start) / n_steps
    if n_steps > 1:
        flash += (_flash_excess(later, second.start) + (n_steps - 2) * _flash_excess(later, boundary.start)) / n_steps
    input_s = run.opening_wait / n_steps + between("late_input") + mean(opening.input_wait, later.input_wait)
    terms = {"passes": passes, "fill": fill, "drain": drain, "update": update, "optimizer_tail": queue,
             "flash_excess": flash, "input": input_s, "offload": held, "switch": readied}
    breakdown = {
        "compute": compute,
        "stream": passes - compute - flash_wait,
        "flash": flash_wait + flash,
        "optimizer": queue,
        "bubble": fill + drain + update,
        "input": input_s,
        "offload": held,
        "switch": readied,
    }
    pacing = dict.fromkeys(BREAKDOWN_CATEGORIES, 0.0)
    for i, c in enumerate(("compute", "stream", "flash")):
        pacing[c] = mean(opening.paced[i], later.paced[i])
    # The terms outside the passes (and the waits for a pass to be readied) pace themselves.
    for c in ("flash", "optimizer", "bubble", "input", "offload", "switch"):
        pacing[c] += breakdown[c] - (flash_wait if c == "flash" else 0.0)
    return terms, breakdown, pacing


def _offload_s(cand: _Candidate, passes_s: float) -> float:
    """With activation offload: what the block inputs add to a step going out over the wafer's edge, and what
    a slow store adds.

    Each micro-batch's block inputs cross the leaf edge out (beside the gradients) in whatever time those have
    to spare; the rest adds.  And they leave in the forward pass, block by block: a block's forward pass waits
    for the previous block's input to leave SRAM, which adds the larger where blocks compute faster than their
    inputs cross the edge (:mod:`~wss.model.plan.analytic.sends`).  Coming back they share the wire with the
    weights pass by pass, which the sweep prices (:mod:`~wss.model.plan.analytic.returns`), its waits for them
    included.  A store slower than that
    (``hardware.activation_store``) adds what its own closed form says, where it is the larger
    (:func:`~wss.model.plan.activation_store.store_extra_s`).
    """
    model = cand.model
    s = model.scenario
    edge = edge_Bps(s.hardware)
    per_token = model.offload_bytes_per_token
    down, up = cand.sched.streamed_bytes, model.grad_bytes  # weights (beside a MemoryX store's returns), gradients
    busy = passes_s / len(cand.micro_batches)
    store = store_rates(s, model.wafer_samples)
    out = 0.0
    for m, samples in enumerate(cand.micro_batches):
        tokens = samples * cand.tokens_per_sample
        act = tokens * per_token / edge
        # Over the micro-batch, beside the gradients; inside the forward pass, block by block (SRAM holds one).
        extra = max(act - max(0.0, busy - up / edge), model.send_waits(tokens), 0.0)
        if store is not None:
            extra = max(extra, store_extra_s(store, tokens * per_token, busy, cand.sweeper(m).backward_share, down))
        out += extra
    return out


def evaluate(model: StepModel, micro_batches: tuple[int, ...], checkpointing: str) -> StepEstimate:
    """One mean step of the candidate: terms, breakdown and pacing, each summing to the step."""
    s = model.scenario
    n_steps = s.training.steps
    cand = _Candidate(model, micro_batches, checkpointing)
    run = _run(cand, n_steps)
    terms, breakdown, pacing = _per_step(run, n_steps)
    recomputed = model.recomputed if cand.recompute else 0
    switch, runtime = fixed_costs_s(s.hardware.runtime, len(micro_batches), weight_passes(len(model.kernels),
                                                                                           recomputed))
    offload = _offload_s(cand, terms["passes"] + terms["switch"]) if checkpointing == "offload" else 0.0
    for part in (terms, breakdown, pacing):
        part["switch"] += switch  # the switches in series, after the waits for passes to be readied
        part["runtime"] = runtime
        part["offload"] += offload
    terms = {k: terms[k] for k in TERMS}
    breakdown, pacing = ({k: part[k] for k in BREAKDOWN_CATEGORIES} for part in (breakdown, pacing))
    step = sum(terms.values())
    passes_paced = tuple((a + (n_steps - 1) * b) / n_steps for a, b in zip(run.opening.paced, run.later.paced))
    total_bytes = model.stream_bytes
    way = model.ways[0]
    return StepEstimate(
        step_time_s=step,
        terms=terms,
        breakdown=breakdown,
        pacing=pacing,
        passes_paced=(passes_paced[0], passes_paced[1], passes_paced[2]),
        bottleneck=way.bottleneck,
        buffered_chunks=way.slots_down,
        weight_crossings=cand.sched.streamed_bytes * len(micro_batches) / total_bytes if total_bytes else 0.0,
    )
