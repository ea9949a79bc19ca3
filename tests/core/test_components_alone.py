"""Each SimPy part built alone from its own settings, on a bare ``simpy.Environment``, with exact times.

These are the unit tests of the parts: no Scenario, no Plan, no cluster.  The
numbers are chosen to be exact in binary floating point where the test
compares with ``==``.
"""

from __future__ import annotations

import simpy

from wss.model.components.dram import SharedDram
from wss.model.components.inputs import InputSettings, InputWorkers
from wss.model.components.links import Chunk
from wss.model.components.memoryx import KernelStore, MemoryX, MemoryXSettings
from wss.model.components.optimizer import OptimizerCoprocessor, OptimizerSettings, UpdateJob
from wss.model.components.swarmx import SwarmX, SwarmXSettings
from wss.model.components.wafer import KernelWork, Wafer, WaferSettings
from wss.model.kernels.cycles import KernelCycles
from wss.model.machine.optimizer_costs import OPTIMIZER_COSTS, SCALAR_BYTES, StateTiers
from wss.model.program import Pass


def _optimizer(
    env: simpy.Environment, dram: SharedDram | None = None, optimizer: str = "sgd", **rates: float
) -> OptimizerCoprocessor:
    settings = OptimizerSettings(
        flash_read_Bps=rates.get("flash_read_Bps", 64.0),
        flash_write_Bps=rates.get("flash_write_Bps", 32.0),
        flops_per_s=rates.get("flops_per_s", 1e12),
        cost=OPTIMIZER_COSTS[optimizer],
        incoming_bytes_per_param=rates.get("incoming_bytes_per_param", 0.0),
    )
    dram = dram if dram is not None else SharedDram(env, rates.get("dram_Bps", 1024.0))
    return OptimizerCoprocessor(env, settings, simpy.Resource(env, capacity=1), dram)


# ------------------------------------------------------------------------------ the shared DRAM


def test_a_lone_dram_transfer_takes_bytes_over_bandwidth_exactly():
    env = simpy.Environment()
    dram = SharedDram(env, 64.0)
    done = dram.transfer(96.0)
    env.run(until=done)
    assert env.now == 1.5 and dram.busy_s == 1.5 and dram.bytes_moved == 96.0 and dram.in_progress == 0


def test_dram_transfers_in_progress_share_the_bandwidth_equally():
    """Processor sharing: A (64 B) at t=0 and B (64 B) at t=0.5 on 64 B/s.  A moves 32 B alone, then both move
    at 32 B/s: A ends at 1.5 s, B has 32 B left and ends alone at 2.0 s: the bytes add up, 128 B in 2 s."""
    env = simpy.Environment()
    dram = SharedDram(env, 64.0)
    ends: dict[str, float] = {}

    def user(name: str, start: float, nbytes: float):
        yield env.timeout(start)
        yield dram.transfer(nbytes)
        ends[name] = env.now

    env.process(user("a", 0.0, 64.0))
    env.process(user("b", 0.5, 64.0))
    env.run()
    assert ends == {"a": 1.5, "b": 2.0} and dram.busy_s == 2.0


def test_dram_zero_byte_transfer_is_immediate():
    env = simpy.Environment()
    dram = SharedDram(env, 64.0)
    assert dram.transfer(0.0).triggered and dram.in_progress == 0


# ------------------------------------------------------------------------------ the optimizer


def test_optimizer_update_takes_the_slower_of_dram_traffic_and_flops():
    env = simpy.Environment()
    opt = _optimizer(env, dram_Bps=1024.0, flops_per_s=1e12, incoming_bytes_per_param=2.0)
    env.process(opt.run())
    nnz = 64
    opt.submit(UpdateJob(0, 0, 0, "update", nnz, StateTiers(), 0.0), first=True, accumulated=False)
    env.run(until=opt.done_event(0, 0))
    cost = OPTIMIZER_COSTS["sgd"]
    moved = nnz * (cost.read_scalars + cost.write_scalars) * SCALAR_BYTES + nnz * 2.0  # + the incoming gradient
    assert env.now == moved / 1024.0  # DRAM-bound: 640 B / 1024 B/s
    assert opt.busy_s == env.now and opt.jobs[0].queued_s == 0.0


def test_optimizer_flash_update_reads_over_the_shared_channel_then_writes():
    env = simpy.Environment()
    opt = _optimizer(env, flash_read_Bps=64.0, flash_write_Bps=32.0)
    env.process(opt.run())
    opt.submit(UpdateJob(0, 0, 0, "update", 16, StateTiers("flash", "flash", "flash"), 0.0),
               first=True, accumulated=False)
    env.run(until=opt.done_event(0, 0))
    cost = OPTIMIZER_COSTS["sgd"]
    read = 16 * cost.read_scalars * SCALAR_BYTES / 64.0
    write = 16 * cost.write_scalars * SCALAR_BYTES / 32.0
    assert env.now == read + write and opt.flash_busy_s == read


def test_optimizer_job_runs_its_dram_and_flash_components_side_by_side():
    """Adam with its weights in DRAM and its moments in flash: the weight's read and write (8 B per parameter)
    through DRAM while m and v are read (8 B) over the flash channel and then written (8 B); the job lasts as
    long as the longer of the two."""
    env = simpy.Environment()
    opt = _optimizer(env, dram_Bps=64.0, flash_read_Bps=64.0, flash_write_Bps=32.0, optimizer="adam")
    env.process(opt.run())
    opt.submit(UpdateJob(0, 0, 0, "update", 16, StateTiers("dram", "dram", "flash"), 0.0),
               first=True, accumulated=False)
    env.run(until=opt.done_event(0, 0))
    (job,) = opt.jobs
    assert job.traffic is not None and job.traffic.dram_bytes == 16 * 8
    assert (job.traffic.flash_read_bytes, job.traffic.flash_write_bytes) == (16 * 8, 16 * 8)
    assert env.now == max(128 / 64.0, 128 / 64.0 + 128 / 32.0) == 6.0
    assert opt.flash_busy_s == 2.0


def test_optimizer_shares_dram_with_the_stream():
    """A 64 B update (SGD, 8 parameters) alone would take 1 s on 64 B/s; a 64 B stream read starts with it, so
    both move at 32 B/s and end together at 2 s."""
    env = simpy.Environment()
    dram = SharedDram(env, 64.0)
    opt = _optimizer(env, dram=dram)
    env.process(opt.run())
    opt.submit(UpdateJob(0, 0, 0, "update", 8, StateTiers(), 0.0), first=True, accumulated=False)
    read = dram.transfer(64.0)
    env.run(until=opt.done_event(0, 0))
    assert env.now == 2.0 and read.triggered


def test_optimizer_runs_jobs_one_at_a_time_in_arrival_order():
    env = simpy.Environment()
    opt = _optimizer(env, dram_Bps=1024.0)
    env.process(opt.run())
    for kernel in (0, 1):
        opt.submit(UpdateJob(kernel, 0, 0, "update", 64, StateTiers(), 0.0), first=True, accumulated=False)
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
    settings = MemoryXSettings(network_Bps=32.0, flash_read_Bps=1.0, latency_s=0.125,
                               staging_bytes=0.0, micro_batches=1, kernels=(kernel,))
    program = [_pass(0, "forward", 0, True), _pass(1, "backward", 0, True)]
    opt = _optimizer(env, dram_Bps=64.0)
    mx = MemoryX(env, settings, program, opt, opt.flash_channel, opt.dram)
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
    settings = MemoryXSettings(network_Bps=1024.0, flash_read_Bps=1.0, latency_s=0.0,
                               staging_bytes=0.0, micro_batches=1, kernels=(kernel,))
    program = [_pass(0, "forward", 0, True), _pass(1, "backward", 0, True)]
    opt = _optimizer(env, dram_Bps=1024.0)
    mx = MemoryX(env, settings, program, opt, opt.flash_channel, opt.dram)
    env.process(mx.receive())
    env.process(opt.run())
    for seq in (0, 1):
        mx.grad_inbox.put(Chunk(1, seq, 2, 4.0, ready_at=1.0))
    env.run(until=opt.done_event(0, 0))
    (job,) = opt.jobs
    # Each 4 B chunk lands in DRAM (4 / 1024 s) before the next is taken: the update arrives after both.
    assert (job.kind, job.arrived, job.nnz) == ("update", 1.0 + 8 / 1024, 64) and mx.bytes_in == 8.0
    assert opt.dram.bytes_moved >= 8.0


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
