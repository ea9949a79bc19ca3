"""The CS-3 MemoryX presets: the three public sizes (1.5 TB, 12 TB, 1.2 PB) load, hold exactly that much,
and fit a model of their class (and not the class above)."""

from __future__ import annotations

import pytest
from core_helpers import SCENARIOS

import wss
from wss import InfeasibleError

CS3 = SCENARIOS / "cs3_gpt3_13b.yaml"  # 4 x wse3, gpt3-13b, global_batch 256, seq_len 2048
#: brain-120t's shape with 52 of its 260 layers: 12 x 52 x 196608^2 = 2.4e13 parameters, the 24T class the
#: CS-3 announcement gives for 1.2 PB.
MODEL_24T = {"workload.model": "brain-120t", "workload.model.layers.1.repeat": 52, "training.seq_len": 128}
BRAIN_120T = {"workload.model": "brain-120t", "training.seq_len": 128}

PRESETS = {"memoryx-cs3-1.5tb": 1.5e12, "memoryx-cs3-12tb": 12e12, "memoryx-cs3-1.2pb": 1.2e15}

#: preset -> (a model of its class that fits, the next class up that does not)
CLASSES = {
    "memoryx-cs3-1.5tb": ({"workload.model": "gpt3-13b"}, {"workload.model": "gpt3-175b"}),
    "memoryx-cs3-12tb": ({"workload.model": "gpt3-175b"}, {"workload.model": "gpt-1t"}),
    "memoryx-cs3-1.2pb": (MODEL_24T, BRAIN_120T),
}


def on(preset: str, **over) -> wss.Scenario:
    return wss.load_scenario(CS3, {"hardware.memoryx": preset, **over})


def test_the_presets_are_listed():
    assert set(PRESETS) <= set(wss.list_presets()["memoryx"])


@pytest.mark.parametrize("preset, size", PRESETS.items())
def test_each_preset_holds_its_public_size(preset, size):
    mx = on(preset).hardware.memoryx
    assert mx.name == preset
    assert mx.capacity_bytes == pytest.approx(size, rel=1e-12)


def test_only_the_largest_has_flash():
    assert [on(p).hardware.memoryx.flash_total_bytes > 0 for p in PRESETS] == [False, False, True]


@pytest.mark.parametrize("preset", PRESETS)
def test_a_model_of_its_class_fits_and_the_next_does_not(preset):
    fits, too_big = CLASSES[preset]
    plan = wss.plan(on(preset, **fits))
    assert 0 < plan.memoryx_state_bytes <= PRESETS[preset]
    with pytest.raises(InfeasibleError) as info:
        wss.plan(on(preset, **too_big))
    assert [p.path for p in info.value.problems] == ["hardware.memoryx"]


def test_the_24t_model_spills_to_flash_on_the_1_2pb_preset():
    plan = wss.plan(on("memoryx-cs3-1.2pb", **MODEL_24T))
    assert plan.params == pytest.approx(2.4e13, rel=0.02)
    assert plan.memoryx_flash_bytes > 0 and plan.memoryx_dram_bytes > 0
