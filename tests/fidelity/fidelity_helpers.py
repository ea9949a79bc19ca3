"""Shared by the fidelity tests (imported as ``fidelity_helpers``): the cross-check table of
docs/fidelity.md as data, the reduced versions of the slow scenarios, and loading a script of tools/."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"

#: Agreement required between the simulator and the analytic level on every shipped scenario.
AGREE = 0.03
#: Agreement once the effect that explains a difference is switched off.
AGREE_WITHOUT_EFFECT = 0.01
#: Enough buffering that no chunk ever waits for credit (docs/fidelity.md, "bounded buffers").
DEEP_BUFFERS = {"hardware.swarmx.port_buffer_bytes": 2**36, "hardware.wafer.ingress_buffer_bytes": 2**36}

#: docs/fidelity.md's cross-check table: scenario -> (overrides for the tested run, documented
#: difference of the estimate in percent, the effect that explains it or None).  The slow scenarios
#: are checked reduced (fewer blocks; for the 1T model less MemoryX DRAM, so it still spills to
#: flash); their full-size rows are checked only with WSS_SLOW=1.
CROSS_CHECK = {
    "bert_large": ({}, 0.02, None),
    "cerebras_gpt_13b": ({}, -0.01, None),
    "cs3_gpt3_13b": ({}, -0.02, None),
    "fc_mnist": ({}, -0.00, None),
    # Trained for real when simulated; the estimator has no numerics, so both time the sampled masks.
    "fc_mnist_numerics": ({"numerics.enabled": False, "training.steps": 3}, -0.00, None),
    "gpt3_175b": ({}, -0.00, None),
    "gpt3_6.7b_sparse": ({}, -0.00, "bounded buffers"),
    "llama3_70b_16xcs3": ({}, -0.36, None),
    "mixtral_8x7b_4xcs3": ({}, -0.00, None),
    "brain_120t": (
        {"workload.model.layers.1.repeat": 26, "training.activation_checkpointing": "blocks"},
        -0.84,
        "bounded buffers",
    ),
    "gpt_1t": (
        {"workload.model.layers.1.repeat": 32, "hardware.memoryx.dram_capacity_bytes": 2.5e11},
        -0.02,
        None,  # offload with flash-resident state: the prefetch interleaving (docs/fidelity.md)
    ),
}
#: Full-size rows of the slow scenarios (18 s and 6 s to simulate).
FULL_SIZE = {"brain_120t": -0.70, "gpt_1t": -0.00}

SLOW = bool(os.environ.get("WSS_SLOW"))


def load_tool(name: str) -> ModuleType:
    """Import ``tools/<name>.py`` (the tools are scripts, not a package) as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def relative(estimate: float, simulated: float) -> float:
    return estimate / simulated - 1.0
