"""The pacing rules: how a step's time is split into categories, and what paced a wafer pass.

The simulator's measurement (:mod:`wss.model.result.measure`, through :mod:`wss.model.result.results`)
and the analytic level (:mod:`wss.model.plan.analytic`) classify time by these same rules, so the two
agree on ``bound_by`` by one definition (not by independent judgement).  Kept in the plan's wing, below
both, as :mod:`wss.model.plan.choice` is.
"""

from __future__ import annotations

__all__ = ["BREAKDOWN_CATEGORIES", "PACING_TOLERANCE", "RATE_CAUSES", "pass_pacing", "paced_by", "bound_category"]

#: How the time of a step is split (see wss.model.components.wafer).
BREAKDOWN_CATEGORIES = ("compute", "stream", "flash", "optimizer", "bubble", "input", "switch", "runtime", "offload")

#: A pass whose waits for the weight path stay under this fraction of its time is paced by its
#: compute: such waits are latency, not a rate limit.  A classification threshold, not a hardware figure.
PACING_TOLERANCE = 0.01


#: Waits for a rate: the weight path could not deliver (or take) chunks as fast as the wafer
#: computed.  The other causes (bubble, optimizer, input) are events the pass waited for once.
RATE_CAUSES = ("stream", "flash")


def pass_pacing(compute_s: float, stall_by: dict[str, float]) -> dict[str, float]:
    """Split one wafer pass's time by what paced it.

    The breakdown counts a pass's compute and its waits apart; what *paced* it is another
    question.  A pass that computes 54% of its time and waits for weights the other 46% is paced
    by the stream: a faster clock would only lengthen the waits.  So:

    * waits for an event (the previous step's update, the optimizer's queue, the input: the
      causes not in :data:`RATE_CAUSES`) count as they are, to their causes;
    * the rest of the pass (its compute and its waits for the weight path) counts whole to the
      rate cause with most of those waits if they exceed :data:`PACING_TOLERANCE` of it, and
      otherwise as it was spent.

    The parts sum to the pass's time.
    """
    out = {c: v for c, v in stall_by.items() if c not in RATE_CAUSES and v > 0}
    rate = {c: v for c, v in stall_by.items() if c in RATE_CAUSES and v > 0}
    span = compute_s + sum(rate.values())
    if sum(rate.values()) > PACING_TOLERANCE * span:
        rate = {max(sorted(rate), key=lambda c: rate[c]): span}
    elif compute_s > 0:
        rate["compute"] = compute_s
    for c, v in rate.items():
        out[c] = out.get(c, 0.0) + v
    return out


def paced_by(pacing: dict[str, float]) -> str:
    """The category with the largest part of one pass's :func:`pass_pacing` (``compute`` if empty)."""
    return bound_category(pacing) if pacing else "compute"


def bound_category(pacing_s: dict[str, float]) -> str:
    """The category pacing most of the step (ties go to the earlier of :data:`BREAKDOWN_CATEGORIES`)."""
    return max(BREAKDOWN_CATEGORIES, key=lambda c: (pacing_s.get(c, 0.0), -BREAKDOWN_CATEGORIES.index(c)))
