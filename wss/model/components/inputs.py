"""Input workers: stream each wafer's data shard, one micro-batch ahead.

A micro-batch's samples (token ids, or feature vectors in the activation
precision) travel from the input workers while the wafer works on the
previous micro-batch (double buffering).  The wafer's first forward pass of a
micro-batch waits for its data.  A transfer takes the workers' latency plus the
longer of moving its bytes and preparing its samples (reading, decoding,
masking: ``samples_per_s``, unlimited when not given), which overlap.  The
rate comes from the scenario's input pipeline (its kind's cost per sample and
its processes: :mod:`wss.model.machine.input_rate`, which states it once for
this part and the analytic level).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

import simpy

from wss.model.components.part import Carried, Held, Process, Reading
from wss.model.machine.input_rate import input_transfer_s

__all__ = ["InputSettings", "InputWorkers"]


@dataclass(frozen=True)
class InputSettings:
    """What the input workers feeding one wafer need.

    ``micro_batch_samples[m]`` is the number of samples of micro-batch ``m``;
    the workers deliver, for every step, the micro-batches listed in
    ``simulated_micro_batches`` (all of them unless micro-batches are folded).
    """

    bandwidth_Bps: float
    latency_s: float
    bytes_per_sample: float
    micro_batch_samples: tuple[int, ...]
    simulated_micro_batches: tuple[int, ...]
    steps: int
    samples_per_s: float | None = None
    name: str = "inputs"

    def transfer_s(self, samples: int) -> float:
        """Seconds to deliver ``samples`` samples, latency excluded (the analytic level's formula too)."""
        return input_transfer_s(samples, self.bytes_per_sample, self.bandwidth_Bps, self.samples_per_s)


class InputWorkers:
    """The input workers feeding one (the representative) wafer."""

    def __init__(self, env: simpy.Environment, settings: InputSettings):
        self.env = env
        self.settings = settings
        self.name = settings.name
        self.bytes_per_sample = settings.bytes_per_sample
        keys = [(step, mb) for step in range(settings.steps) for mb in settings.simulated_micro_batches]
        self.keys = keys
        self.ready = {k: env.event() for k in keys}
        self.mb_started = {k: env.event() for k in keys}
        self.busy_s = 0.0
        self.bytes = 0.0
        #: (start, end, step, micro_batch) of every transfer.
        self.spans: list[tuple[float, float, int, int]] = []

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.run())]

    def counters(self) -> dict[str, float]:
        return {self.name: self.busy_s, self.name + ".bytes": self.bytes}

    def utilisation(self, at: Reading) -> dict[str, float]:
        """The fraction of the run it was sending, under the Result's name for the representative wafer's input
        workers (whose counters both clusters keep as ``inputs``)."""
        return {"inputs": at.total("inputs") / at.seconds}

    def carried(self, at: Reading) -> dict[str, Carried]:
        """The representative's input bytes, on the edge into each wafer that trains."""
        return {"inputs->wafer": Carried(at.wafers, at.total("inputs.bytes"))}

    def waits(self) -> dict[int, str]:
        names = {id(ev): f"the input data of step {step}, micro-batch {mb}" for (step, mb), ev in self.ready.items()}
        for (step, mb), ev in self.mb_started.items():
            names[id(ev)] = f"the wafer to start step {step}, micro-batch {mb}"
        return names

    def state(self) -> dict[str, Held]:
        return {}  # one micro-batch ahead of the wafer by construction: its counters say what it did

    def run(self) -> Generator[simpy.Event, Any, None]:
        """Process: deliver micro-batches in order, at most one ahead of the wafer."""
        env, cfg = self.env, self.settings
        for i, key in enumerate(self.keys):
            if i > 0:
                yield self.mb_started[self.keys[i - 1]]
            samples = cfg.micro_batch_samples[key[1]]
            size = samples * self.bytes_per_sample
            busy = cfg.transfer_s(samples)
            dt = cfg.latency_s + busy
            yield env.timeout(dt)
            self.spans.append((env.now - dt, env.now, key[0], key[1]))
            self.busy_s += busy
            self.bytes += size
            self.ready[key].succeed()
