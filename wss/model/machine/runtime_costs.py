"""The runtime's fixed costs of one step (``hardware.runtime``): what a step pays beyond streaming and arithmetic.

The wafer pays a switch before every pass of a weight kernel (forward, a checkpointed block's recompute,
backward), a cost at the start of every micro-batch and one at the start of every step, each in series
with its work.  The simulated wafer pays them pass by pass from its settings; the analytic level adds
them up here.
"""

from __future__ import annotations

from wss.model.scenario.hardware import RuntimeConfig

__all__ = ["weight_passes", "fixed_costs_s"]


def weight_passes(kernels: int, recomputed: int) -> int:
    """Passes of weight kernels in one micro-batch: each kernel forward and backward, and the recomputes."""
    return 2 * kernels + recomputed


def fixed_costs_s(runtime: RuntimeConfig, micro_batches: int, passes_per_micro_batch: int) -> tuple[float, float]:
    """One step's fixed costs: (the kernel switches, the step's and its micro-batches' costs), seconds."""
    switches = micro_batches * passes_per_micro_batch * runtime.kernel_switch_s
    return switches, runtime.step_overhead_s + micro_batches * runtime.micro_batch_overhead_s
