"""A run never deadlocks silently: flash staging counts whole bytes, and a stall is a clear error.

The GPT-3 175B flash-spill case (most of the model in flash, DRAM staging of a
fraction of 100 GB) used to end in SimPy's "No scheduled events left" because
float byte counts in the staging area left a put blocked for ever.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import simpy
from core_helpers import dense_model, ideal_hardware, scenario_dict
from hypothesis import given, settings
from hypothesis import strategies as st

import wss
from wss.cli import main
from wss.errors import SimulationStalled
from wss.model.components.memoryx import MemoryX
from wss.model.sim.stall import run_or_explain
from wss.model.simulate import simulate_detailed

REPO = Path(__file__).resolve().parents[2]
GPT3 = REPO / "scenarios" / "gpt3_175b.yaml"
SPILL = {"hardware.memoryx.preset": "memoryx-2.4pb", "hardware.memoryx.dram_capacity_bytes": 1e11}


def test_the_gpt3_flash_spill_case_runs():
    result = wss.simulate(wss.load_scenario(GPT3, SPILL))
    assert math.isfinite(result.step_time_s) and result.step_time_s > 0
    assert result.memory.memoryx_flash_bytes > 0.5 * result.memory.memoryx_state_bytes


def _flash_model(dram_bytes: float, staging_fraction: float, chunk_bytes: float, wafers: int) -> dict:
    """Four kernels of 30001 x 29999 (7.2 GB of SGD state each) around a DRAM of a few GB.

    Large stores and widths that are not powers of two make byte counts that are not exact in binary,
    as in real models: the case where float levels in the staging area used to drift.
    """
    return scenario_dict(
        model=dense_model(30001, 29999, 30001, 29999, 30001),
        steps=3,
        wafers=wafers,
        global_batch=wafers,
        simulation={"chunk_bytes": chunk_bytes},
        hardware=ideal_hardware(
            memoryx={
                "shards": 3,
                "dram_capacity_bytes": dram_bytes,
                "flash_capacity_bytes": 1e11,
                "flash_read_bandwidth_Bps": 1e10,
                "flash_write_bandwidth_Bps": 5e9,
                "prefetch_buffer_fraction": staging_fraction,
            }
        ),
    )


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    dram_bytes=st.floats(1e9, 1.2e10),
    staging_fraction=st.floats(0.01, 0.9),
    chunk_bytes=st.floats(1e6, 5e8),
    wafers=st.sampled_from([1, 2, 3]),
)
def test_any_flash_capacity_and_staging_fraction_finishes(dram_bytes, staging_fraction, chunk_bytes, wafers):
    """Every run ends, and the staging area gets back every byte it lent (whole bytes: no drift)."""
    scenario = wss.load_scenario(_flash_model(dram_bytes, staging_fraction, chunk_bytes, wafers))
    result, cluster = simulate_detailed(scenario, record=False)
    assert math.isfinite(result.step_time_s) and result.step_time_s > 0
    staging = cluster.memoryx.staging
    if staging is not None:
        assert staging.level == staging.capacity


def test_run_or_explain_names_the_blocked_part_and_what_it_waits_for():
    env = simpy.Environment()
    full = simpy.Store(env, capacity=1)
    full.put("x")

    def stuck():
        yield full.put("y")

    proc = env.process(stuck())
    with pytest.raises(SimulationStalled) as exc:
        run_or_explain(env, proc, {"sender": proc}, lambda: ({id(full): "the inbox of l1"}, "pass 3 of 9"))
    message = str(exc.value)
    assert message.startswith("the simulation stopped making progress at t = 0 s (pass 3 of 9)")
    assert "sender waits to put into the inbox of l1, which is full (1 of 1 items)" in message


def _starve_staging(monkeypatch):
    """Make every flash chunk need one byte more DRAM staging than exists: the prefetch can never start."""
    real_init = MemoryX.__init__

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        if self.staging is not None:
            self.staged_chunk_bytes = dict.fromkeys(self.staged_chunk_bytes, self.staging.capacity + 1)

    monkeypatch.setattr(MemoryX, "__init__", init)


def test_a_stalled_cluster_says_which_part_waits_for_what(monkeypatch):
    _starve_staging(monkeypatch)
    scenario = wss.load_scenario(_flash_model(2e9, 0.25, 1e8, 1))
    with pytest.raises(SimulationStalled) as exc:
        wss.simulate(scenario)
    message = str(exc.value)
    assert "(before the wafer's first pass)" not in message  # the wafer had started its program
    assert "memoryx.prefetch waits for" in message and "of MemoryX's DRAM staging area" in message
    assert "memoryx.stream waits for the flash prefetch of chunk 0 of pass" in message


def test_the_cli_reports_a_stall_in_one_message_with_exit_code_3(monkeypatch, tmp_path, capsys):
    import yaml

    _starve_staging(monkeypatch)
    path = tmp_path / "flash.yaml"
    path.write_text(yaml.safe_dump(_flash_model(2e9, 0.25, 1e8, 1)))
    assert main(["simulate", str(path), "-o", str(tmp_path / "out"), "--quiet"]) == 3
    captured = capsys.readouterr()
    assert captured.err.startswith("error: the simulation stopped making progress at t = ")
    assert "Traceback" not in captured.err and not (tmp_path / "out").exists()
