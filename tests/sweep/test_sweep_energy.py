"""Sweep rows carry the Result's energy (docs/model.md, "Energy")."""

from __future__ import annotations

from pathlib import Path

import pytest

import wss
from wss.studies.sweep import METRIC_COLUMNS

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml"


def test_sweep_rows_carry_energy_per_step_and_per_token():
    assert {"energy_per_step_J", "energy_per_token_J", "average_power_W"} <= set(METRIC_COLUMNS)
    table = wss.sweep(SCENARIO, {"hardware.wafers": [1, 2]}, executor="serial")
    for wafers, row in zip((1, 2), table.to_dict("records")):
        result = wss.simulate(wss.load_scenario(SCENARIO, {"hardware.wafers": wafers}))
        assert row["energy_per_step_J"] == pytest.approx(result.energy.per_step_J)
        assert row["energy_per_token_J"] == pytest.approx(result.energy.per_token_J)
        assert row["average_power_W"] == pytest.approx(result.energy.average_power_W)
