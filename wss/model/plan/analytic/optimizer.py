"""MemoryX's optimizer in closed form: each job's service time, and one FIFO server taking them in arrival order.

An update moves the optimizer's state scalars (and the fp32 gradient accumulator when there are
micro-batches); an accumulation adds one micro-batch's gradient into that accumulator; both read the incoming
summed gradient from DRAM.  Each state component moves at its own tier, and the job's DRAM traffic, flash
read-then-write and FLOPs run side by side (the optimizer's own closed form,
:func:`~wss.model.machine.optimizer_costs.job_seconds`).  The DRAM it shares with the stream and the gradient
intake is priced at its full rate, as if the job had it alone.

With global-norm clipping the last micro-batch's gradients get norm jobs instead of updates, and the updates
all follow the last of them, in the model's order (:meth:`Jobs.clipped_updates`).

A FIFO server free at ``f`` that gets jobs ``(a_j, s_j)`` is free again at
``max(f, max_j (a_j - s_1 - ... - s_{j-1})) + sum_j s_j``: one line per micro-batch (:func:`fifo`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from wss.model.machine.optimizer_costs import OptimizerCost, job_seconds, job_traffic
from wss.model.plan.analytic.path import Path
from wss.model.plan.types import KernelPlan

__all__ = ["Jobs", "fifo"]


class Jobs:
    """Every kernel's optimizer jobs, priced once per kind and per class of kernels with equal state."""

    def __init__(self, kernels: Sequence[KernelPlan], optimizer: OptimizerCost, path: Path, incoming_bytes: float,
                 clipped: bool = False, update_overhead_s: float = 0.0):
        self.kernels = kernels
        self.update_overhead_s = update_overhead_s  # each update's fixed time after its work (RuntimeConfig)
        self.optimizer = optimizer
        self.path = path
        self.incoming = incoming_bytes  # gradient bytes per parameter
        self.clipped = clipped  # global-norm clipping: norm jobs as gradients arrive, the updates after the last
        #: The order the step's updates run in with clipping: the model's parameters' (MemoryX's rule).
        self.forward_order = np.arange(len(kernels), dtype=np.int64)
        self.owns = np.array([k.owns_state for k in kernels], dtype=bool)
        self.owner = np.array([k.state_owner for k in kernels], dtype=np.int64)
        tied = {k.state_owner for k in kernels if not k.owns_state}
        classes: dict[tuple, int] = {}
        self.class_of = np.array([classes.setdefault((k.nnz, k.state_tiers, k.index in tied, k.owns_state),
                                                     len(classes)) for k in kernels], dtype=np.int64)
        self.classes = list(classes)
        self._arrays: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}
        self._reads: dict[int, float] = {}
        self._after: dict[tuple[int, bool], tuple[float, float]] = {}
        self._clipped: dict[tuple[bool, int], tuple[float, float]] = {}

    def _job(self, cls: tuple, kind: str, micro_batch: int, micro_batches: int) -> tuple[float, float]:
        """Service time of one job (update or accumulation) of a kernel of class ``cls`` and its flash seconds."""
        nnz, tiers, shares, _ = cls
        accumulated = kind in ("update", "norm") and (micro_batches > 1 or shares)
        first = micro_batch == 0 and not shares
        t = job_traffic(self.optimizer, kind, nnz, tiers, first=first, accumulated=accumulated,
                        incoming_bytes=nnz * self.incoming, clipped=self.clipped)
        p = self.path
        seconds, channel = job_seconds(t, p.dram_Bps, p.flash_read_Bps, p.flash_write_Bps, p.opt_flops)
        if kind == "update":  # the runtime's fixed time per update, after its work (the simulator's coprocessor)
            seconds += self.update_overhead_s
        return seconds, channel

    def services(self, kind: str, micro_batch: int, micro_batches: int) -> tuple[np.ndarray, np.ndarray]:
        """Per kernel: (service, flash seconds) of its job of ``kind`` (a tied kernel's update accumulates into its
        owner's accumulator instead) in micro-batch ``micro_batch`` of ``micro_batches``."""
        key = (kind, min(micro_batch, 1), micro_batches > 1)
        if key not in self._arrays:
            jobs = [self._job(c, kind if c[3] else "accumulate", micro_batch, micro_batches) for c in self.classes]
            service, flash = np.array([j[0] for j in jobs]), np.array([j[1] for j in jobs])
            self._arrays[key] = (service[self.class_of], flash[self.class_of])
        return self._arrays[key]

    def last_kind(self) -> str:
        """The job a state owner's gradient of the last micro-batch gets: its update, or with clipping its norm."""
        return "norm" if self.clipped else "update"

    def update_order(self, backward_kernels: np.ndarray) -> np.ndarray:
        """The order the step's updates run in: the gradients' arrival (backward) order, or with clipping the
        model's parameters' order."""
        return self.forward_order if self.clipped else backward_kernels

    def clipped_updates(self, micro_batches: int, forward_kernels: np.ndarray, forward_starts: np.ndarray
                        ) -> tuple[float, float]:
        """With clipping, the updates in the model's order from the moment the norm is known: how long the next
        step's wafer waits for them, and how long they all take.

        Update ``k`` is done at ``C_k``, the services of the owners up to ``k``; the next step's forward pass of
        a kernel, starting ``T_j`` into the step when nothing waits, needs its owner's; a wait delays every later
        pass alike, so the wafer starts ``max_j (C_owner(j) - T_j)`` after the norm (max-plus)."""
        key = (micro_batches > 1, id(forward_starts))  # the starts are cached per micro-batch size by the model
        if key not in self._clipped:
            service = self.services("update", micro_batches - 1, micro_batches)[0]
            done = np.cumsum(np.where(self.owns, service, 0.0))
            if forward_kernels.size:
                wait = max(float((done[self.owner[forward_kernels]] - forward_starts).max()), 0.0)
            else:
                wait = float(done[-1])
            self._clipped[key] = (wait, float(done[-1]))
        return self._clipped[key]

    def accumulation_reads(self, micro_batch: int) -> float:
        """Flash-channel seconds of every kernel's accumulation in one micro-batch (first, or a later one)."""
        m = min(micro_batch, 1)
        if m not in self._reads:
            reads = [self._job(c, "accumulate", m, 2)[1] for c in self.classes]
            self._reads[m] = float(np.array(reads)[self.class_of].sum())
        return self._reads[m]

    def after_channel(self, order: np.ndarray, micro_batches: int) -> tuple[float, float]:
        """The updates' flash reads, and the optimizer's work left after the channel's last read (the last
        flash-resident update's writes and the DRAM-resident updates queued behind it), for updates in ``order``."""
        key = (id(order), micro_batches > 1)
        if key not in self._after:
            service, read = self.services("update", micro_batches - 1, micro_batches)
            owned = order[self.owns[order]]  # a tied kernel's update is its owner's
            r, sv = read[owned], service[owned]
            # In order, one at a time (cumulative sums add left to right, as a loop would): every read, and the
            # work from the last flash-resident update's writes on (every update when none reads flash).
            reads = float(np.cumsum(r)[-1]) if r.size else 0.0
            flash = np.flatnonzero(r)
            if flash.size:
                j = int(flash[-1])
                after = float(np.cumsum(np.concatenate(([sv[j] - r[j]], sv[j + 1:])))[-1])
            else:
                after = float(np.cumsum(sv)[-1]) if sv.size else 0.0
            self._after[key] = (reads, after)
        return self._after[key]


def fifo(arrivals: np.ndarray, services: np.ndarray) -> tuple[float, float, float]:
    """Jobs taken in arrival order (ties in the given order): (max_j a_j - sum_{i<j} s_i, sum s, last arrival)."""
    order = np.argsort(arrivals, kind="stable")
    a, s = arrivals[order], services[order]
    done = np.cumsum(s)
    before = np.concatenate(([0.0], done[:-1]))
    return float((a - before).max()), float(done[-1]), float(a[-1])
