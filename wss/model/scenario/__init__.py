"""Scenario: the validated, frozen description of one simulation."""

from wss.model.scenario.hardware import (
    HardwareConfig,
    InputPipelineConfig,
    InputsConfig,
    MemoryXConfig,
    SwarmXConfig,
    WaferConfig,
)
from wss.model.scenario.loader import apply_overrides, load_scenario, parse_override
from wss.model.scenario.scenario import Scenario
from wss.model.scenario.training import PRECISION_BYTES, NumericsConfig, SimulationConfig, TrainingConfig
from wss.model.scenario.workload import (
    DenseLayer,
    EmbeddingLayer,
    ModelConfig,
    OutputHead,
    TransformerBlock,
    WorkloadConfig,
)

__all__ = [
    "Scenario",
    "load_scenario",
    "apply_overrides",
    "parse_override",
    "HardwareConfig",
    "WaferConfig",
    "MemoryXConfig",
    "SwarmXConfig",
    "InputsConfig",
    "InputPipelineConfig",
    "WorkloadConfig",
    "ModelConfig",
    "DenseLayer",
    "EmbeddingLayer",
    "TransformerBlock",
    "OutputHead",
    "TrainingConfig",
    "SimulationConfig",
    "NumericsConfig",
    "PRECISION_BYTES",
]
