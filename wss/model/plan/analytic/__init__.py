"""The analytic level: one closed-form model of a training step, from the plan's figures, without SimPy.

The planner ranks its candidates with it (:mod:`wss.model.plan.search`) and ``wss estimate``
(:mod:`wss.studies.estimate`) reports the chosen plan's step with it: two views of one model.  It times a
step in well under a millisecond once the plan's size-free figures are built (:class:`StepModel`), where the
simulator takes seconds; docs/fidelity.md derives every term and compares it with the simulator.

It is a second model of the *timing* of the simulator's machine, not an independent model of the machine.
What it shares with the simulator:

* **imported**: the plan's figures (the ops, each kernel's streamed, gradient and MemoryX-read bytes, chunks,
  tier, non-zeros and tied-state owner; the cycles from the cycle model at each micro-batch size; the
  non-weight ops' FLOPs; the micro-batches; the optimizer's per-parameter costs), the machine's derived
  figures (:mod:`wss.model.machine`: MemoryX's rates, the tree's levels and the wafer's edge, the buffers
  in chunks, input and block-input bytes, the runtime's fixed costs, the optimizer's job costs), the byte
  conventions, and the pacing rule (:mod:`wss.model.plan.pacing`);
* **written again after the simulator's rules**: the pass order (:mod:`wss.model.program`), the per-stage
  costs (a MemoryX chunk takes ``max(read / DRAM, sent / network)``, a link ``bytes / bandwidth`` plus a hop
  latency, an input ``latency + bytes / bandwidth``), and the buffer-credit layout (the chunks waiting at
  each level and at the wafer's intake, one in serialisation), which sets the caps and the credit pacing.

What it replaces by closed forms is the event-driven part: how the stream overlaps compute, chunks queue
stage by stage, credits flow back, the optimizer queues its jobs, the flash channel is shared, steps meet
at the iteration boundary, and identical micro-batches are folded.  Agreement with the simulator checks
those mechanics given the same plan (and a slip in either copy of a rewritten rule).  It cannot catch an
error in the plan, the cycle model, the byte counts, the machine's figures or the pacing definition, which
both use; compute agrees by construction (both add the plan's cycles).

Per pass (forward, block recompute and backward of every kernel, in every micro-batch): ``S`` the weights'
stream over the slowest stage down, ``C`` the plan's cycles over the clock, ``U`` the gradients over the
slowest stage up, and the pass takes ``max(C + max(0, s - lead), S - lead + C/n, lag + U - cap_up)``
(:mod:`~wss.model.plan.analytic.sweep`); with activation offload, the block inputs coming back share the wire
of the wafer's edge with the stream (:mod:`~wss.model.plan.analytic.returns`).  Per step: fill, drain, the first
kernel's update and the optimizer's queue ahead of it, the flash channel, the inputs, the runtime's fixed costs
and offload going out (:mod:`~wss.model.plan.analytic.step`), the fill, drain and update between steps waited for
only beyond the next step's fixed costs, which the wafer pays while they run.  The simulator's ``step_time_s`` is
the mean over ``training.steps`` steps; so is this.
"""

from wss.model.plan.analytic.model import StepModel
from wss.model.plan.analytic.step import RECOMPUTING, TERMS, StepEstimate

__all__ = ["StepModel", "StepEstimate", "TERMS", "RECOMPUTING"]
