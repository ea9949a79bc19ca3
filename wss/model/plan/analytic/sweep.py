"""One micro-batch, pass by pass: Lindley's queue recursion in fluid form, one line per pass.

A pass of ``n`` chunks of stream time ``s = S/n`` takes ``max(C + max(0, s - lead), S - lead + C/n,
lag + U - cap_up)``: the wafer needs the first chunk before it starts and the last one before it ends, and it
cannot hand gradients to a full way up.  ``lead`` is the stream work already done for this pass while the
wafer was busy with earlier ones, ``lag`` the gradient work still queued on the way up; both carry from pass
to pass and are capped by what the buffers hold (:mod:`~wss.model.plan.analytic.schedule`).

The recursion runs segment by segment (a block in one direction).  A segment of a class already swept from
the same lead and lag (to a part in 10^12 of its time) takes the same time again: in a run of identical
blocks the lead and lag settle after a block or two, and the rest of the run costs a look-up each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from wss.model.plan.analytic.schedule import Schedule
from wss.model.plan.pacing import PACING_TOLERANCE

__all__ = ["Sweep", "Sweeper", "columns"]


def columns(sched: Schedule) -> list[list[Any]]:
    """The schedule's per-pass figures the recursion reads, as Python lists (faster to index than arrays)."""
    return [sched.stream_s.tolist(), sched.chunks.tolist(), sched.up_s.tolist(), sched.up_chunks.tolist(),
            sched.lag_cap.tolist(), np.roll(sched.lead_cap, -1).tolist(), sched.flash_s.tolist(),
            sched.flash_share.tolist(), sched.climb_s.tolist(), sched.up_chunk_s.tolist(),
            ((sched.phase == 2) & (sched.kernel >= 0)).tolist()]


@dataclass(frozen=True)
class Sweep:
    """What one micro-batch (or one segment of it) took, from the lead and lag it began with."""

    duration: float
    compute: float
    flash: float  # flash-channel seconds of the prefetches
    flash_wait: float  # the wafer's waits due to prefetches
    lead_out: float
    lag_out: float
    paced: tuple[float, float, float]  # pass seconds paced by compute, the stream and flash (pass_pacing)
    arrivals: np.ndarray  # when each backward kernel pass's gradient reaches MemoryX, from the start


class Sweeper:
    """The sweeps of one micro-batch size: the pass figures at that size, and the segments swept so far."""

    def __init__(self, sched: Schedule, columns: list[list[Any]], compute_s: np.ndarray, paced_s: np.ndarray):
        self.sched = sched
        self.compute = compute_s.tolist()
        self.paced = paced_s.tolist()
        self.columns = columns  # the schedule's figures as Python lists (see columns())
        self.first_cap = float(sched.lead_cap[0]) if sched.lead_cap.size else 0.0
        # Each pass at the slower of its stream, its compute and its gradients: the backward sweep's share of the
        # micro-batch (recomputes included), when the returning block inputs have to cross the activation store.
        time = np.maximum(np.maximum(sched.stream_s, paced_s), sched.up_s)
        total = float(time.sum())
        self.backward_share = float(time[sched.phase != 0].sum()) / total if total > 0 else 0.5
        self._segments: dict[tuple[int, float, float], Sweep] = {}
        self._last: dict[int, tuple[float, float, float]] = {}  # class -> the lead and lag it was last swept from
        self._sweeps: dict[tuple[float, float], Sweep] = {}

    def sweep(self, lead: float, lag: float) -> Sweep:
        """The micro-batch from ``lead`` and ``lag`` (computed once per pair)."""
        key = (lead, lag)
        if key not in self._sweeps:
            self._sweeps[key] = self._sweep(lead, lag)
        return self._sweeps[key]

    def _sweep(self, lead: float, lag: float) -> Sweep:
        t = compute = flash = flash_wait = p_c = p_s = p_f = 0.0
        parts: list[np.ndarray] = []
        for cls, spans in self.sched.runs:
            i = 0
            while i < len(spans):
                seg = self._segment(*spans[i], cls, lead, lag)
                copies = 1
                if i + 1 < len(spans) and self._segment(*spans[i + 1], cls, seg.lead_out, seg.lag_out) is seg:
                    copies = len(spans) - i  # a fixed point: every copy left in the run repeats this one
                starts = t + seg.duration * np.arange(copies)
                parts.append((starts[:, None] + seg.arrivals[None, :]).ravel())
                t += copies * seg.duration
                compute += copies * seg.compute
                flash += copies * seg.flash
                flash_wait += copies * seg.flash_wait
                p_c, p_s, p_f = p_c + copies * seg.paced[0], p_s + copies * seg.paced[1], p_f + copies * seg.paced[2]
                lead, lag = seg.lead_out, seg.lag_out
                i += copies
        arrivals = np.concatenate(parts) if parts else np.zeros(0)
        return Sweep(t, compute, flash, flash_wait, lead, lag, (p_c, p_s, p_f), arrivals)

    def _segment(self, a: int, b: int, cls: int, lead: float, lag: float) -> Sweep:
        """One segment; a class met again from (nearly) the same lead and lag repeats its sweep."""
        found = self._segments.get((cls, lead, lag))
        if found is not None:
            return found
        last = self._last.get(cls)
        if last is not None:
            tol = 1e-12 * last[2]
            if abs(last[0] - lead) <= tol and abs(last[1] - lag) <= tol:
                return self._segments[(cls, last[0], last[1])]
        seg = self._run(a, b, lead, lag)
        self._segments[(cls, lead, lag)] = seg
        self._last[cls] = (lead, lag, max(seg.duration, lead, lag))
        return seg

    def _run(self, a: int, b: int, lead: float, lag: float) -> Sweep:
        """The recursion over passes ``a .. b - 1`` (see the module docstring)."""
        stream, chunks, up, up_chunks, lag_cap, lead_cap, flash_s, share, climb, up_chunk, returns = self.columns
        comp, paced = self.compute, self.paced
        t = compute = flash = flash_wait = p_c = p_s = p_f = 0.0
        arrivals = []
        for i in range(a, b):
            c, n, s_total = comp[i], chunks[i], stream[i]
            if n:
                s = s_total / n
                dur = max(paced[i] + max(0.0, s - lead), s_total - lead + paced[i] / n)
            else:
                dur = c
            if up_chunks[i]:
                # The last gradient chunk goes out when the way up has room, and only once it is computed.
                dur = max(dur, lag + up[i] - lag_cap[i])
                lag = max(up[i] / up_chunks[i], lag + up[i] - dur)
            else:
                lag = max(0.0, lag - dur)
            # The stream never idles while the buffers have room: it runs ahead by what the pass left over.
            lead = min(lead_cap[i], lead - s_total + dur)
            t += dur
            compute += c
            flash += flash_s[i]
            wait = max(0.0, dur - c)  # all for the weight path: updates and inputs are other terms
            w_f, w_s = wait * share[i], wait * (1.0 - share[i])
            flash_wait += w_f
            # pass_pacing, inline: the waits for a rate pace the pass whole when they pass the tolerance.
            rate = (w_f if w_f > 0 else 0.0) + (w_s if w_s > 0 else 0.0)
            if rate > PACING_TOLERANCE * (c + rate):
                if w_f >= w_s:
                    p_f += c + rate
                else:
                    p_s += c + rate
            else:
                p_c += c
                p_f += w_f if w_f > 0 else 0.0
                p_s += w_s if w_s > 0 else 0.0
            if returns[i]:
                arrivals.append(t + max(0.0, lag - up_chunk[i]) + climb[i])
        return Sweep(t, compute, flash, flash_wait, lead, lag, (p_c, p_s, p_f), np.array(arrivals))
