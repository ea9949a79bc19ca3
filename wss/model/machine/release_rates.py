"""The wafer as a software release runs it (``hardware.runtime.compute_efficiency``).

A release's compiler and runtime set how close the wafer's work comes to the chip's own rate: GPT-J 6B
on two CS-2 ran 1.7x faster on release R2.3 than on R1.7.1 (ALCF AI Testbed user guide and DABench run logs).  The
chip's achieved fractions (``kernel_efficiency`` on weight kernels, ``nonweight_efficiency`` on the
rest) describe the newest release; an older release's runtime preset scales both by its
``compute_efficiency``.  Every place that turns the wafer's work into time reads the wafer from here,
so the simulator and the analytic level see the same release.
"""

from __future__ import annotations

from wss.model.scenario.hardware import HardwareConfig, WaferConfig

__all__ = ["release_wafer"]


def release_wafer(hardware: HardwareConfig) -> WaferConfig:
    """The wafer with its achieved fractions as the scenario's release reaches them."""
    factor = hardware.runtime.compute_efficiency
    wafer = hardware.wafer
    if factor == 1.0:
        return wafer
    return wafer.model_copy(update={
        "kernel_efficiency": wafer.kernel_efficiency * factor,
        "nonweight_efficiency": wafer.nonweight_efficiency * factor,
    })
