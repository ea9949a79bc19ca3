"""What the planner chose and what it weighed: :class:`PlanChoice` and the :class:`CandidateCost` it ranks.

Kept apart from :mod:`wss.model.plan` (which fills them) so that :mod:`wss.model.result.results` can carry
the choice in a Result without importing the plan's machinery.  Both are frozen pydantic models,
so a Result serialises them as they are.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["CandidateCost", "PlanChoice"]


class CandidateCost(BaseModel):
    """One candidate way to run a step (checkpointing x micro-batches) and its analytic cost."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    checkpointing: str = Field(description="'none', 'blocks' or 'offload'.")
    micro_batches: tuple[int, ...] = Field(description="Samples per micro-batch on the busiest wafer, in run order.")
    step_time_s: float = Field(description="Analytic step time (wss.model.plan.search), seconds.")
    compute_s: float = Field(description="Seconds per step the passes are paced by the wafer's compute.")
    stream_s: float = Field(description="Seconds per step the passes are paced by the weight stream (or gradients).")
    other_s: float = Field(description="Seconds per step outside the passes: fill, drain, update, optimizer, input.")
    bound_by: str = Field(description="'compute', 'stream' or 'other': the largest of the three.")
    weight_crossings: float = Field(description="Full copies of the weights streamed into a wafer per step.")
    sram_bytes_needed: float = Field(description="Activation SRAM of the largest micro-batch, bytes.")

    @property
    def largest(self) -> int:
        """Samples in the largest micro-batch: ``training.micro_batch`` forces this split."""
        return max(self.micro_batches)

    def split(self) -> str:
        """``'5 micro-batches of 13'``, ``'5 micro-batches of 13 and 12'``, ``'1 micro-batch of 8'``."""
        n = len(self.micro_batches)
        sizes = " and ".join(str(m) for m in sorted(set(self.micro_batches), reverse=True))
        return f"{n} micro-batch{'es' if n > 1 else ''} of {sizes}"

    def short(self) -> str:
        """``'none x 9'``: the mode and the micro-batch count."""
        return f"{self.checkpointing} x {len(self.micro_batches)}"


class PlanChoice(BaseModel):
    """The candidate the plan runs, the best alternatives it weighed, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    chosen: CandidateCost
    alternatives: tuple[CandidateCost, ...] = Field(
        description="The next best candidates by analytic step time, best first (at most a few)."
    )
    candidates: int = Field(description="How many candidates were ranked (the chosen one included).")
    searched: tuple[str, ...] = Field(
        description="The training fields that were 'auto' and so searched: activation_checkpointing, micro_batch."
    )
    reason: str = Field(description="Why this candidate: searched and fastest, or asked for.")

    def line(self) -> str:
        """``'blocks checkpointing, 5 micro-batches of 13 (auto; next best: none x 9, +12%)'``."""
        c = self.chosen
        how = "auto" if self.searched else "asked for"
        if self.alternatives:
            nxt = self.alternatives[0]
            gap = nxt.step_time_s / c.step_time_s - 1.0 if c.step_time_s > 0 else 0.0
            how += f"; next best: {nxt.short()}, +{gap:.0%}"
        return f"{c.checkpointing} checkpointing, {c.split()} ({how})"
