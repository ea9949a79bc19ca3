"""Each SimPy part built alone from its own settings, on a bare ``simpy.Environment``, with exact times.

These are the unit tests of the parts: no Scenario, no Plan, no cluster.  The
numbers are chosen to be exact in binary floating point where the test
compares with ``==``.
"""

from __future__ import annotations

import simpy

from wss.model.components.inputs import InputSettings, InputWorkers
from wss.model.components.links import Chunk
from wss.model.components.memoryx import KernelStore, MemoryX, MemoryXSettings
from wss.model.components.optimizer import OptimizerCoprocessor, OptimizerSettings, UpdateJob
from wss.model.components.optimizer_costs import OPTIMIZER_COSTS, SCALAR_BYTES
from wss.model.components.swarmx import SwarmX, SwarmXSettings
from wss.model.components.wafer import KernelWork, Wafer, WaferSettings
from wss.model.kernels.cycles import KernelCycles
from wss.model.program import Pass


def _optimizer(env: simpy.Environment, **rates: float) -> OptimizerCoprocessor:
    settings = OptimizerSettings(
        dram_Bps=rates.get("dram_Bps", 1024.0),
        flash_read_Bps=rates.get("flash_read_Bps", 64.0),
        flash_write_Bps=rates.get("flash_write_Bps", 32.0),
        flops_per_s=rates.get("flops_per_s", 1e12),
        cost=OPTIMIZER_COSTS["sgd"],
    )
    return OptimizerCoprocessor(env, settings, simpy.Resource(env, capacity=1))


def test_optimizer_update_takes_the_slower_of_dram_traffic_and_flops():
    env = simpy.Environment()
    opt = _optimizer(env, dram_Bps=1024.0, flops_per_s=1e12)
    env.process(opt.run())
    nnz = 64
    opt.submit(UpdateJob(0, 0, 0, "update", nnz, "dram", 0.0), first=True, accumulated=False)
    env.run(until=opt.done_event(0, 0))
    cost = OPTIMIZER_COSTS["sgd"]
    moved = nnz * (cost.read_scalars + cost.write_scalars) * SCALAR_BYTES
    assert env.now == moved / 1024.0  # DRAM-bound: 512 B / 1024 B/s
    assert opt.busy_s == env.now and opt.jobs[0].queued_s == 0.0


def test_optimizer_flash_update_reads_over_the_shared_channel_then_writes():
    env = simpy.Environment()
    opt = _optimizer(env, flash_read_Bps=64.0, flash_write_Bps=32.0)
    env.process(opt.run())
    opt.submit(UpdateJob(0, 0, 0, "update", 16, "flash", 0.0), first=True, accumulated=False)
    env.run(until=opt.done_event(0, 0))
    cost = OPTIMIZER_COSTS["sgd"]
    read = 16 * cost.read_scalars * SCALAR_BYTES / 64.0
    write = 16 * cost.write_scalars * SCALAR_BYTES / 32.0
    assert env.now == read + write and opt.flash_busy_s == read


def test_optimizer_runs_jobs_one_at_a_time_in_arrival_order():
    env = simpy.Environment()
    opt = _optimizer(env, dram_Bps=1024.0)
    env.process(opt.run())
    for kernel in (0, 1):
        opt.submit(UpdateJob(kernel, 0, 0, "update", 64, "dram", 0.0), first=True, accumulated=False)
    env.run(until=opt.done_event(1, 0))
    assert [j.kernel for j in opt.jobs] == [0, 1]
    assert opt.jobs[1].start == opt.jobs[0].end and opt.jobs[1].queued_s == opt.jobs[0].end


def test_inputs_deliver_one_micro_batch_ahead_of_the_wafer():
    env = simpy.Environment()
    settings = InputSettings(bandwidth_Bps=100.0, latency_s=0.5, bytes_per_sample=25.0,
                             micro_batch_samples=(4, 2), simulated_micro_batches=(0, 1), steps=1)
    inputs = InputWorkers(env, settings)
    env.process(inputs.run())
    env.run(until=5.0)
    assert inputs.ready[(0, 0)].triggered and not inputs.ready[(0, 1)].triggered  # waits for mb 0 to start
    inputs.mb_started[(0, 0)].succeed()
    env.run(until=inputs.ready[(0, 1)])
    assert inputs.spans == [(0.0, 1.5, 0, 0), (5.0, 6.0, 0, 1)]  # 100 B -> 1 s + 0.5 s; 50 B -> 0.5 s + 0.5 s
    assert inputs.bytes == 150.0 and inputs.busy_s == 1.5


def test_swarmx_chain_delivers_at_the_closed_form_time():
    env = simpy.Environment()
    settings = SwarmXSettings(levels=3, nodes_per_level=(1, 4, 16), link_bandwidth_Bps=8.0,
                              leaf_bandwidth_Bps=4.0, hop_latency_s=0.25, port_buffer_bytes=2)
    tree = SwarmX(env, settings)
    assert [link.name for link in tree.down] == ["swarmx.down.l1", "swarmx.down.l2", "swarmx.down.l3"]
    assert [link.name for link in tree.up] == ["swarmx.up.l3", "swarmx.up.l2", "swarmx.up.l1"]
    assert tree.down[-1].bandwidth_Bps == 4.0 and tree.up[0].bandwidth_Bps == 4.0  # the edges into the wafers
    sink = simpy.Store(env)
    tree.down[-1].connect(sink)
    tree.up[-1].connect(simpy.Store(env))
    for link in (*tree.down, *tree.up):
        env.process(link.run())
    arrivals: list[float] = []

    def feed():
        for i in range(3):
            yield tree.down[0].inbox.put(Chunk(0, i, 3, 8.0))

    def drain():
        for _ in range(3):
            chunk = yield sink.get()
            arrivals.append(chunk.ready_at)

    env.process(feed())
    env.run(until=env.process(drain()))
    # Pipelined store-and-forward: 1 s + 1 s + 2 s of serialisation, three hops of 0.25 s, then the
    # slowest (leaf) link sets the spacing of the next chunks: 2 s each.
    assert arrivals == [4.75, 6.75, 8.75]
    assert tree.edges_below(3, wafers=16) == 16 and tree.edges_below(1, wafers=16) == 4


def _pass(index: int, phase: str, kernel: int | None, streamed: bool, tokens: int = 8, op: int = 0) -> Pass:
    return Pass(index, 0, 0, op, phase, kernel, streamed, False, tokens)


def test_memoryx_streams_each_chunk_at_the_slower_of_dram_and_network():
    env = simpy.Environment()
    kernel = KernelStore(index=0, nnz=10, n_chunks=4, stream_bytes=64.0, read_bytes=128.0, tier="dram",
                         state_owner=0, shares_accumulator=False)
    settings = MemoryXSettings(dram_Bps=64.0, network_Bps=32.0, flash_read_Bps=1.0, latency_s=0.125,
                               staging_bytes=0.0, micro_batches=1, kernels=(kernel,))
    program = [_pass(0, "forward", 0, True), _pass(1, "backward", 0, True)]
    opt = _optimizer(env)
    mx = MemoryX(env, settings, program, opt, opt.flash_channel)
    sink = simpy.Store(env)
    mx.connect(sink)
    env.process(mx.stream())
    env.run()
    chunks = sink.items
    assert len(chunks) == 8 and [c.pass_index for c in chunks] == [0] * 4 + [1] * 4
    # per chunk max(32 B / 64 B/s, 16 B / 32 B/s) = 0.5 s; stamped to reach the root one hop later
    assert [c.ready_at for c in chunks] == [0.5 * (i + 1) + 0.125 for i in range(8)]
    assert mx.bytes_out == 128.0 and mx.bytes_read == 256.0 and mx.stream_busy_s == 4.0


def test_memoryx_hands_the_last_gradient_chunk_to_the_optimizer_as_an_update():
    env = simpy.Environment()
    kernel = KernelStore(index=0, nnz=64, n_chunks=2, stream_bytes=8.0, read_bytes=8.0, tier="dram",
                         state_owner=0, shares_accumulator=False)
    settings = MemoryXSettings(dram_Bps=1024.0, network_Bps=1024.0, flash_read_Bps=1.0, latency_s=0.0,
                               staging_bytes=0.0, micro_batches=1, kernels=(kernel,))
    program = [_pass(0, "forward", 0, True), _pass(1, "backward", 0, True)]
    opt = _optimizer(env)
    mx = MemoryX(env, settings, program, opt, opt.flash_channel)
    env.process(mx.receive())
    env.process(opt.run())
    for seq in (0, 1):
        mx.grad_inbox.put(Chunk(1, seq, 2, 4.0, ready_at=1.0))
    env.run(until=opt.done_event(0, 0))
    (job,) = opt.jobs
    assert (job.kind, job.arrived, job.nnz) == ("update", 1.0, 64) and mx.bytes_in == 8.0


def test_wafer_computes_each_chunk_and_sends_gradients_in_backward():
    env = simpy.Environment()
    work = KernelWork(n_chunks=2, grad_bytes=6.0, cycles={8: KernelCycles(100.0, 200.0, 1, 1, 1)})
    settings = WaferSettings(clock_Hz=100.0, kernels=(work,), op_seconds={(1, 8): (0.25, 0.5)}, loss_op=1,
                             ingress_buffer_bytes=12)
    program = [_pass(0, "forward", 0, True), _pass(1, "forward", None, False, op=1),
               _pass(2, "backward", None, False, op=1), _pass(3, "backward", 0, True)]
    ready = {(0, 0): env.event().succeed()}
    started = {(0, 0): env.event()}
    wafer = Wafer(env, settings, program, ready, started)
    outlet = simpy.Store(env)
    wafer.connect(outlet)
    for pass_index in (0, 3):
        for seq in (0, 1):
            wafer.intake.put(Chunk(pass_index, seq, 2, 1.0))
    env.run(until=env.process(wafer.run()))
    # forward kernel 100 cycles at 100 Hz = 1 s; loss op 0.25 s; its backward 0.5 s; backward kernel 2 s
    assert env.now == 3.75 and wafer.compute_s == 3.75
    assert wafer.loss_times == {(0, 0): 1.25}
    assert [c.bytes for c in outlet.items] == [3.0, 3.0] and [p.cycles for p in wafer.passes] == [100.0, 0, 0, 200.0]
    assert started[(0, 0)].triggered
