"""The analytic level of one plan: what does not depend on the candidate, built once; one step, per candidate.

:class:`StepModel` holds the plan's size-free figures (the way of every kernel, the pass schedules with and
without recompute, the optimizer's jobs) and, per micro-batch size, the passes' seconds and the sweeps made
so far, which every candidate with that size shares.  :meth:`StepModel.evaluate` times one step of a
candidate (micro-batches and checkpointing) in the terms of :mod:`wss.model.plan.analytic`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from wss.model.kernels.cycles import kernel_cycles
from wss.model.machine.optimizer_costs import OptimizerCost
from wss.model.machine.release_rates import release_wafer
from wss.model.machine.wafer_rates import nonweight_flops
from wss.model.plan.activation_sram import offloaded_block_inputs
from wss.model.plan.activation_store import offload_bytes_per_token
from wss.model.plan.analytic.optimizer import Jobs, fifo
from wss.model.plan.analytic.path import Path, Way
from wss.model.plan.analytic.returns import returns_matter
from wss.model.plan.analytic.schedule import Schedule, offloaded, schedule
from wss.model.plan.analytic.sends import Sends
from wss.model.plan.analytic.step import Inputs, StepEstimate, evaluate
from wss.model.plan.analytic.sweep import Columns, Sweep, Sweeper
from wss.model.plan.types import KernelPlan, Plan
from wss.model.scenario import PRECISION_BYTES, Scenario
from wss.model.workload import Op, WaferOp

__all__ = ["StepModel"]

class StepModel:
    """The analytic level's figures for one plan's kernels (see the module docstring)."""

    def __init__(self, scenario: Scenario, ops: Sequence[Op], kernels: Sequence[KernelPlan],
                 wafer_samples: Sequence[int], optimizer: OptimizerCost):
        self.scenario = scenario
        self.ops = list(ops)
        self.kernels = list(kernels)
        self.wafer_samples = list(wafer_samples)
        self.path = Path.of(scenario)
        ways: dict[tuple[float, float, float, int], Way] = {}
        for k in self.kernels:  # kernels of equal bytes and chunks share a way: each is worked out once
            shape = (k.stream_bytes, k.read_bytes, k.grad_bytes, k.n_chunks)
            if shape not in ways:
                ways[shape] = self.path.way(k)
        self.ways = [ways[(k.stream_bytes, k.read_bytes, k.grad_bytes, k.n_chunks)] for k in self.kernels]
        self.stream_bytes = sum(k.stream_bytes for k in self.kernels)  # one copy of the weights, one wafer
        self.grad_bytes = sum(k.grad_bytes for k in self.kernels)  # one backward pass's gradients, one wafer
        self.recomputed = sum(k.kernel.block is not None for k in self.kernels)  # kernels in blocks
        self.offload_bytes_per_token = offload_bytes_per_token(scenario, self.ops)
        self.jobs = Jobs(self.kernels, optimizer, self.path,
                         float(PRECISION_BYTES[scenario.training.gradient_precision]),
                         clipped=scenario.training.gradient_clipping == "global_norm",
                         update_overhead_s=scenario.hardware.runtime.update_overhead_s)
        self._forward_starts: dict[tuple[bool, int], tuple[np.ndarray, np.ndarray]] = {}
        self._send_waits: dict[int, float] = {}
        self._inputs: Inputs | None = None
        # (sweep's id, job kind, first micro-batch or a later one, more than one) -> the sweep (kept, so that its
        # id is not reused) and its jobs through the optimizer's queue
        self._fifo: dict[tuple[int, str, int, bool], tuple[Sweep, tuple[float, float, float]]] = {}
        self._sends: Sends | None = None  # the forward pass's blocks whose inputs go out (with offload)
        self._block_inputs: dict[int, float] | None = None
        wafer_ops = [(pos, op) for pos, op in enumerate(self.ops) if isinstance(op, WaferOp)]
        self._op_flops = np.zeros(len(self.ops))
        self._op_backward = np.zeros(len(self.ops))
        for pos, op in wafer_ops:
            self._op_flops[pos], self._op_backward[pos] = op.flops_per_token, op.backward_factor
        self._cycle_classes: list[int] = []  # a kernel of each class
        self._cycle_class: list[int] = []  # each kernel's class
        self._schedules: dict[tuple[bool, bool], Schedule] = {}
        self._columns: dict[tuple[bool, bool], Columns] = {}
        self._sweepers: dict[tuple[bool, bool, int], Sweeper] = {}
        self._pass_s: dict[tuple[bool, int], tuple[np.ndarray, np.ndarray]] = {}
        self._sources: dict[bool, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}
        # Kernels of one kind and profile (or dense shape) have the same cycles: each class is costed once.
        classes: dict[Any, int] = {}
        for kp in self.kernels:
            p = kp.profile
            dense = p.col_counts is None and p.row_counts is None
            # an expert computes fewer tokens, a per-sample kernel one input per sample, on the same profile
            work = (kp.kernel.kind, kp.kernel.computed_share, kp.kernel.tokens_per_input)
            key = (*work, p.out_features, p.in_features, p.nnz) if dense else (*work, id(p))
            if key not in classes:
                classes[key] = len(classes)
                self._cycle_classes.append(kp.index)
            self._cycle_class.append(classes[key])
        self._kernel_s: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @classmethod
    def of_plan(cls, plan: Plan) -> StepModel:
        """The model of a finished plan (its kernels carry their cycles at the plan's micro-batch sizes)."""
        return cls(plan.scenario, plan.ops, plan.kernels, plan.wafer_samples, plan.optimizer)

    def schedule(self, recompute: bool, offload: bool = False) -> Schedule:
        """The passes of one micro-batch, with every block recomputed or not, and with its input offloaded
        (it comes back over the wafer's edge beside the weights) or not."""
        key = (recompute, offload)
        if key not in self._schedules:
            if offload:  # the same passes, with the block inputs coming back beside them
                self._schedules[key] = offloaded(self.schedule(True), self.block_inputs(), self.path.edge_Bps)
            else:
                self._schedules[key] = schedule(self.ops, self.kernels, self.ways, self.path, recompute,
                                                self.scenario.training.retain_output_layer)
        return self._schedules[key]

    def block_inputs(self) -> dict[int, float]:
        """With activation offload: the op starting each block -> its input's bytes per token (worked out once per
        model: every candidate's sends and returns read it)."""
        if self._block_inputs is None:
            self._block_inputs = offloaded_block_inputs(self.scenario, self.ops)
        return self._block_inputs

    def inputs(self) -> Inputs:
        """What every candidate's inputs and fixed costs read of the scenario (worked out once per model)."""
        if self._inputs is None:
            self._inputs = Inputs.of(self)
        return self._inputs

    def fifo(self, sw: Sweep, order: np.ndarray, kind: str, micro_batch: int, micro_batches: int
             ) -> tuple[float, float, float]:
        """The optimizer's queue (:func:`~wss.model.plan.analytic.optimizer.fifo`) for the jobs of ``kind`` of
        micro-batch ``micro_batch`` of ``micro_batches``, whose gradients arrive as sweep ``sw`` says, for the
        kernels of its schedule's backward passes in ``order`` (shared by every candidate whose micro-batch made
        that sweep, as the sweeps are: a sweep is of one schedule, and so of one order)."""
        key = (id(sw), kind, min(micro_batch, 1), micro_batches > 1)  # what the jobs' services depend on
        found = self._fifo.get(key)
        if found is None:
            services = self.jobs.services(kind, micro_batch, micro_batches)[0][order]
            found = self._fifo[key] = (sw, fifo(sw.arrivals, services))
        return found[1]

    def kernel_seconds(self, tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """Forward and backward seconds of every kernel at ``tokens`` tokens (kernels of one profile costed once)."""
        if tokens not in self._kernel_s:
            wafer = release_wafer(self.scenario.hardware)
            cycles = []
            for k in self._cycle_classes:
                kp = self.kernels[k]
                c = kp.cycles[tokens] if tokens in kp.cycles else kernel_cycles(
                    kp.kernel.kind, kp.profile, kp.kernel.computed_tokens(tokens), wafer)
                cycles.append((c.forward, c.backward))
            both = np.array(cycles, dtype=float)[self._cycle_class]
            self._kernel_s[tokens] = (both[:, 0] / wafer.clock_Hz, both[:, 1] / wafer.clock_Hz)
        return self._kernel_s[tokens]

    def pass_seconds(self, recompute: bool, tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """Every pass's compute ``C`` at ``tokens`` tokens, and ``C`` paced by the intake's credits: the wafer
        starts a chunk only after its flight from the last level, and its intake holds ``b`` chunks (worked out
        once per size: the sweeps, the sends and the forward starts all read them; read-only)."""
        key = (recompute, tokens)
        if key not in self._pass_s:
            source, n, slots, chunked = self._pass_source(recompute)
            kf, kb = self.kernel_seconds(tokens)
            rate = nonweight_flops(release_wafer(self.scenario.hardware))
            f = self._op_flops * tokens
            # Each pass's compute is one of: a kernel's forward, its backward, an op's forward or its backward.
            c = np.concatenate((kf, kb, f / rate, f * self._op_backward / rate))[source]
            credit = n * (self.path.hop_s + c / n) / slots
            paced = np.where(chunked, np.maximum(c, credit), c)
            c.flags.writeable = paced.flags.writeable = False
            self._pass_s[key] = (c, paced)
        return self._pass_s[key]

    def _pass_source(self, recompute: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per pass of the schedule: where its compute comes from in :meth:`pass_seconds`' figures (kernels'
        forward, kernels' backward, ops' forward, ops' backward, one after the other), its chunks (at least one),
        its intake's chunks plus one, and whether it streams."""
        if recompute not in self._sources:
            sched = self.schedule(recompute)
            n_k, n_ops = len(self.kernels), len(self.ops)
            backward = sched.phase == 2
            on_kernel = np.where(backward, n_k, 0) + np.maximum(sched.kernel, 0)
            on_op = 2 * n_k + np.where(backward, n_ops, 0) + sched.pos
            self._sources[recompute] = (np.where(sched.kernel >= 0, on_kernel, on_op), np.maximum(sched.chunks, 1),
                                        sched.slots_in + 1, sched.chunks > 0)
        return self._sources[recompute]

    def forward_starts(self, recompute: bool, tokens: int) -> tuple[np.ndarray, np.ndarray]:
        """The kernel of each forward pass of a kernel in a micro-batch of ``tokens`` tokens, and when the pass
        starts if nothing waits: the passes before it, each the longer of its paced compute and its stream, and
        the waits for weight kernels' passes to be readied (:meth:`_readied`; what the next step's updates are
        measured against, with global-norm clipping)."""
        key = (recompute, tokens)
        if key not in self._forward_starts:
            sched = self.schedule(recompute)
            _, paced = self.pass_seconds(recompute, tokens)
            forward = sched.phase == 0
            took = self._readied(recompute, np.maximum(paced, sched.stream_s))[forward]
            starts = np.concatenate(([0.0], np.cumsum(took)[:-1]))
            kernels = sched.kernel[forward]
            self._forward_starts[key] = (kernels[kernels >= 0], starts[kernels >= 0])
        return self._forward_starts[key]

    def send_waits(self, tokens: int) -> float:
        """With offload: how long a micro-batch of ``tokens`` tokens waits in its forward pass for its block inputs
        to leave SRAM (:mod:`~wss.model.plan.analytic.sends`; each pass the longer of its paced compute and its
        stream, and the waits for weight kernels' passes to be readied, as in :meth:`forward_starts`)."""
        if tokens not in self._send_waits:
            if self._sends is None:
                sched, path = self.schedule(True), self.path
                self._sends = Sends(sched.pos, sched.phase, self.block_inputs(), path.edge_Bps, path.port_buffer_bytes,
                                    path.offload_chunk_bytes)
            _, paced = self.pass_seconds(True, tokens)
            took = self._readied(True, np.maximum(paced, self.schedule(True).stream_s))
            self._send_waits[tokens] = self._sends.waits(took, tokens)
        return self._send_waits[tokens]

    def _readied(self, recompute: bool, took: np.ndarray) -> np.ndarray:
        """Each pass's seconds ``took`` and then the wafer's wait for the next pass to be readied, where that is a
        weight kernel's: it begins no sooner than ``kernel_pass_min_s`` after the last one began (the sweep's
        ``since``, here from a micro-batch that starts with none before it), so the passes' starts are the running
        sums.  ``took`` itself where there is no minimum."""
        floor = self.columns(recompute, False).floor
        if not floor.any():
            return took
        out = took.astype(float)
        since = math.inf
        for i, (t, m) in enumerate(zip(took.tolist(), floor.tolist())):
            if m > 0.0:
                if m > since:
                    out[i - 1] += m - since
                since = 0.0
            since += t
        return out

    def columns(self, recompute: bool, offload: bool) -> Columns:
        """A schedule's figures as the sweeps read them (shared by every micro-batch size)."""
        key = (recompute, offload)
        if key not in self._columns:
            self._columns[key] = Columns(self.schedule(recompute, offload),
                                         self.scenario.hardware.runtime.kernel_pass_min_s)
        return self._columns[key]

    def sweeper(self, recompute: bool, tokens: int, offload: bool = False) -> Sweeper:
        """The sweeps of one micro-batch of ``tokens`` tokens (shared by every candidate with that size).

        With offload the sweeper shares the passes' seconds, most columns and the segments no block input
        touches with the one without (:class:`~wss.model.plan.analytic.sweep.Sweeper`)."""
        key = (recompute, offload, tokens)
        if key not in self._sweepers:
            sched = self.schedule(recompute, offload)
            compute, paced = self.pass_seconds(recompute, tokens)
            if offload:
                plain = self.sweeper(recompute, tokens)
                returns = sched.return_s * tokens
                if not returns_matter(sched.wire, returns, sched.takes_input, compute):
                    self._sweepers[key] = plain  # the block inputs come back in the stream's gaps, in time
                    return plain
                self._sweepers[key] = Sweeper(sched, self.columns(recompute, True), compute, paced, returns, plain)
            else:
                self._sweepers[key] = Sweeper(sched, self.columns(recompute, False), compute, paced)
        return self._sweepers[key]

    def evaluate(self, micro_batches: Sequence[int], checkpointing: str) -> StepEstimate:
        """One mean step of the candidate (see :mod:`wss.model.plan.analytic`)."""
        return evaluate(self, tuple(micro_batches), checkpointing)
