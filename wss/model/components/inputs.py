"""Input workers: stream each wafer's data shard, one micro-batch ahead.

A micro-batch's samples (token ids, or feature vectors in the activation
precision) travel from the input workers while the wafer works on the
previous micro-batch (double buffering).  The wafer's first forward pass of a
micro-batch waits for its data.
"""

from __future__ import annotations

import simpy

from wss.model.plan import Plan
from wss.model.scenario import PRECISION_BYTES

__all__ = ["InputWorkers", "TOKEN_ID_BYTES"]

TOKEN_ID_BYTES = 4  # a token id as an int32


class InputWorkers:
    """Folded input workers feeding the representative wafer."""

    name = "inputs"

    def __init__(self, env: simpy.Environment, plan: Plan):
        s = plan.scenario
        self.env = env
        self.plan = plan
        self.cfg = s.hardware.inputs
        model = s.workload.model
        if model.input == "tokens":
            self.bytes_per_sample = plan.tokens_per_sample * TOKEN_ID_BYTES
        else:
            first = plan.kernels[0].kernel
            self.bytes_per_sample = first.in_features * PRECISION_BYTES[s.training.activation_precision]
        keys = [(step, mb) for step in range(s.training.steps) for mb in plan.simulated_micro_batches]
        self.keys = keys
        self.ready = {k: env.event() for k in keys}
        self.mb_started = {k: env.event() for k in keys}
        self.busy_s = 0.0
        self.bytes = 0.0
        #: (start, end, step, micro_batch) of every transfer.
        self.spans: list[tuple[float, float, int, int]] = []

    def run(self):
        """Process: deliver micro-batches in order, at most one ahead of the wafer."""
        env = self.env
        for i, key in enumerate(self.keys):
            if i > 0:
                yield self.mb_started[self.keys[i - 1]]
            size = self.plan.micro_batches[key[1]] * self.bytes_per_sample
            dt = self.cfg.latency_s + size / self.cfg.bandwidth_Bps
            yield env.timeout(dt)
            self.spans.append((env.now - dt, env.now, key[0], key[1]))
            self.busy_s += size / self.cfg.bandwidth_Bps
            self.bytes += size
            self.ready[key].succeed()
