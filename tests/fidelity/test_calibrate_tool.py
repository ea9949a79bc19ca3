"""tools/calibrate.py: a parameter key with ``@WAFER`` moves only the rows run on that wafer (one value per chip
generation), as the team's per-chip efficiency experiment needs; plain keys move every row."""

from __future__ import annotations

from pathlib import Path

import pytest
from fidelity_helpers import load_tool

import wss

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def calibrate():
    return load_tool("calibrate")


def test_wafer_keys_apply_only_to_their_wafer(calibrate):
    cs2 = wss.load_scenario(REPO / "scenarios" / "gpt3_175b.yaml")
    cs3 = wss.load_scenario(REPO / "scenarios" / "cs3_gpt3_13b.yaml")
    assert (cs2.hardware.wafer.name, cs3.hardware.wafer.name) == ("wse2", "wse3")
    values = {"hardware.wafer.kernel_efficiency@wse2": 0.4, "hardware.wafer.kernel_efficiency@wse3": 0.8,
              "hardware.runtime.step_overhead_s": 0.01}
    assert calibrate._for_case(values, cs2) == {"hardware.wafer.kernel_efficiency": 0.4,
                                                "hardware.runtime.step_overhead_s": 0.01}
    assert calibrate._for_case(values, cs3) == {"hardware.wafer.kernel_efficiency": 0.8,
                                                "hardware.runtime.step_overhead_s": 0.01}
    assert calibrate._shipped(cs3, "hardware.wafer.kernel_efficiency@wse3") == cs3.hardware.wafer.kernel_efficiency


def test_the_errors_follow_each_rows_own_value(calibrate):
    """At the shipped value for one wafer and a lower one for the other, only the other's rows slow down."""
    cases = [c for c in calibrate.load_cases(calibrate.CASES) if c.name.startswith(("measured_m1_", "measured_m6_"))]
    base = calibrate.errors_at(cases, {}, analytic=True)
    shipped = calibrate._shipped(calibrate._one(cases[0]), "hardware.wafer.kernel_efficiency")
    moved = calibrate.errors_at(cases, {"hardware.wafer.kernel_efficiency@wse3": shipped / 2}, analytic=True)
    m1, m6 = (next(c.name for c in cases if c.name.startswith(p)) for p in ("measured_m1_", "measured_m6_"))
    assert moved[m1] == base[m1]  # CS-2 row untouched
    assert moved[m6] < base[m6]  # CS-3 row slower


def test_an_unknown_parameter_is_refused(calibrate, capsys):
    assert calibrate.main(["--params", "hardware.wafer.no_such_field@wse2", "--analytic"]) == 2
    assert "unknown" in capsys.readouterr().err


def test_an_input_pipelines_cost_moves_only_the_rows_that_pay_it(calibrate):
    """The masked-token cost moves the ESM-2 rows (the one it was fitted on and the one that checks it), not a
    row without a pipeline nor the image row; the runtime's parameters are fitted on the rows without one."""
    cases = {c.name.split("_")[1]: c for c in calibrate.load_cases(calibrate.CASES)}
    key = "hardware.input_pipeline.prepare_s_per_token"
    values = {key: 1e-6, "hardware.runtime.step_overhead_s": 0.1}
    assert calibrate._for_case(values, calibrate._one(cases["m4"])) == {key: 1e-6,
                                                                         "hardware.runtime.step_overhead_s": 0.1}
    assert key in calibrate._for_case(values, calibrate._one(cases["m5"]))
    for row in ("m1", "m12"):
        assert key not in calibrate._for_case(values, calibrate._one(cases[row]))
    runtime = ["hardware.runtime.step_overhead_s"]
    assert calibrate._fits(cases["m4"], [key]) and not calibrate._fits(cases["m4"], runtime)
    assert calibrate._fits(cases["m1"], runtime) and not calibrate._fits(cases["m1"], [key])
