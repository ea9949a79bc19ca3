"""One micro-batch, pass by pass: Lindley's queue recursion in fluid form, one line per pass.

A pass of ``n`` chunks of stream time ``s = S/n`` takes ``max(C + max(0, s - lead), S - lead + C/n,
lag + U - cap_up)``: the wafer needs the first chunk before it starts and the last one before it ends, and it
cannot hand gradients to a full way up.  ``lead`` is the stream work already done for this pass while the
wafer was busy with earlier ones, ``lag`` the gradient work still queued on the way up; both carry from pass
to pass and are capped by what the buffers hold (:mod:`~wss.model.plan.analytic.schedule`).  With activation
offload a third figure carries too, the block inputs still coming back over the wire the stream crosses, and
while there are any a pass follows :func:`_returning` (:mod:`~wss.model.plan.analytic.returns`).

The recursion runs segment by segment (a block in one direction).  A segment of a class already swept from
the same lead, lag and block inputs coming back (to a part in 10^12 of its time) takes the same time again:
in a run of identical blocks they settle after a block or two, and the rest of the run costs a look-up each.
With offload, a segment no block input touches is the same segment without offload, swept once for both.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np

from wss.model.plan.analytic.schedule import Schedule
from wss.model.plan.pacing import PACING_TOLERANCE

__all__ = ["Columns", "Sweep", "Sweeper"]


class Columns:
    """The schedule's per-pass figures the recursion reads, as Python lists (faster to index than arrays), made
    segment by segment as the recursion first reaches each one.

    A sweep reaches few of a schedule's passes (a run of identical blocks settles after a block or two and the
    rest are look-ups), so converting every pass's figures up front cost more than the sweeps themselves
    (GPT-3 175B: 2,890 passes, 16 columns).  Without offload the recursion never reads which passes wait for a
    block input nor the wire's figures: those come out empty."""

    def __init__(self, sched: Schedule, pass_min_s: float = 0.0):
        """``pass_min_s``: the shortest time from the start of one weight kernel's pass to the next
        (``kernel_pass_min_s``); ``floor`` has it for each weight kernel's pass, 0 for the others."""
        offload = bool(sched.takes_input.any())
        to_memoryx = (sched.phase == 2) & (sched.kernel >= 0)
        self.pass_min = pass_min_s
        self.floor = np.where(sched.kernel >= 0, pass_min_s, 0.0)
        # A pass that streams nothing, prefetches nothing and sends nothing up takes its compute, and the stream
        # runs ahead meanwhile (a non-weight op): the recursion's short way, which adds the same numbers.
        quiet = (sched.chunks == 0) & (sched.up_chunks == 0) & (sched.flash_s == 0.0) & ~to_memoryx & (self.floor == 0)
        self._arrays = [sched.stream_s, sched.chunks, sched.up_s, sched.up_chunks, sched.lag_cap, sched.lead_cap,
                        np.roll(sched.lead_cap, -1), sched.flash_s, sched.flash_share, sched.climb_s,
                        sched.up_chunk_s, to_memoryx, self.floor]
        self._takes = sched.takes_input if offload else None
        self._wire = np.stack(sched.wire, axis=1) if offload else None
        self._quiet = quiet
        self._spans: dict[tuple[int, int], list[list[Any]]] = {}

    def span(self, a: int, b: int) -> list[list[Any]]:
        """Passes ``a .. b - 1``: stream, chunks, up, up chunks, lag cap, lead cap as each pass begins and as it
        ends, flash seconds and share, climb, up chunk seconds, whether its gradient goes to MemoryX, whether it
        takes its block's input, the shortest it may take (``kernel_pass_min_s``, weight kernels), its wire figures
        (one list of :data:`~wss.model.plan.analytic.returns.WIRE` per pass), and whether it streams, prefetches and
        sends up nothing."""
        key = (a, b)
        found = self._spans.get(key)
        if found is None:
            found = [col[a:b].tolist() for col in self._arrays]
            found.append(self._takes[a:b].tolist() if self._takes is not None else [])
            found.append(self._wire[a:b].tolist() if self._wire is not None else [])
            found.append(self._quiet[a:b].tolist())
            self._spans[key] = found
        return found


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
    held: float = 0.0  # the wafer's waits for its offloaded block inputs (the offload category)
    returning_out: float = 0.0  # edge seconds of block inputs still to come back (within a micro-batch only)
    readied: float = 0.0  # the wafer's waits for a weight kernel's pass to be readied (kernel_pass_min_s; switch)
    since_out: float = 0.0  # time since the last weight kernel's pass began, as it ends (at most kernel_pass_min_s)


class Sweeper:
    """The sweeps of one micro-batch size: the pass figures at that size, and the segments swept so far."""

    def __init__(self, sched: Schedule, columns: Columns, compute_s: np.ndarray, paced_s: np.ndarray,
                 returns_s: np.ndarray | None = None, plain: Sweeper | None = None):
        """``returns_s``, with offload: see :attr:`returns`; ``plain``: the sweeper of the same passes without
        offload, which sweeps the segments no block input touches (``sched.plain_classes``) for both."""
        self.sched = sched
        self.plain = plain
        self.compute = compute_s
        self.paced = paced_s
        # With activation offload, the edge seconds of block input that start coming back as each pass begins.
        self.returns = returns_s
        self.columns = columns  # the schedule's figures as Python lists, segment by segment (see Columns)
        self.first_cap = float(sched.lead_cap[0]) if sched.lead_cap.size else 0.0
        self._segments: dict[tuple[int, float, float, float, float], Sweep] = {}
        # class -> the lead, lag and block inputs on the wire it was last swept from, and its scale
        self._last: dict[int, tuple[float, float, float, float, float]] = {}
        self._sweeps: dict[tuple[float, float, float], Sweep] = {}
        self._spans: dict[tuple[int, int], tuple[list[float], list[float], list[float]]] = {}

    def span(self, a: int, b: int) -> tuple[list[float], list[float], list[float]]:
        """Passes ``a .. b - 1`` at this size, as Python lists: compute, paced compute, returns (made once a span,
        as :meth:`Columns.span`)."""
        key = (a, b)
        found = self._spans.get(key)
        if found is None:
            returns = self.returns[a:b].tolist() if self.returns is not None else [0.0] * (b - a)
            found = (self.compute[a:b].tolist(), self.paced[a:b].tolist(), returns)
            self._spans[key] = found
        return found

    @functools.cached_property
    def backward_share(self) -> float:
        """Each pass at the slower of its stream, its compute and its gradients: the backward sweep's share of the
        micro-batch (recomputes included), when the returning block inputs have to cross the activation store."""
        sched = self.sched
        time = np.maximum(np.maximum(sched.stream_s, self.paced), sched.up_s)
        total = float(time.sum())
        return float(time[sched.phase != 0].sum()) / total if total > 0 else 0.5

    def sweep(self, lead: float, lag: float, since: float = 0.0) -> Sweep:
        """The micro-batch from ``lead``, ``lag`` and ``since`` (computed once per triple): ``since`` is the time
        since the last weight kernel's pass began, as the micro-batch begins (it matters below
        ``kernel_pass_min_s`` only, and is kept at most that)."""
        key = (lead, lag, since)
        if key not in self._sweeps:
            self._sweeps[key] = self._sweep(lead, lag, since)
        return self._sweeps[key]

    def _sweep(self, lead: float, lag: float, since: float) -> Sweep:
        t = compute = flash = flash_wait = held = readied = p_c = p_s = p_f = 0.0
        back = 0.0  # every block input is taken by its recompute: none is on the wire when a micro-batch starts
        parts: list[np.ndarray] = []
        segment = self._segment
        for cls, spans in self.sched.runs:
            i, n = 0, len(spans)
            while i < n:
                seg = segment(*spans[i], cls, lead, lag, back, since)
                lead, lag, back, since = seg.lead_out, seg.lag_out, seg.returning_out, seg.since_out
                # A fixed point: every copy left in the run repeats this one.
                copies = n - i if i + 1 < n and segment(*spans[i + 1], cls, lead, lag, back, since) is seg else 1
                if seg.arrivals.size:  # (a forward segment sends no gradient up)
                    if copies > 1:
                        starts = t + seg.duration * np.arange(copies)
                        parts.append((starts[:, None] + seg.arrivals[None, :]).ravel())
                    else:
                        parts.append(seg.arrivals + t)
                t += copies * seg.duration
                compute += copies * seg.compute
                flash += copies * seg.flash
                flash_wait += copies * seg.flash_wait
                held += copies * seg.held
                readied += copies * seg.readied
                paced = seg.paced
                p_c, p_s, p_f = p_c + copies * paced[0], p_s + copies * paced[1], p_f + copies * paced[2]
                i += copies
        arrivals = np.concatenate(parts) if parts else np.zeros(0)
        return Sweep(t, compute, flash, flash_wait, lead, lag, (p_c, p_s, p_f), arrivals, held, readied=readied,
                     since_out=since)

    def _segment(self, a: int, b: int, cls: int, lead: float, lag: float, back: float, since: float) -> Sweep:
        """One segment; a class met again from (nearly) the same lead, lag, returns and time since the last weight
        kernel's pass began repeats its sweep."""
        if self.plain is not None and back == 0.0 and cls in self.sched.plain_classes:
            return self.plain._segment(a, b, self.sched.plain_classes[cls], lead, lag, 0.0, since)
        key = (cls, lead, lag, back, since)
        found = self._segments.get(key)
        if found is not None:
            return found
        last = self._last.get(cls)
        if last is not None:
            tol = 1e-12 * last[4]
            if abs(last[0] - lead) <= tol and abs(last[1] - lag) <= tol and abs(last[2] - back) <= tol \
                    and abs(last[3] - since) <= tol:
                return self._segments[(cls, last[0], last[1], last[2], last[3])]
        seg = self._run(a, b, lead, lag, back, since)
        self._segments[key] = seg
        self._last[cls] = (lead, lag, back, since, max(seg.duration, lead, lag, back))
        return seg

    def _run(self, a: int, b: int, lead: float, lag: float, back: float, since: float) -> Sweep:
        """The recursion over passes ``a .. b - 1`` (see the module docstring); ``back``: edge seconds of block
        inputs still to come back (:mod:`~wss.model.plan.analytic.returns`); ``since``: see :func:`_readied`."""
        stream, chunks, up, up_chunks, lag_cap, cap_in, cap_out, flash_s, share, climb, up_chunk, returns, floor, \
            takes, wire, quiet = self.columns.span(a, b)
        comp, paced, adds = self.span(a, b)
        t = compute = flash = flash_wait = held = readied = p_c = p_s = p_f = 0.0
        most = self.columns.pass_min  # ``since`` is kept at most this: any longer is as long
        arrivals = []
        for i in range(b - a):  # conditional expressions, not max() and min(): this loop is the level's hot path
            c, n, s_total = comp[i], chunks[i], stream[i]
            gap = floor[i] - since if floor[i] > 0.0 else 0.0  # a weight kernel's pass: readied since the last began
            if back > 0.0 or adds[i] > 0.0:  # block inputs share the wire: a pass of its own
                hold, dur, lead, back, gap = _returning(c, n, s_total, paced[i], lead, back, adds[i], takes[i],
                                                        cap_in[i], cap_out[i], up_chunks[i],
                                                        lag + up[i] - lag_cap[i], wire[i], gap)
                if gap > 0.0:
                    lag = lag - gap if lag > gap else 0.0
            elif quiet[i]:  # dur = c, no wait: what the lines below come to, each float added the same way
                ahead = lead + c
                lead = ahead if ahead < cap_out[i] else cap_out[i]
                rest = lag - c
                lag = rest if rest > 0.0 else 0.0
                t += c
                compute += c
                p_c += c
                since = since + c if since + c < most else most
                continue
            else:
                hold = 0.0
                if gap > 0.0:
                    lead, lag = _readied(lead, lag, gap, cap_in[i])
                if n:
                    first = s_total / n - lead
                    dur = paced[i] + first if first > 0.0 else paced[i] + 0.0
                    last = s_total - lead + paced[i] / n
                    dur = last if last > dur else dur
                else:
                    dur = c
                if up_chunks[i]:  # the last gradient chunk goes out when the way up has room, once it is computed
                    full = lag + up[i] - lag_cap[i]
                    dur = full if full > dur else dur
                # The stream never idles while the buffers have room: it runs ahead by what the pass left over.
                ahead = lead - s_total + dur
                lead = ahead if ahead < cap_out[i] else cap_out[i]
            if up_chunks[i]:
                rest, one = lag + up[i] - dur, up[i] / up_chunks[i]
                lag = rest if rest > one else one
            else:
                rest = lag - dur
                lag = rest if rest > 0.0 else 0.0
            t += dur + gap
            compute += c
            flash += flash_s[i]
            held += hold
            readied += gap
            ahead = dur - hold if floor[i] > 0.0 else since + dur  # (from the weight pass's start, after its hold)
            since = ahead if ahead < most else most
            wait = dur - hold - c  # all for the weight path: updates, inputs, offload are other terms
            if wait > 0.0:
                w_f, w_s = wait * share[i], wait * (1.0 - share[i])
            else:
                w_f = w_s = 0.0
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
                queued = lag - up_chunk[i]
                arrivals.append(t + (queued if queued > 0.0 else 0.0) + climb[i])
        return Sweep(t, compute, flash, flash_wait, lead, lag, (p_c, p_s, p_f), np.array(arrivals), held, back, readied,
                     since)


def _readied(lead: float, lag: float, gap: float, cap: float) -> tuple[float, float]:
    """The wafer's wait of ``gap`` seconds for a weight kernel's pass to be readied: the lead and lag after it.

    The runtime readies each weight kernel's pass while the one before it runs, and a pass begins no sooner than
    ``kernel_pass_min_s`` after that one began (the work between them counts): the recursion carries ``since``, the
    time since the last one began (kept at most the minimum), and a pass that finds less waits out the rest
    (``gap``).  Meanwhile the stream runs ahead to its cap and the way up drains, as while the wafer pays a fixed
    cost.  With block inputs coming back, the wait follows the block's input (:func:`_returning`)."""
    return (lead + gap if lead + gap < cap else cap), (lag - gap if lag > gap else 0.0)


def _returning(c: float, n: int, s_total: float, paced: float, lead: float, back: float, add: float, takes: bool,
               cap_in: float, cap_out: float, up_chunks: int, up_full: float,
               wire: list[float], ready: float = 0.0) -> tuple[float, float, float, float, float]:
    """One pass while block inputs come back on the wire its stream crosses (module
    :mod:`~wss.model.plan.analytic.returns`): the wafer's wait for its block's input (a recompute's first op),
    the pass's seconds with that wait, the lead and block inputs left after it, and its wait to be readied.

    ``ready``: how long after its start a weight kernel's pass is readied (``kernel_pass_min_s`` less the time since
    the last one began); the wafer waits for it after its block's input, the stream runs ahead to its cap
    meanwhile and block inputs still on the wire come back (an approximation: each as if the wire were its own).

    ``cap_in`` and ``cap_out`` cap the lead as the pass begins and ends; ``up_full`` is when the way up has room
    for its last gradient chunk (``lag + U - cap_up``)."""
    k1, k2, q, r, on_wire = wire
    hold = 0.0
    if takes and back > 0.0:
        # The rest of the block's input has the wire but for the stream running ahead to its cap.
        run = min(max(0.0, cap_in - lead) / q, back / r)
        hold = run + back - run * r
        lead += run * q
        back = 0.0
    gap = max(0.0, ready - hold)
    if gap > 0.0:
        lead = min(cap_in, lead + gap)
        back = max(0.0, back - gap)
    back += add
    if n:
        first = max(0.0, s_total / n - lead)
        rest = max(0.0, s_total - lead)
        dur = max(paced + first + min(first * k1, back * k2),
                  s_total - lead + min(rest * k1, back * k2) + paced / n)
    else:
        dur = c
    if up_chunks:
        dur = max(dur, up_full - hold)
    # The stream moves at q of its pace while block inputs wait; they take the wire whenever it does not.
    ahead = min(cap_out, lead - s_total + dur - min(dur, back / r) * (1.0 - q))
    back = max(0.0, back - dur + on_wire * max(0.0, ahead - lead + s_total))
    return hold, hold + dur, ahead, back, gap
