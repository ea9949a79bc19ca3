"""The Scenario: hardware + workload + training + simulation settings."""

from __future__ import annotations

from typing import Any

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from wss.model.scenario.base import Frozen, Integer, Range, bounded
from wss.model.scenario.faults import FaultsConfig
from wss.model.scenario.hardware import HardwareConfig
from wss.model.scenario.job import JobConfig
from wss.model.scenario.training import NumericsConfig, SimulationConfig, TrainingConfig
from wss.model.scenario.workload import WorkloadConfig

__all__ = ["Scenario"]


class Scenario(Frozen):
    """A complete, validated, immutable description of one simulation."""

    name: str = Field("scenario", description="Name used in summaries and file names.")
    description: str | None = Field(None, description="Free text.")
    hardware: HardwareConfig
    workload: WorkloadConfig
    training: TrainingConfig
    simulation: SimulationConfig = Field(default_factory=SimulationConfig)
    numerics: NumericsConfig = Field(default_factory=NumericsConfig)
    seed: Integer = bounded(0, description="Seed of every random choice (masks, data).", within=Range(0, 1e18))
    faults: FaultsConfig = Field(
        default_factory=FaultsConfig,
        description="Faults: stragglers, degraded SwarmX edges, nodes down and compute jitter set wafers apart, so "
        "the run unfolds (docs/unfolded.md); a slow MemoryX shard, slow flash reads and failures keep it folded.",
    )

    job: JobConfig | None = Field(
        None,
        description="What the job pays besides its steps (compile, programming, weight initialisation, input "
        "priming, checkpoints): a preset name under configs/job or its fields. Omitted: the preset of the "
        "wafer's system (cs2, cs3; none for another wafer), filled in when the scenario reports a time to train "
        "(faults.failures) and read by wss size; serialised only when present, so scenarios without it keep "
        "their hash.",
    )

    @model_serializer(mode="wrap")
    def _omit_no_faults(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Leave ``faults`` out when there are none, and ``job`` when not given, so scenarios (and their hashes)
        without them are unchanged."""
        data = handler(self)
        if not self.faults.any:
            data.pop("faults", None)
        if self.job is None:
            data.pop("job", None)
        return data

    @property
    def seq_len(self) -> int:
        """Tokens per sample: the training's seq_len, the model's, 1 for feature models, or an image or latent
        model's patches (and class token)."""
        if self.workload.model.input == "features":
            return 1
        patched = self.workload.model.patch_tokens
        if patched is not None:
            return patched
        return self.training.seq_len or self.workload.model.seq_len or 1
