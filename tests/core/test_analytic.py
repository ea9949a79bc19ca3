"""The whole simulator against closed forms: where the formula is exact it must agree to well under 1%.

Pipeline formula used throughout: a chunk stream through a chain of store-and-forward stages with
service times ``s_1..s_k`` and flight latency ``h`` after each finishes its ``n``-th chunk at
``sum_i (s_i + h) + (n - 1) max_i s_i`` (deterministic tandem), see wss/model/components/links.py.
"""

from __future__ import annotations

import math

import pytest
from core_helpers import dense_model, ideal_hardware, scenario_dict

import wss
from wss.model.kernels.cycles import dense_profile, kernel_cycles

#: DESIGN.md's bar ("within 0.5%"): the fill terms of each closed form must matter at this level, so a
#: formula without them would fail.  Each case below is then held to what it actually achieves.
DESIGN_REL = 5e-3
#: Formulas that are exact: only floating-point rounding separates them from the simulator (measured
#: at most 1e-15).
EXACT = 1e-12
#: Formulas exact but for the "ideal" stages of ideal_hardware(): a 1e18 B/s stage still takes
#: bytes / 1e18 s (about 1e-12 s per chunk), which the formula leaves out.
IDEAL_STAGES = 1e-9
MiB = 2**20


def only_records(result, name=None, phase=None, step=None, where="wafer"):
    return [
        r
        for r in result.records
        if r.where == where
        and (name is None or r.name == name)
        and (phase is None or r.phase == phase)
        and (step is None or r.step == step)
    ]


def chain_seconds(n_chunks: int, service: list[float], latency: float) -> float:
    """Time for the last of n equal chunks to leave a chain of stages (each adds ``latency``)."""
    return sum(s + latency for s in service) + (n_chunks - 1) * max(service)


# ---------------------------------------------------------------------------- (a) link-bound kernel


@pytest.mark.parametrize(
    "wafers, swarmx_Bps, io_Bps, hop_s, rel",
    [
        # Every stage of these is in the formula (measured 9.7e-16, 8.3e-16 and 5.9e-16).
        (1, 4e10, 1e10, 2e-6, EXACT),  # one level: the wafer edge runs at min(swarmx, io) = io
        (4, 1e10, 1e10, 5e-5, EXACT),  # fan-out 4: still one level
        (16, 4e10, 1e10, 2e-6, EXACT),  # two levels, the wafer I/O is the slowest edge
    ],
)
def test_link_bound_dense_kernel_matches_the_pipeline_formula(wafers, swarmx_Bps, io_Bps, hop_s, rel):
    raw = scenario_dict(
        model=dense_model(4096, 4096),
        wafers=wafers,
        steps=2,
        hardware=ideal_hardware(
            wafer={"io_bandwidth_Bps": io_Bps},
            swarmx={"link_bandwidth_Bps": swarmx_Bps, "hop_latency_s": hop_s},
        ),
        simulation={"chunk_bytes": 4 * MiB},
    )
    s = wss.load_scenario(raw)
    plan = wss.plan(s)
    (k,) = plan.kernels
    n = k.n_chunks
    assert n == 8 and not k.sparse_format
    assert k.stream_bytes == 4096 * 4096 * 2  # dense fp16: M K b_w
    assert k.grad_bytes == 4096 * 4096 * 2  # nnz b_g
    levels = plan.tree_levels
    assert levels == max(1, math.ceil(math.log(wafers, 4) - 1e-12))

    mx, w = s.hardware.memoryx, s.hardware.wafer
    down = [swarmx_Bps] * (levels - 1) + [min(swarmx_Bps, io_Bps)]
    c, g = k.stream_bytes / n, k.grad_bytes / n
    mx_out = max(k.read_bytes / n / (mx.shards * mx.dram_bandwidth_Bps), c / (mx.shards * mx.network_bandwidth_Bps))
    tokens = plan.micro_batches[0] * plan.tokens_per_sample
    last_chunk_compute = k.cycles[tokens].backward / n / w.clock_Hz
    # Forward and backward weights go down back to back: 2n chunks through MemoryX's port and the tree.
    last_weight_in = chain_seconds(2 * n, [mx_out] + [c / b for b in down], hop_s)
    # The last gradient chunk climbs the tree and MemoryX's input port and lands in DRAM; then the SGD
    # update reads the summed gradient (fp16) and the fp32 weight and writes the weight, DRAM-bound.
    dram = mx.shards * mx.dram_bandwidth_Bps
    grads_up = sum(g / b + hop_s for b in reversed(down)) + g / (mx.shards * mx.network_bandwidth_Bps) + hop_s
    grads_up += g / dram
    update = k.nnz * (8 + 2) / dram
    expected = last_weight_in + last_chunk_compute + grads_up + update

    bytes_term = 2 * k.stream_bytes / io_Bps  # bytes per pass x passes / bandwidth
    assert expected - bytes_term > 4 * DESIGN_REL * expected  # the fills matter even at 0.5%

    r = wss.simulate(s)
    assert r.weight_crossings_per_micro_batch == 2
    for step in r.steps:
        assert step.time_s == pytest.approx(expected, rel=rel)
    assert r.step_time_s == pytest.approx(expected, rel=rel)
    assert r.bound_by == "stream"
    # the wafer edge is busy for all the weight bytes of a step
    edge = f"swarmx.down.l{levels}"
    assert r.utilisation[edge] == pytest.approx(bytes_term / r.step_time_s, rel=1e-9)


def test_memoryx_dram_bound_kernel():
    """MemoryX reads fp32 master weights (4 B per weight) per stream: DRAM can be the one slow stage."""
    dram = 1e10
    raw = scenario_dict(
        model=dense_model(2048, 2048),
        hardware=ideal_hardware(memoryx={"shards": 2, "dram_bandwidth_Bps": dram}),
        simulation={"chunk_bytes": 1 * MiB},
    )
    s = wss.load_scenario(raw)
    plan = wss.plan(s)
    (k,) = plan.kernels
    n = k.n_chunks
    assert k.read_bytes == 2048 * 2048 * 4
    agg = 2 * dram
    read_chunk = k.read_bytes / n / agg
    tokens = plan.micro_batches[0] * plan.tokens_per_sample
    compute = k.cycles[tokens].backward / n / s.hardware.wafer.clock_Hz
    # One DRAM serves the stream's reads and the gradient intake's writes: it stays busy with both (in any
    # interleaving, the bytes add up) until the last weight chunk is read; the wafer computes that chunk,
    # its gradient lands in DRAM, and the SGD update reads the gradient (fp16) and the fp32 weight and
    # writes the weight.
    grad_chunk = k.grad_bytes / n / agg
    update = k.nnz * (8 + 2) / agg
    expected = 2 * n * read_chunk + (n - 1) * grad_chunk + compute + grad_chunk + update
    r = wss.simulate(s)
    # Not bit-exact: the network, SwarmX, wafer I/O and input stages are 1e18 B/s, not infinite (measured 7.8e-10).
    assert r.step_time_s == pytest.approx(expected, rel=IDEAL_STAGES)
    # The stream is busy while it reads, and slower while the gradient intake shares the DRAM.
    stream_busy = 2 * n * read_chunk + (n - 1) * grad_chunk
    assert r.utilisation["memoryx.stream"] == pytest.approx(stream_busy / r.step_time_s, rel=IDEAL_STAGES)
    # Every byte through DRAM: both streams' reads, the gradients' intake and the update's traffic.
    dram_bytes = 2 * k.read_bytes + k.grad_bytes + k.nnz * (8 + 2)
    assert r.utilisation["memoryx.dram"] == pytest.approx(dram_bytes / agg / r.step_time_s, rel=1e-9)


# ---------------------------------------------------------------------------- (b) pure broadcast


# Not bit-exact: MemoryX's DRAM and network and the inputs are 1e18 B/s stages, not infinite (measured
# 1.5e-10, 1.1e-10, 1.7e-10 and 1.4e-10).
@pytest.mark.parametrize("wafers, fan_out, levels", [(64, 4, 3), (64, 2, 6), (5, 4, 2), (256, 4, 4)])
def test_broadcast_over_the_tree_matches_bytes_over_bw_plus_levels_of_fill(wafers, fan_out, levels):
    B, h = 1e10, 1e-4
    raw = scenario_dict(
        model=dense_model(4096, 4096),
        wafers=wafers,
        hardware=ideal_hardware(
            wafer={"io_bandwidth_Bps": B}, swarmx={"fan_out": fan_out, "link_bandwidth_Bps": B, "hop_latency_s": h},
            allow_beyond_published_limits=True,  # 256 wafers: more than the 192 CS-2 published
        ),
        simulation={"chunk_bytes": 4 * MiB},
    )
    s = wss.load_scenario(raw)
    plan = wss.plan(s)
    assert plan.tree_levels == levels
    assert plan.nodes_per_level[0] == 1
    assert plan.nodes_per_level[-1] == math.ceil(wafers / fan_out)
    (k,) = plan.kernels
    n, c = k.n_chunks, k.stream_bytes / k.n_chunks
    tokens = plan.micro_batches[0] * plan.tokens_per_sample
    compute = k.cycles[tokens].forward / n / s.hardware.wafer.clock_Hz

    # bytes / bw + levels * (hop latency + chunk / bw), with MemoryX's own port adding one hop of latency
    expected_last_chunk = k.stream_bytes / B + levels * (h + c / B) - c / B + h
    fills = expected_last_chunk - k.stream_bytes / B
    assert fills > 10 * DESIGN_REL * expected_last_chunk  # the fills matter even at 0.5%

    r = wss.simulate(s)
    (fwd,) = only_records(r, name=k.kernel.name, phase="forward", step=0)
    assert fwd.end_s - compute == pytest.approx(expected_last_chunk, rel=IDEAL_STAGES)
    assert fwd.bytes_in == pytest.approx(k.stream_bytes)
    assert r.cluster["tree_levels"] == levels


# ---------------------------------------------------------------------------- (c) compute-bound kernel


def test_compute_bound_kernel_matches_the_cycle_model():
    raw = scenario_dict(
        model=dense_model(4096, 4096),
        global_batch=8192,
        steps=2,
        hardware=ideal_hardware(),
        simulation={"chunk_bytes": 4 * MiB},
    )
    s = wss.load_scenario(raw)
    plan = wss.plan(s)
    assert plan.micro_batches == [8192]
    (k,) = plan.kernels
    assert k.n_chunks == 8
    w = s.hardware.wafer
    kc = kernel_cycles("matmul", dense_profile(4096, 4096), 8192, w)
    # the closed form, by hand, on the kernel's lanes of R' rows: busiest row x ceil(ceil(T/L/C)/simd)
    # + M x overhead + (R' + C) x hop
    rows = w.core_rows // kc.lanes
    t_c = math.ceil(math.ceil(8192 / kc.lanes) / w.core_cols)
    assert kc.bound_by == "axpy"
    # ... over the achieved fraction of that ideal schedule (WaferConfig.kernel_efficiency)
    assert kc.forward == (math.ceil(4096 / rows) * 4096 * math.ceil(t_c / w.simd_width) + 4096 * 4 + (
        rows + w.core_cols
    ) * w.hop_latency_cycles) / w.kernel_efficiency

    r = wss.simulate(s)
    for step in range(2):
        (fwd,) = only_records(r, name="dense", phase="forward", step=step)
        (bwd,) = only_records(r, name="dense", phase="backward", step=step)
        assert fwd.cycles == pytest.approx(kc.forward, rel=1e-12)
        assert bwd.cycles == pytest.approx(kc.backward, rel=1e-12)
        # + tiny fills: step 0's forward first waits 6.7e-11 s for its 64 MiB of inputs at 1e18 B/s (7.9e-7)
        assert fwd.end_s - fwd.start_s == pytest.approx(kc.forward / w.clock_Hz, rel=1e-6)
        assert fwd.bound_by == "compute" and bwd.bound_by == "compute"

    nonweight = sum(f + b for f, b in plan.wafer_op_seconds.values())
    compute = (kc.forward + kc.backward) / w.clock_Hz + nonweight
    # Not exact: the "ideal" 1e18 B/s stages still take bytes / 1e18 s.  Step 0 waits 6.7e-11 s for its
    # 64 MiB of inputs and every step about 2e-11 s for a weight chunk's fill and the update: 5.2e-11 s a
    # step on average, 2.2e-7 of it.  Those fills are not in the closed form, so the bound is measured.
    assert r.step_time_s == pytest.approx(compute, rel=2.5e-7)
    assert r.step_time_s >= compute * (1 - 1e-12)  # fills only add
    assert r.bound_by == "compute"
    assert r.breakdown_s["compute"] == pytest.approx(compute, rel=1e-9)
    assert r.utilisation["wafer.compute"] == pytest.approx(compute / r.step_time_s, rel=1e-9)


def test_stream_and_compute_overlap_max_not_sum():
    """A kernel takes about max(bytes / link_bw, compute) + fill: balanced stream and compute overlap."""
    base = dict(model=dense_model(4096, 4096), global_batch=8192, simulation={"chunk_bytes": 4 * MiB})
    compute_only = wss.simulate(scenario_dict(hardware=ideal_hardware(), **base)).step_time_s
    # a link that alone would take about as long as the compute
    bw = 2 * 4096 * 4096 * 2 / compute_only
    link_bound = ideal_hardware(wafer={"io_bandwidth_Bps": bw}, swarmx={"link_bandwidth_Bps": bw})
    both = wss.simulate(scenario_dict(hardware=link_bound, **base)).step_time_s
    assert both < 1.5 * compute_only  # overlapped: far below compute + stream = 2 x compute_only
    assert both > compute_only
