"""The job around the steps: what a training job pays besides its steps (docs/sizing.md, "The job's costs").

A real job compiles its graph (and, when the micro-batch is left to it, searches micro-batch sizes), programs
the systems, initialises the weights and sends them to MemoryX, waits for the input workers to prime, and then
saves a checkpoint every so many steps.  None of these scale with the steps, so a step time alone undercounts
the time to train; published run logs of the ALCF AI Testbed show them taking minutes to an hour.

The figures live in presets under ``configs/job`` (``cs2``, ``cs3``: read off published run logs, each with
its source beside it; ``none``: no job costs, the steps alone).  A scenario names one (``job: cs3``) or gives
the fields; without a ``job`` section the default is the preset of the scenario's system
(:func:`default_job_preset`), so a scenario that says nothing keeps its hash and its per-step results.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from wss.model.scenario.base import Frozen, Integer, Range, Real, bounded

__all__ = ["JobConfig", "PrimingConfig", "JOB_COSTS", "NO_JOB_PRESET", "CHIP_OF_WAFER", "default_job_preset"]

#: The costs of a job besides its steps, by name: what ``wss size --job-costs`` can count or leave out.
JOB_COSTS = ("compile", "programming", "weight_init", "input_priming", "checkpoints")

#: The preset with no job costs at all (the steps alone).
NO_JOB_PRESET = "none"

#: A wafer preset -> the system it is the engine of, whose job preset (``configs/job/<system>.yaml``) is the
#: default.  A wafer given by its fields under another name has no default: no job costs (the ``none`` preset).
CHIP_OF_WAFER = {"wse2": "cs2", "wse3": "cs3"}

#: Seconds of one wait: up to a week.
WAIT = Range(0.0, 7 * 86400.0, "s")


def default_job_preset(wafer_name: str, release: str | None = None) -> str:
    """The job preset a scenario without a ``job`` section gets: its system's (``cs2`` for a ``wse2`` wafer),
    or ``<system>-<release>`` where a preset of that release ships and the release is given (the release
    presets a later change adds key on it; none ships yet), or ``none`` for a wafer of no known system."""
    from wss.model.scenario.presets import list_presets  # local: presets imports nothing of the schema

    chip = CHIP_OF_WAFER.get(wafer_name)
    if chip is None:
        return NO_JOB_PRESET
    known = list_presets()["job"]
    if release is not None and f"{chip}-{release}" in known:
        return f"{chip}-{release}"
    return chip


class PrimingConfig(Frozen):
    """Seconds the input workers take to prime before the first step, by the model's input kind
    (``workload.model.input``): a pipeline from pre-tokenised files streams at once, one that decodes images
    fills its buffers first."""

    tokens: Real = bounded(0.0, description="Text models (input: tokens), seconds.", within=WAIT)
    features: Real = bounded(0.0, description="Feature models (input: features), seconds.", within=WAIT)
    image: Real = bounded(0.0, description="Image models (input: image), seconds.", within=WAIT)
    latent: Real = bounded(0.0, description="Latent models (input: latent, e.g. DiT), seconds.", within=WAIT)

    def of(self, kind: Literal["tokens", "features", "image", "latent"]) -> float:
        """The priming seconds of an input kind."""
        return float(getattr(self, kind))


class JobConfig(Frozen):
    """What a training job pays besides its steps: once per job (compile, micro-batch search, programming,
    weight initialisation, input priming) and once per checkpoint.  Presets under configs/job."""

    name: str = Field("job", description="Label of this job configuration.")
    release: str | None = Field(
        None, description="The software release (family) the figures were read off, e.g. 'R2.3-R2.4'; a label "
        "today, the key a default preset per release will be chosen by.")
    compile_s: Real = bounded(
        0.0, description="Seconds to compile the graph, without the micro-batch search.", within=WAIT)
    micro_batch_search_s: Real = bounded(
        0.0, description="Seconds the compiler's micro-batch search adds when training.micro_batch is 'auto' "
        "(it compiles candidate micro-batch sizes); nothing with a micro-batch given.", within=WAIT)
    programming_s: Real = bounded(
        0.0, description="Seconds to program the systems with the compiled graph.", within=WAIT)
    weight_init_s: Real = bounded(
        0.0, description="Seconds to initialise the weights and send them to MemoryX.", within=WAIT)
    input_priming_s: PrimingConfig = Field(
        default_factory=PrimingConfig, description="Seconds the input workers prime before the first step, by "
        "input kind.")
    checkpoint_s: Real = bounded(
        0.0, description="Seconds each checkpoint costs besides its bytes (which go at the rate of "
        "faults.failures.storage, or the default storage preset): saving tensor by tensor, the logs' fixed "
        "part.", within=WAIT)
    checkpoint_every_steps: Integer | None = bounded(
        None, description="Steps between checkpoints (the last step is saved too: a run of S steps saves "
        "ceil(S / this) times); null: no checkpoints. With faults.failures its checkpoint_every_steps decides "
        "instead.", within=Range(1, 1e9))

    @property
    def is_none(self) -> bool:
        """No cost at all: the steps alone."""
        return not (self.compile_s or self.micro_batch_search_s or self.programming_s or self.weight_init_s
                    or any(self.input_priming_s.model_dump().values()) or self.checkpoint_every_steps is not None)
