"""Which of a scenario's faults the analytic level prices, and which it leaves out.

The analytic level times the busiest wafer on a healthy path, with two faults built into its inputs:

* a slow MemoryX shard (``faults.shards``): MemoryX's rates are the shards' added up at the slowest
  shard's (:func:`wss.model.machine.memoryx_rates.memoryx_rates`), as the simulator runs them;
* a SwarmX node that is down (``faults.nodes``): the batch splits over the wafers it leaves
  (:func:`wss.model.scenario.shards.shard_samples`), so the busiest wafer's micro-batches are the
  simulator's.

Every other fault changes one wafer or one edge, or draws random factors, or costs time between steps,
and the closed form has no term for it: a straggler, a slow edge, compute jitter, slow flash reads,
failures and scripted failure events.  A user comparing ``wss estimate`` or ``wss plan`` with
``wss simulate`` on such a scenario must be told: :func:`left_out` names them.
"""

from __future__ import annotations

from wss.model.scenario.faults import FaultsConfig

__all__ = ["left_out"]


def left_out(faults: FaultsConfig) -> list[str]:
    """The scenario's faults the analytic level does not price, in words ('wafer 3 1.5x slower', ...)."""
    out = [f"wafer {w} {s:g}x slower" for w, s in sorted(faults.slowdowns().items())]
    out += [f"edge {e} at {f:g}x bandwidth" for e, f in sorted(faults.bandwidth_factors().items())]
    if faults.jitter is not None:
        out.append(f"compute jitter {faults.jitter.distribution} sigma {faults.jitter.sigma:g}")
    if faults.flash is not None:
        out.append(f"{faults.flash.tail_probability:g} of flash reads {faults.flash.tail_factor:g}x slower")
    if faults.failures is not None:
        out.append("failures and checkpoints (they cost time between steps: the simulate summary's goodput)")
    out += [f"wafer {e.wafer} fails at step {e.at_step}" for e in faults.events]
    return out
