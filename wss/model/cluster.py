"""Build the cluster from a plan, wire its parts, run SimPy, and collect what happened.

This is the one place that knows the topology::

    input workers --------------------------------------------+
                                                              v
    MemoryX.stream -> swarmx.down.l1 -> ... -> swarmx.down.lD -> wafer
    MemoryX.receive <- memoryx.net.in <- swarmx.up.l1 <- ... <- swarmx.up.lD <- wafer
         |
         +-> optimizer coprocessor -> update-done events -> MemoryX.stream (next step)

Each part is a class owning its SimPy resources and processes
(``wss/model/components``); nothing starts until :func:`run_cluster` starts it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import simpy

from wss.model.components.inputs import InputWorkers
from wss.model.components.links import Link
from wss.model.components.memoryx import MemoryX
from wss.model.components.optimizer import OptimizerCoprocessor
from wss.model.components.swarmx import SwarmX
from wss.model.components.wafer import Wafer
from wss.model.fold import Fold, Snapshot, analyse
from wss.model.plan import Plan
from wss.model.program import Pass, build_program

__all__ = ["Cluster", "run_cluster"]


@dataclass
class Cluster:
    """The wired parts of one simulation, after it ran."""

    env: simpy.Environment
    plan: Plan
    program: list[Pass]
    memoryx: MemoryX
    optimizer: OptimizerCoprocessor
    swarmx: SwarmX
    memoryx_in: Link
    wafer: Wafer
    inputs: InputWorkers
    flash_channel: simpy.Resource
    events: int = 0
    snapshots: dict = field(default_factory=dict)
    fold: Fold | None = None

    def links(self) -> list[Link]:
        return [*self.swarmx.down, *self.swarmx.up, self.memoryx_in]

    def counters(self) -> dict[str, float]:
        """Every busy-time and byte counter, by name (what folding extrapolates)."""
        c = {
            "wafer.compute": self.wafer.compute_s,
            "memoryx.stream": self.memoryx.stream_busy_s,
            "memoryx.bytes_out": self.memoryx.bytes_out,
            "memoryx.bytes_read": self.memoryx.bytes_read,
            "memoryx.flash": self.memoryx.flash_busy_s + self.optimizer.flash_busy_s,
            "memoryx.optimizer": self.optimizer.busy_s,
            "inputs": self.inputs.busy_s,
            "inputs.bytes": self.inputs.bytes,
        }
        for link in self.links():
            c[link.name] = link.busy_s
            c[link.name + ".bytes"] = link.bytes
        return c

    def state(self) -> tuple:
        """What is queued or in flight anywhere: equal at two micro-batch starts means the run repeats."""
        stores = [link.inbox for link in self.links()] + [self.wafer.intake, self.memoryx.grad_inbox]
        staged = self.memoryx.staging.level if self.memoryx.staging is not None else 0.0
        return (tuple(len(store.items) for store in stores), self.optimizer.backlog(), staged)

    def total(self, counter: str) -> float:
        """A counter's final value on the unfolded time axis."""
        value = self.counters()[counter]
        return value + (self.fold.extra(counter) if self.fold is not None else 0.0)


def run_cluster(plan: Plan, record: bool = False, progress: Callable[[float], None] | None = None) -> Cluster:
    """Simulate every step of the plan; return the parts with their measurements.

    With ``record`` the links and MemoryX keep every span (for traces).
    ``progress`` is called with the fraction of the program done.
    """
    s = plan.scenario
    hw = s.hardware
    cap = s.simulation.buffer_chunks
    env = simpy.Environment()
    program = build_program(plan)

    flash_channel = simpy.Resource(env, capacity=1)
    optimizer = OptimizerCoprocessor(env, hw.memoryx, plan.optimizer, flash_channel)
    memoryx = MemoryX(env, plan, program, optimizer, flash_channel, hw.swarmx.hop_latency_s)
    swarmx = SwarmX(env, hw, cap)
    memoryx_in = Link(env, "memoryx.net.in", hw.memoryx.shards * hw.memoryx.network_bandwidth_Bps,
                      hw.swarmx.hop_latency_s, cap)
    inputs = InputWorkers(env, plan)
    wafer = Wafer(env, plan, program, cap, inputs.ready, inputs.mb_started)
    wafer.progress = progress

    if record:
        memoryx.record()
        for link in (*swarmx.down, *swarmx.up, memoryx_in):
            link.record()

    memoryx.connect(swarmx.down[0].inbox)
    swarmx.down[-1].connect(wafer.intake)
    wafer.connect(swarmx.up[0].inbox)
    swarmx.up[-1].connect(memoryx_in.inbox)
    memoryx_in.connect(memoryx.grad_inbox)

    cluster = Cluster(env, plan, program, memoryx, optimizer, swarmx, memoryx_in, wafer, inputs, flash_channel)
    if plan.fold_copies:
        def snapshot(step: int, mb: int) -> None:
            cluster.snapshots[(step, mb)] = Snapshot(env.now, len(wafer.timeline), cluster.counters(), cluster.state())

        wafer.on_micro_batch_start = snapshot

    for proc in (memoryx.stream(), memoryx.receive(), optimizer.run(), memoryx_in.run(), inputs.run(), *swarmx.processes()):
        env.process(proc)
    if plan.staging_bytes:
        env.process(memoryx.prefetch())
    done = env.process(wafer.run())
    env.run(until=done)
    # Let the last gradients drain and the last updates finish.
    last_step = s.training.steps - 1
    finals = [optimizer.done_event(k.index, last_step) for k in plan.kernels if k.owns_state]
    env.run(until=env.all_of(finals))
    cluster.events = _event_count(env)
    if plan.fold_copies:
        cluster.fold = analyse(cluster.snapshots, wafer.timeline, s.training.steps, len(plan.micro_batches) - 1,
                               plan.fold_copies)
    return cluster


def _event_count(env: simpy.Environment) -> int:
    """Events scheduled so far (SimPy numbers every scheduled event)."""
    counter = getattr(env, "_eid", None)
    if counter is None:
        return 0
    return next(counter)
