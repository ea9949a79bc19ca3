"""Result: what a simulation found, as data.

A :class:`Result` is a pydantic model holding the resolved scenario, per-step
times, throughput, FLOPs, the breakdown of step time, utilisation, bytes per
link class, memory footprints and one record per kernel pass and update.
``Result.to_records()`` gives plain dicts and ``Result.to_pandas()`` the same as a DataFrame.
Results are deterministic: the same scenario gives byte-identical JSON.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
)

from wss.files import atomic_write_text, read_input
from wss.model.plan.choice import PlanChoice
from wss.model.plan.pacing import BREAKDOWN_CATEGORIES as BREAKDOWN_CATEGORIES
from wss.model.plan.pacing import PACING_TOLERANCE as PACING_TOLERANCE
from wss.model.plan.pacing import RATE_CAUSES as RATE_CAUSES
from wss.model.plan.pacing import bound_category as bound_category
from wss.model.plan.pacing import paced_by as paced_by
from wss.model.plan.pacing import pass_pacing as pass_pacing
from wss.model.scenario import Scenario
from wss.model.scenario.fold_rules import UNIFORM_REASON

__all__ = [
    "Result",
    "StepRecord",
    "KernelRecord",
    "LinkBytes",
    "MemoryFootprint",
    "FlopsSummary",
    "NumericsSummary",
    "EnergySummary",
    "WaferFolding",
    "WaferRecord",
    "RunSpan",
    "StepPacer",
    "FailureSummary",
    "UNIFORM_FOLDING",
    "LayerFoldRecord",
    "BREAKDOWN_CATEGORIES",
    "PACING_TOLERANCE",
    "RATE_CAUSES",
    "RECORD_SECONDS",
    "MAX_RESULT_BYTES",
    "records_breakdown_s",
    "pass_pacing",
    "paced_by",
    "bound_category",
]

#: The largest result.json wss reads: 1 GB.  A run within the work bound (docs/limits.md) writes far less
#: (GPT-3 175B: 115 kB, Brain 120T: 2.5 MB); the limit keeps ``wss report
#: /dev/zero`` from reading until memory runs out.
MAX_RESULT_BYTES = 2**30


class _Data(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepRecord(_Data):
    """One training step: from the end of the previous step's last update to the end of its own."""

    step: int
    start_s: float
    end_s: float
    time_s: float
    breakdown_s: dict[str, float] = Field(description="Step time split by what the wafer was doing or waiting for.")
    loss_at_user_s: float | None = Field(None, description="When the step's loss reached the user node.")
    loss: float | None = None
    accuracy: float | None = None


class KernelRecord(_Data):
    """One pass of one operation on the wafer, one MemoryX update or accumulation, or the run's drain.

    A folded run (:mod:`wss.model.folding.fold`) simulates a few micro-batches of each step and repeats
    one of them: that micro-batch's records stand for every copy, and ``repeats`` says how many
    micro-batches each record stands for (1 elsewhere).  A total over the records weights each
    by ``repeats``; so weighted, the wafer records' ``compute_s`` and ``stall_*_s`` add up to the
    steps' :attr:`StepRecord.breakdown_s`.

    The last record of the wafer (phase ``drain``, name ``end of run``) is its wait after its last
    pass for the run's last update: no operation runs, but the last step pays for it.
    """

    step: int
    micro_batch: int
    name: str
    layer: str
    phase: str = Field(description="forward, recompute, backward, accumulate, norm (global-norm clipping), update or "
                       "drain")
    where: str = Field(description="wafer or memoryx")
    start_s: float
    end_s: float
    bytes_in: float
    bytes_out: float
    cycles: float
    bound_by: str
    exposed_stall_s: float
    repeats: int = Field(1, description="Micro-batches this record stands for: 1, or 1 + the copies of a folded "
                         "run's repeated micro-batch.  Weight totals over records by it.")
    compute_s: float = Field(0.0, description="Seconds the wafer computed in this pass (0 for MemoryX records).")
    stall_stream_s: float = Field(0.0, description="Seconds the wafer waited for the weight path in this pass.")
    stall_flash_s: float = Field(0.0, description="Seconds the wafer waited for flash prefetch in this pass.")
    stall_optimizer_s: float = Field(0.0, description="Seconds the wafer waited on the optimizer's queue.")
    stall_bubble_s: float = Field(0.0, description="Seconds the wafer waited for an update (iteration boundary).")
    stall_input_s: float = Field(0.0, description="Seconds the wafer waited for input data in this pass.")
    stall_switch_s: float = Field(0.0, description="Seconds the wafer spent switching to this kernel (fixed cost).")
    stall_runtime_s: float = Field(
        0.0, description="Seconds of the runtime's fixed costs at the start of this step or micro-batch."
    )
    stall_offload_s: float = Field(
        0.0, description="Seconds the wafer spent sending a block's input out or waiting for it to come back."
    )

    @model_serializer(mode="wrap")
    def _compact_json(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """In JSON, leave out the counts and seconds at their defaults (1 and 0): loading restores them.

        Most passes wait for one cause at most, so this keeps ``result.json`` about a third smaller;
        :meth:`Result.to_records` (Python mode) keeps every field.
        """
        data = handler(self)
        if info.mode_is_json():
            for f in _OPTIONAL_FIELDS:
                if data.get(f) == KernelRecord.model_fields[f].default:
                    del data[f]
        return data

    def seconds_by_category(self) -> dict[str, float]:
        """The wafer's seconds in this record (one repeat) by :data:`BREAKDOWN_CATEGORIES`; zeros for MemoryX."""
        return {c: getattr(self, f) for c, f in RECORD_SECONDS.items()}


#: Record fields with a few distinct values: categorical columns in :meth:`Result.to_pandas`.
_CATEGORICAL = ("where", "phase", "bound_by")

#: The :class:`KernelRecord` field holding each breakdown category's seconds of one pass.
RECORD_SECONDS = {c: "compute_s" if c == "compute" else f"stall_{c}_s" for c in BREAKDOWN_CATEGORIES}
_OPTIONAL_FIELDS = ("repeats", *RECORD_SECONDS.values())


def records_breakdown_s(records: list[KernelRecord], steps: int) -> dict[str, float]:
    """Mean seconds per step by category, summed over the records weighted by ``repeats``.

    On a Result this equals its ``breakdown_s`` (to rounding): folded copies and the drain included.
    """
    out = dict.fromkeys(BREAKDOWN_CATEGORIES, 0.0)
    for r in records:
        for c, f in RECORD_SECONDS.items():
            out[c] += r.repeats * getattr(r, f)
    return {c: v / max(steps, 1) for c, v in out.items()}


class LinkBytes(_Data):
    """Bytes over one class of link in one step."""

    links: int
    per_link_bytes: float
    total_bytes: float


class MemoryFootprint(_Data):
    memoryx_state_bytes: float
    memoryx_dram_bytes: float
    memoryx_flash_bytes: float
    memoryx_dram_capacity_bytes: float
    memoryx_flash_capacity_bytes: float
    memoryx_staging_bytes: float
    memoryx_components: dict[str, dict[str, float]] = Field(
        default_factory=dict,
        description="MemoryX state by component (weights with masks, gradient accumulators, optimizer moments): "
        "bytes in 'dram' and in 'flash'.",
    )
    wafer_sram_activation_bytes: float
    wafer_sram_available_bytes: float
    wafer_sram_total_bytes: float
    micro_batch: int
    micro_batches: int
    activation_checkpointing: str


class FlopsSummary(_Data):
    dense_equivalent_per_step: float = Field(description="FLOPs of the model as if dense, without recompute.")
    executed_per_step: float = Field(description="FLOPs the wafers execute (non-zeros only, recompute included).")
    achieved_dense_equivalent_flops: float
    achieved_executed_flops: float
    peak_flops: float = Field(description="Cluster dense peak: wafers x cores x SIMD x 2 x clock.")
    fraction_of_peak: float = Field(
        description="Executed FLOP/s over peak: how busy the wafers' arithmetic is (at most 1)."
    )
    dense_equivalent_fraction_of_peak: float = Field(
        description="Dense-equivalent FLOP/s over peak (model FLOPs utilisation); above 1 when sparsity "
        "skips more work than the step's stalls cost."
    )


class NumericsSummary(_Data):
    """Per-step results of the real training run (``numerics.enabled``)."""

    losses: list[float | None] = Field(
        description="Mean loss of each step over the global batch; None where it was not finite (diverged)."
    )
    accuracies: list[float | None] = Field(description="Accuracy of each step where it applies; None if not finite.")

    @field_validator("losses", "accuracies", mode="before")
    @classmethod
    def _finite_or_none(cls, values: Any) -> Any:
        """NaN and infinities become None: JSON has no NaN, and a Result must read back as written."""
        if isinstance(values, list | tuple):
            return [None if isinstance(v, numbers.Real) and not math.isfinite(v) else v for v in values]
        return values


class EnergySummary(_Data):
    """Electrical energy of the run from the parts' power figures and busy fractions (docs/model.md, "Energy").

    Each part draws ``busy x power_busy_W + (1 - busy) x power_idle_W`` (idle defaults to busy); the parts are
    the wafers' systems, the MemoryX nodes and the SwarmX nodes.  Input workers are not counted.
    """

    per_step_J: float = Field(description="Joules per training step (average power x step time).")
    per_sample_J: float = Field(description="Joules per training sample.")
    per_token_J: float = Field(description="Joules per token (per sample for models without tokens).")
    average_power_W: float = Field(description="Mean electrical power of the counted parts over the run.")
    by_part_J: dict[str, float] = Field(description="Joules per step of each kind of part: wafer, memoryx, swarmx.")
    busy_fraction: dict[str, float] = Field(
        description="The busy fraction used for each kind of part (SwarmX: node-weighted over the levels)."
    )


class WaferFolding(_Data):
    """Whether the run simulated one wafer and one tree path for all (folded) or every wafer apart, and why."""

    folded: bool = Field(description="True: one wafer and one SwarmX path stood for all; False: every wafer "
                         "ran as its own process and every tree edge as its own link.")
    reason: str = Field(description="Why: simulation.fold_wafers, and under 'auto' what made the cluster uniform "
                        "or not.")


#: The folding of a uniform cluster under ``simulation.fold_wafers: auto``: the default, left out of result.json.
UNIFORM_FOLDING = WaferFolding(folded=True, reason=UNIFORM_REASON)


class LayerFoldRecord(_Data):
    """One run of identical blocks folded in one direction: the simulated block whose records stand for it.

    Layer folding (:mod:`wss.model.folding.layer_fold`) simulates the first and last blocks of a run and
    repeats one block in place of the middle: in the forward passes the block just before the copies,
    in the backward passes (recomputes and MemoryX's updates included) the block just after them.  That
    block's records count for every block of ``stands_for`` (its ``repeats`` include them), so a per-block
    view spreads them evenly over those blocks (:meth:`Result.stands_for`).
    """

    direction: str = Field(description="forward (the forward passes) or backward (recomputes, backward passes "
                           "and MemoryX's accumulations and updates).")
    layer: str = Field(description="The simulated block whose records stand for the folded ones.")
    stands_for: list[str] = Field(description="Every block its records count for, itself included, in order.")


#: The direction of a record's phase for layer folding: forward passes fold with the forward passes, the rest
#: (recompute, backward, MemoryX's accumulate and update) with the backward passes.
_FOLD_DIRECTION = {"forward": "forward"}


class WaferRecord(_Data):
    """One wafer of an unfolded run: its shard and how it spent each step (mean seconds per step)."""

    wafer: int
    samples: int = Field(description="Samples of the wafer's shard per step.")
    micro_batches: list[int] = Field(description="Samples per micro-batch on this wafer.")
    breakdown_s: dict[str, float] = Field(
        description="Mean seconds per step the wafer computed or waited for each cause (as Result.breakdown_s); "
        "the waits of a wafer with a smaller shard are its idle time.")
    compute_s: float = Field(description="Mean seconds per step the wafer computed.")
    idle_s: float = Field(description="Mean seconds per step the wafer did not compute: the step time less compute_s.")


class StepPacer(_Data):
    """What paced one step of an unfolded run: the part busiest in it (a wafer computing or a tree link)."""

    step: int
    part: str = Field(description="wafer.<w>, or a SwarmX tree link swarmx.<down|up>.l<level>.<child>.")
    busy_s: float = Field(description="Seconds the part was busy in the step (a folded run's repeated "
                          "micro-batches counted once).")


class RunSpan(_Data):
    """One span of the run's wall-clock timeline once checkpoints and scripted failures are charged to it."""

    kind: str = Field(description="step, checkpoint, restart (after a failure) or redo (a step lost to a "
                      "failure, run again)")
    step: int = Field(description="The step run, checkpointed after, or failed in.")
    start_s: float
    end_s: float
    wafer: int | None = Field(None, description="The failed wafer (restart only).")
    lost_steps: int = Field(0, description="Steps since the last checkpoint that the failure lost and the job "
                            "runs again (restart only).")


class FailureSummary(_Data):
    """Failures, checkpoints and goodput (faults.failures; the expected-value model of docs/faults.md)."""

    cluster_mtbf_s: float | None = Field(description="Mean time between failures of the job: the per-wafer MTBF "
                                         "over the wafers that train (not those cut off); None without random "
                                         "failures.")
    checkpoint_bytes: float = Field(description="Bytes of one checkpoint: MemoryX's weights and optimizer state.")
    checkpoint_s: float = Field(description="Seconds of one checkpoint: the job's fixed part (checkpoint_fixed_s) "
                                "and its bytes written from MemoryX to storage.")
    checkpoint_fixed_s: float = Field(0.0, description="The part of checkpoint_s that does not scale with the "
                                      "bytes (job.checkpoint_s).")
    restart_s: float = Field(description="Seconds from a failure to training again (faults.failures.restart_s).")
    checkpoint_every_steps: int = Field(description="Steps between checkpoints: the scenario's, or under auto "
                                        "the interval with the highest expected goodput.")
    chosen_by: str = Field(description="'scenario' or 'auto'.")
    young_daly_steps: float | None = Field(description="Young's first-order optimum sqrt(2 C M) in steps, for "
                                           "comparison; None without random failures.")
    goodput: float = Field(description="Expected fraction of wall time spent on steps that are kept: the step "
                           "time over the expected wall time per step.")
    expected_s_per_step: float = Field(description="Expected wall seconds per kept step: checkpoints, lost work "
                                       "and restarts included.")
    job: str = Field("none", description="The job costs counted (job.name: the scenario's job preset).")
    startup_s: dict[str, float] = Field(default_factory=dict, description="The job's costs before the first step "
                                        "by name (compile with its micro-batch search, programming, weight_init, "
                                        "input_priming), seconds; the time to train includes them once.")
    train_steps: int | None = Field(description="Steps of the whole training run (faults.failures.train_steps, "
                                    "or train_tokens over the tokens of a step).")
    expected_time_to_train_s: float | None = Field(description="Expected wall seconds to train train_steps: the "
                                                   "job's start-up, the steps, checkpoints, lost work and restarts.")
    run_time_s: float = Field(description="Wall seconds of the simulated steps with their checkpoints and the "
                              "scripted failures (faults.events).")
    timeline: list[RunSpan] = Field(description="The simulated steps on the wall clock: steps, checkpoints, "
                                    "restarts and redone steps.")


class Result(_Data):
    """Everything one simulation measured."""

    wss_version: str
    scenario: Scenario
    step_time_s: float = Field(description="Mean time per step.")
    total_time_s: float
    samples_per_s: float
    tokens_per_s: float
    steps: list[StepRecord]
    flops: FlopsSummary
    breakdown_s: dict[str, float] = Field(
        description="Mean seconds per step the wafer spent computing or waiting for each cause."
    )
    pacing_s: dict[str, float] = Field(
        description="Mean seconds per step by what paced it (see wss.model.result.results.pass_pacing): a pass's "
        "waits for an update or input to their causes, the rest of it whole to the stream (or flash) if it waited for "
        "weights, else to compute; the time after the last pass to its cause."
    )
    bound_by: str = Field(description="The category pacing most of the step (the largest of pacing_s).")
    utilisation: dict[str, float] = Field(description="Busy fraction of each part over the whole run.")
    link_bytes: dict[str, LinkBytes] = Field(description="Bytes per step on each class of link.")
    weight_crossings_per_micro_batch: float = Field(
        description="Times each weight crosses into a wafer per micro-batch: weight bytes into one wafer per step "
        "over one streamed copy of the weights and the micro-batches per step (2 without checkpointing: forward "
        "and backward; a checkpointed block adds its recompute)."
    )
    phase_s: dict[str, float] = Field(
        description="Mean seconds per step spent in each phase, keyed 'where.phase' (e.g. 'wafer.forward', "
        "'memoryx.update'); folded micro-batches included."
    )
    memory: MemoryFootprint
    cluster: dict[str, int | float | list[int]]
    numerics: NumericsSummary | None = None
    sim_events: int
    records: list[KernelRecord]
    plan_choice: PlanChoice | None = Field(
        None,
        description="The activation checkpointing and micro-batches the plan chose, the best alternatives it "
        "weighed with their analytic step times, and why (None in results written before the planner searched).",
    )
    energy: EnergySummary | None = Field(
        None,
        description="Energy per step, sample and token and the average power, from the power figures of the "
        "hardware configs (None when a part has no power_busy_W, and in results written before wss had it).",
    )
    wafer_folding: WaferFolding = Field(
        UNIFORM_FOLDING,
        description="Whether one wafer stood for all or every wafer ran apart, and why (simulation.fold_wafers). "
        "Left out of the JSON when it is the uniform cluster's default.",
    )
    wafers: list[WaferRecord] | None = Field(
        None,
        description="One record per wafer when they ran apart (wafer_folding.folded false); None when folded.",
    )
    step_pacers: list[StepPacer] | None = Field(
        None,
        description="Per step of an unfolded run, the wafer or tree link that paced it (the busiest); None when "
        "folded (one wafer stood for all).",
    )
    layer_folds: list[LayerFoldRecord] | None = Field(
        None,
        description="The runs of identical blocks folded, per direction, and the simulated block standing for "
        "each (None, and left out of the JSON, when no blocks folded).",
    )
    failures: FailureSummary | None = Field(
        None,
        description="Checkpoints, failures and goodput when the scenario gives faults.failures; None (and left out "
        "of the JSON) otherwise.",
    )

    @model_serializer(mode="wrap")
    def _omit_folded(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """In JSON, leave out the wafer fields of a uniform folded run, so its result.json is what it was before
        wss could unfold; loading restores them."""
        data = handler(self)
        if info.mode_is_json():
            if self.wafer_folding == UNIFORM_FOLDING:
                data.pop("wafer_folding", None)
            if self.wafers is None:
                data.pop("wafers", None)
            if self.failures is None:
                data.pop("failures", None)
            if self.step_pacers is None:
                data.pop("step_pacers", None)
            if self.layer_folds is None:
                data.pop("layer_folds", None)
        return data

    def stands_for(self, record: KernelRecord) -> list[str]:
        """The blocks a record counts for: ``[record.layer]``, or with layer folding, for the records of a block
        standing for folded ones, every block of its run (:class:`LayerFoldRecord`); ``record.repeats`` is
        then spread evenly over them.  With global-norm clipping an update runs after the step's last gradient,
        outside every folded block, and each kernel's (a stand-in's too) has its own record."""
        if record.phase == "update" and self.scenario.training.gradient_clipping == "global_norm":
            return [record.layer]
        direction = _FOLD_DIRECTION.get(record.phase, "backward")
        for fold in self.layer_folds or ():
            if fold.layer == record.layer and fold.direction == direction:
                return list(fold.stands_for)
        return [record.layer]

    def to_records(self) -> list[dict]:
        """Kernel records as plain dicts (``pandas.DataFrame(result.to_records())`` just works).

        Each row stands for ``repeats`` micro-batches (more than 1 for a folded run's repeated
        micro-batch): weight sums by it, e.g. ``(df.compute_s * df.repeats).sum()``.
        """
        return [r.model_dump() for r in self.records]

    def to_pandas(self) -> Any:
        """The kernel records as a pandas DataFrame: one row per :meth:`to_records` dict, in the same order.

        Columns are :class:`KernelRecord`'s fields; ``step``, ``micro_batch`` and ``repeats`` are
        int64, ``where``, ``phase`` and ``bound_by`` categorical (a few values each), ``name`` and
        ``layer`` strings, the rest float64.  ``df.attrs`` holds the scenario name, the steps and
        the step time.  Weight totals by ``repeats`` (a folded run's records stand for several
        micro-batches): ``(df.compute_s * df.repeats).sum() / df.attrs["steps"]`` equals
        ``breakdown_s["compute"]``.  A last column, ``blocks`` (int64), marks the records that stand for
        folded blocks (:meth:`stands_for`): how many blocks the row counts for, 1 for most; per block,
        such a row is ``repeats / blocks`` of each.  pandas is imported here, not with wss.
        """
        import pandas as pd

        columns = list(KernelRecord.model_fields)
        df = pd.DataFrame(self.to_records(), columns=columns)
        dtypes: dict[str, Any] = {}
        for name, field in KernelRecord.model_fields.items():
            if field.annotation is int:
                dtypes[name] = "int64"
            elif field.annotation is float:
                dtypes[name] = "float64"
            elif name in _CATEGORICAL:
                dtypes[name] = "category"
            else:
                dtypes[name] = "string"
        df = df.astype(dtypes)
        df["blocks"] = pd.Series([len(self.stands_for(r)) for r in self.records], index=df.index, dtype="int64")
        df.attrs.update(scenario=self.scenario.name, steps=len(self.steps), step_time_s=self.step_time_s)
        return df

    def to_json(self, indent: int | None = 1) -> str:
        return self.model_dump_json(indent=indent)

    def save(self, path: str | Path) -> Path:
        """Write the result as JSON atomically."""
        return atomic_write_text(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> Result:
        """Read a result.json; a file past :data:`MAX_RESULT_BYTES` (or ``/dev/zero``) raises
        :class:`~wss.files.InputError` before it is read whole."""
        return cls.model_validate_json(read_input(path, MAX_RESULT_BYTES, starts_with=b"{").decode("utf-8"))
