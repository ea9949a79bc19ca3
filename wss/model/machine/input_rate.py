"""The input path into one wafer, stated once: how fast its input workers prepare samples, and how long a
micro-batch's input takes to arrive.

The simulated input workers take both through their settings (``sim/cluster.py``, ``components/inputs.py``)
and the analytic level prices each micro-batch's input with the same function (``plan/analytic/step.py``),
so an input-bound step is the same step to both.

Preparation (``hardware.input_pipeline``): one process spends ``prepare_s_per_sample + prepare_s_per_token x
tokens`` on a sample, by the input's kind (configs/input_pipeline says what each kind costs and where the figure
comes from).  Each wafer has ``workers_per_wafer`` input workers; each prepares in ``num_workers`` data-loader
processes, or in its own main process when ``num_workers`` is 0 (PyTorch DataLoader's meaning of 0), so one
process either way: the processes work on different samples at once, and the rate is their number over one
sample's cost.  ``hardware.inputs.samples_per_s``, where given, caps that rate (a measured rate of a pipeline
the kinds do not describe).  Moving the prepared bytes (``hardware.inputs.bandwidth_Bps``) overlaps preparing
them: a transfer takes the longer of the two, after the workers' latency.
"""

from __future__ import annotations

from dataclasses import dataclass

from wss.model.scenario import Scenario
from wss.model.scenario.hardware import InputPipelineConfig

__all__ = ["Preparation", "preparing_processes", "preparation", "preparation_samples_per_s", "input_transfer_s"]


@dataclass(frozen=True)
class Preparation:
    """How fast one wafer's input workers prepare samples, and why."""

    samples_per_s: float  # the rate (the pipeline's, or hardware.inputs.samples_per_s where that is lower)
    kind: str | None  # the pipeline's kind (None: no pipeline stated)
    processes: int  # processes preparing samples for the wafer (0 without a pipeline)
    sample_s: float  # one process's seconds per sample (0 without a pipeline)
    capped: bool  # hardware.inputs.samples_per_s sets the rate, not the pipeline


def preparing_processes(pipeline: InputPipelineConfig) -> int:
    """Processes preparing samples for one wafer: each input worker's data-loader processes, or its main
    process when it has none (``num_workers: 0``)."""
    return pipeline.workers_per_wafer * max(1, pipeline.num_workers)


def preparation(scenario: Scenario) -> Preparation | None:
    """The rate at which one wafer's input workers prepare samples, or None when nothing limits it."""
    pipeline = scenario.hardware.input_pipeline
    given = scenario.hardware.inputs.samples_per_s
    sample_s = pipeline.prepare_s_per_sample + pipeline.prepare_s_per_token * scenario.seq_len
    processes = preparing_processes(pipeline) if sample_s > 0 else 0
    own = processes / sample_s if sample_s > 0 else None
    if own is None and given is None:
        return None
    capped = own is None or (given is not None and given < own)
    rate = float(given) if capped and given is not None else float(own or 0.0)
    return Preparation(rate, pipeline.kind, processes, sample_s, capped)


def preparation_samples_per_s(scenario: Scenario) -> float | None:
    """Samples per second one wafer's input workers prepare (:func:`preparation`), None for no limit."""
    prep = preparation(scenario)
    return prep.samples_per_s if prep is not None else None


def input_transfer_s(samples: int, bytes_per_sample: float, bandwidth_Bps: float,
                     samples_per_s: float | None) -> float:
    """Seconds to deliver ``samples`` samples to a wafer, latency excluded: the longer of moving their bytes
    and preparing them (:func:`preparation_samples_per_s`; None: free), which overlap."""
    move = samples * bytes_per_sample / bandwidth_Bps
    prepare = samples / samples_per_s if samples_per_s else 0.0
    return max(move, prepare)
