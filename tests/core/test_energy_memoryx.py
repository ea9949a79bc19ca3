"""MemoryX's busy fraction in the energy includes its shared DRAM (docs/model.md, "Energy").

Closed form: one dense ``K x K`` kernel, SGD, one micro-batch, everything but MemoryX's DRAM all but
free.  Per step the DRAM moves the stream's fp32 reads of the weights (forward and backward: ``2 x 4``
bytes per weight), the gradient intake's writes (``g``), and the update's read of the weights and the
gradient and write of the weights (``4 + g + 4``): ``(16 + 2 g) K^2`` bytes, at its bandwidth.  The stream,
the intake and the update take turns, so the DRAM is busy nearly all the run while each of the other
activities is busy for only its own part: the node's busy fraction is the DRAM's.
"""

from __future__ import annotations

import pytest
from core_helpers import dense_model, ideal_hardware, scenario_dict

import wss
from wss.model.result.energy import memoryx_busy

K = 1024
DRAM_Bps = 1e9
BUSY_W, IDLE_W = 1_000.0, 200.0


def test_memoryx_busy_is_the_dram_fraction_when_the_dram_is_busier_than_any_other_activity():
    hw = ideal_hardware(memoryx={"dram_bandwidth_Bps": DRAM_Bps, "shards": 1, "power_busy_W": BUSY_W,
                                 "power_idle_W": IDLE_W})
    steps = 2
    r = wss.simulate(scenario_dict(dense_model(K, K), wafers=1, global_batch=1, steps=steps, hardware=hw,
                                   training={"gradient_precision": "fp32"}))
    assert r.energy is not None
    g = 4
    dram = steps * (16 + 2 * g) * K * K / DRAM_Bps / r.total_time_s
    u = r.utilisation
    assert u["memoryx.dram"] == pytest.approx(dram, rel=1e-12)
    others = max(u[k] for k in ("memoryx.stream", "memoryx.optimizer", "memoryx.flash", "memoryx.net.in"))
    assert others < 0.6 < 0.99 < dram  # the intake's writes are outside every other activity
    assert r.energy.busy_fraction["memoryx"] == pytest.approx(dram, rel=1e-12)
    power = dram * BUSY_W + (1 - dram) * IDLE_W
    assert r.energy.by_part_J["memoryx"] == pytest.approx(power * r.step_time_s, rel=1e-12)


def test_memoryx_busy_is_the_largest_activity():
    u = {"memoryx.stream": 0.3, "memoryx.optimizer": 0.5, "memoryx.flash": 0.1, "memoryx.net.in": 0.2,
         "memoryx.dram": 0.4, "wafer.compute": 0.9}
    assert memoryx_busy(u) == 0.5
    assert memoryx_busy({**u, "memoryx.dram": 0.7}) == 0.7
    assert memoryx_busy({}) == 0.0


def test_no_memoryx_power_figure_no_energy():
    """MemoryX's watts reach the energy through its settings (``Cluster.powered``): without them there is none."""
    hw = ideal_hardware(memoryx={"shards": 1, "power_busy_W": BUSY_W})
    raw = scenario_dict(dense_model(K, K), wafers=1, global_batch=1, steps=1, hardware=hw)
    assert wss.simulate(raw).energy is not None
    raw["hardware"]["memoryx"]["power_busy_W"] = None
    assert wss.simulate(raw).energy is None
