"""Fault factors have a range that keeps a run finite, and a run whose simulated time is no longer finite stops.

A link at ``bandwidth_factor: 5e-324`` made the simulated time infinite and the shared-bandwidth loop
spin for ever; 1e-300 gave a step of about 1e295 s with exit 0.  Every factor now starts at 1e-3
(docs/faults.md says why), and :class:`~wss.model.components.shared_bandwidth.SharedBandwidth` stops
with :class:`~wss.errors.SimulatedTimeOverflow` when a transfer would end at infinity.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from core_helpers import SCENARIOS, run_wss_here

import wss
from wss.errors import ScenarioError, SimulatedTimeOverflow, WssError

FC_MNIST = SCENARIOS / "fc_mnist.yaml"

FACTORS = {
    "faults.links": lambda v: [{"edge": "swarmx.l1.1", "bandwidth_factor": v}],
    "faults.stragglers": lambda v: [{"wafer": 1, "slowdown": v}],
    **{f"faults.shards {rate}": (lambda v, rate=rate: [{"shard": 0, f"{rate}_factor": v}])
       for rate in ("dram", "flash", "network", "optimizer")},
}


def _load(field: str, value: float) -> wss.Scenario:
    return wss.load_scenario(FC_MNIST, {field.split()[0]: FACTORS[field](value)})


@pytest.mark.parametrize("field", sorted(FACTORS))
@pytest.mark.parametrize("value", [5e-324, 1e-300, 9.99e-4, 1001.0])
def test_a_factor_outside_its_range_is_refused(field, value):
    with pytest.raises(ScenarioError, match="must be at (least 1e-3|most 1,000)"):
        _load(field, value)


@pytest.mark.parametrize("field", sorted(FACTORS))
def test_the_ends_of_the_range_are_accepted(field):
    for value in (1e-3, 1e3):
        assert _load(field, value).faults.any


def test_the_range_and_its_reason_are_in_the_schema():
    text = wss.Scenario.model_json_schema()["$defs"]["LinkFault"]["properties"]["bandwidth_factor"]["description"]
    assert "Range: 1e-3 to 1,000" in text and "out of service" in text


def test_the_reproducer_is_one_line_and_exit_2_at_once(tmp_path):
    """Through ``wss.cli.main`` in this process: its exit code and stderr are the real program's
    (tests/core/test_cli.py)."""
    argv = ["simulate", FC_MNIST, "-o", tmp_path / "o", "--set", "hardware.wafers=2",
            "--set", "faults.links=[{edge: swarmx.l1.1, bandwidth_factor: 5e-324}]"]
    run = run_wss_here(argv, tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines() == [run.stderr.strip()] and "must be at least 1e-3" in run.stderr
    assert not (tmp_path / "o").exists()


def test_a_transfer_that_would_end_at_infinity_stops_the_run_instead_of_spinning():
    """Below the scenario's ranges (settings built by hand): the loop that used to spin raises instead.

    In a subprocess with a time limit, so that a regression fails the test rather than hanging it.
    """
    code = textwrap.dedent("""
        import simpy
        from wss.errors import SimulatedTimeOverflow
        from wss.model.components.shared_bandwidth import SharedBandwidth

        env = simpy.Environment()
        bw = SharedBandwidth(env, 5e-324, "memoryx.dram")
        def user(env):
            yield bw.transfer(1e6)
            yield bw.transfer(1e6)
        env.process(user(env))
        try:
            env.run()
        except SimulatedTimeOverflow as exc:
            print("stopped:", exc)
        else:
            print("finished at", env.now)
    """)
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("stopped: the simulated time on memoryx.dram is no longer finite"), run.stdout
    assert issubclass(SimulatedTimeOverflow, WssError)  # so the CLI prints one line and exits 2
