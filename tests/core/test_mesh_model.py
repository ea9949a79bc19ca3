"""The closed-form cycle model (kernels/cycles.py) against the core-level mesh model (kernels/mesh_model.py).

The mesh model plays a kernel out core by core on one lane: rows running their AXPYs per non-zero without
barriers, each output feature's partial sums moving hop by hop round the lane's ring.  Measured agreement
of forward and backward cycles over the cases below, dense and sparse, narrow and wide, one lane and
the lanes the closed form chooses: within 1.05% (the closed form slightly optimistic where the ring
binds or nearly binds: ``max(cores, ring)`` ignores the hops that wait on a row that is late for one
feature), and within 0.06% wherever the kernel is core-bound.
"""

from __future__ import annotations

import numpy as np
import pytest

from wss.model.kernels.cycles import NnzProfile, dense_profile, kernel_cycles
from wss.model.kernels.mesh_model import lane_rows_nnz, mesh_kernel, mesh_pass
from wss.model.scenario import WaferConfig

AGREEMENT = 0.015  # measured: at most 1.05% over CASES (backward of a one-lane 70%-sparse ring-bound kernel)


def wafer(**over: object) -> WaferConfig:
    fields: dict[str, object] = dict(core_rows=32, core_cols=16, sram_per_core_bytes=1024, clock_Hz=1e9, simd_width=4,
                                     hop_latency_cycles=2, io_bandwidth_Bps=1e9, partial_sum_overhead_cycles=4,
                                     partial_sum_ring_wavelets_per_cycle=1)
    fields.update(over)
    return WaferConfig(**fields)


def profile_of(mask: np.ndarray) -> NnzProfile:
    if mask.all():
        return dense_profile(*mask.shape)
    return NnzProfile(mask.shape[0], mask.shape[1], int(mask.sum()), mask.sum(axis=0).astype(np.int64),
                      mask.sum(axis=1).astype(np.int64))


# (out, in, tokens, density, max_lanes): narrow and wide, dense and sparse, one lane and free lanes.
CASES = [
    (256, 64, 16 * 64, 1.0, 1),  # narrow, one lane: ring-bound
    (256, 64, 16 * 64, 1.0, None),  # the same in lanes: core-bound
    (256, 64, 16 * 64, 0.3, 1),  # sparse, one lane: ring-bound forward and backward
    (256, 64, 16 * 64, 0.3, None),
    (256, 256, 16 * 64, 1.0, None),  # wide
    (128, 512, 16 * 128, 0.1, None),  # wide, 90% sparse
    (512, 32, 16 * 256, 0.5, 1),  # very narrow, one lane
    (512, 32, 16 * 256, 1.0, None),
    (96, 96, 16 * 40, 1.0, 2),  # near the crossover of cores and ring
    (512, 512, 16 * 32, 1.0, None),
]


@pytest.mark.parametrize("out, inp, tokens, density, max_lanes", CASES)
def test_closed_form_agrees_with_the_mesh_model(out: int, inp: int, tokens: int, density: float,
                                                max_lanes: int | None) -> None:
    rng = np.random.default_rng(out + inp + tokens)
    mask = rng.random((out, inp)) < density
    w = wafer(max_lanes=max_lanes)
    kc = kernel_cycles("matmul", profile_of(mask), tokens, w)
    mesh = mesh_kernel(mask, tokens, w, kc.lanes)
    assert kc.forward == pytest.approx(mesh.forward, rel=AGREEMENT)
    assert kc.backward == pytest.approx(mesh.backward, rel=AGREEMENT)


def test_the_mesh_model_finds_the_ring_and_the_cores_where_the_closed_form_does() -> None:
    """One lane of a narrow kernel: the busiest ring hop works longer than the busiest row, and the pass
    lasts as long as the hop; in lanes the rows work longest and the pass lasts as long as they do."""
    mask = np.ones((256, 64), dtype=bool)
    one = mesh_kernel(mask, 16 * 64, wafer(), 1).forward_pass
    assert one.busiest_hop_cycles > one.busiest_row_cycles
    assert one.cycles == pytest.approx(one.busiest_hop_cycles, rel=0.01)
    lanes = kernel_cycles("matmul", dense_profile(256, 64), 16 * 64, wafer()).lanes
    assert lanes > 1
    many = mesh_kernel(mask, 16 * 64, wafer(), lanes).forward_pass
    assert many.busiest_row_cycles > many.busiest_hop_cycles
    assert many.cycles == pytest.approx(many.busiest_row_cycles, rel=0.01)
    assert many.cycles < 0.7 * one.cycles


def test_the_closed_forms_lane_choice_is_near_the_mesh_models_best() -> None:
    """Over every lane count, the mesh model's fastest kernel is within 2% of the one at the closed form's
    choice (which estimates the rows' loads from the mean density)."""
    rng = np.random.default_rng(5)
    mask = rng.random((192, 96)) < 0.3
    w, tokens = wafer(), 16 * 96
    chosen = kernel_cycles("matmul", profile_of(mask), tokens, w).lanes
    total = {n: (lambda k: k.forward + k.backward)(mesh_kernel(mask, tokens, w, n)) for n in range(1, 17)}
    assert total[chosen] <= 1.02 * min(total.values())


def test_rows_do_not_wait_for_each_other() -> None:
    """Hot and cold rows that alternate per feature: no barrier, so the pass takes the busiest row's total,
    not the sum of each feature's slowest row."""
    nnz = np.array([[4, 0], [0, 4]] * 8)
    w = wafer(partial_sum_ring_wavelets_per_cycle=1e9, hop_latency_cycles=0)
    p = mesh_pass(nnz, 4, w)
    assert p.busiest_row_cycles == 8 * 4 + 16 * 4  # 8 features with 4 one-cycle AXPYs, and 16 overheads
    assert p.cycles == pytest.approx(p.busiest_row_cycles, abs=1)
    assert p.cycles < 16 * (4 + 4)  # a barrier per feature would wait for the hot row every time


def test_lane_rows_nnz_deals_the_input_features() -> None:
    mask = np.array([[1, 1, 0, 1], [1, 0, 0, 1]], dtype=bool)  # column counts 2, 1, 0, 2
    nnz = lane_rows_nnz(mask, 2)
    assert nnz.sum() == mask.sum()
    assert list(nnz.sum(axis=0)) == [3, 2]  # sorted 2, 2, 1, 0 dealt to rows 0, 1, 0, 1
