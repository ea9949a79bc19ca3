"""tools/achieved_fractions.py: each measured row's weight kernels, the fraction of peak wss gives them against the
fraction their log implies.  The reading must be consistent with the model it reads: wss's own fraction is the
cycle model's ideal times the chip's fitted efficiency, and the kernels' FLOPs are 6 per weight per token."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from fidelity_helpers import load_tool

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tool():
    return load_tool("achieved_fractions")


@pytest.fixture(scope="module")
def gpt2(tool):
    (case,) = tool.load_cases([REPO / "scenarios" / "validation" / "measured_m7_gpt2_small_r23.yaml"])
    return case, tool.reading(case)


def test_wss_fraction_is_the_ideal_times_the_fitted_efficiency(gpt2):
    case, r = gpt2
    (scenario,) = case.scenarios.values()
    assert 0 < r.ideal <= 1
    assert math.isclose(r.wss, r.ideal * scenario.hardware.wafer.kernel_efficiency, rel_tol=1e-6)
    assert r.needed is not None and r.logged is not None
    assert math.isclose(r.needed * r.ideal, r.logged, rel_tol=1e-12)


def test_the_kernels_flops_are_six_per_weight_per_token(tool, gpt2):
    case, _ = gpt2
    (scenario,) = case.scenarios.values()
    from wss.model.workload.builder import expand_model
    from wss.model.workload.ops import StreamedKernel

    ops = expand_model(scenario.workload.model, scenario.workload.sparsity, scenario.seq_len)
    matmul_weights = sum(op.params for op in ops if isinstance(op, StreamedKernel) and op.kind == "matmul")
    tokens = scenario.training.global_batch * scenario.seq_len
    assert math.isclose(tool.weight_flops(scenario), 6 * matmul_weights * tokens, rel_tol=1e-12)


def test_an_input_bound_row_gives_no_reading_of_its_kernels(tool):
    (case,) = tool.load_cases([REPO / "scenarios" / "validation" / "measured_m4_esm2_35m_cs2.yaml"])
    r = tool.reading(case)
    assert r.input_bound and r.logged is None and r.needed is None
    assert "-" in tool.table([r]).splitlines()[1]
