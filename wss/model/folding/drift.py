"""Drifting wafers: the blocks of a slot where smaller shards (or wafers faster than a straggler) run ahead of the
largest, folded exactly.

In a micro-batch slot where the wafers' micro-batches differ in size, the busiest wafer paces every broadcast
and reduction.  A wafer with fewer samples computes each block a little faster: block after block it runs
further ahead, by the same amount ``δ`` a block, as far as the buffers between them let it.  No two of its
blocks start alike against the busiest one's, so the copies the layer fold inserts for the busiest
(:mod:`wss.model.folding.layer_fold`) cannot stand for it: over the ``n`` blocks they stand for, it would have
gained ``D = n·δ`` more on the rest.

A drift fold splits the cluster into *worlds*: the **pacing world** (MemoryX, its optimizer, the busiest wafers
and the tree above them) and one **drifting world** per subtree the pacing world broadcasts into whose wafers all
have fewer samples (those wafers, their input workers, activation stores and offload returns, and the SwarmX edges
of the subtree; wafers in different subtrees may drift at different paces).  Each world's copies are its own
block: ``n`` blocks of the pacing period ``P`` for the pacing world, ``n`` of its own block for a drifting world,
so past the copies everything of a pass after the fold point moves on by ``n·P`` in the pacing world and by
``n·(P - δ)`` in the drifting one.  Where they meet, a drifting world is ``D`` further ahead than the simulation
has it:

* the fold point's first chunks into a drifting world (at the top of its subtree) come through a **delay line**:
  they go in ``D`` later, their flight ending as much later (:meth:`DriftWorld.lag`);
* once the pacing world no longer does anything of an earlier pass with a drifting world (every top link has had
  a chunk past the fold point, no gradient of an earlier pass waits at or goes to one of its reductions, every
  drifting wafer has started the fold point's last pass), the pacing world **pauses** for the largest ``D``, each
  drifting world for the rest of it: every event a world waits for moves by its pause (:meth:`DriftWorld._move`),
  and its clock stands still meanwhile (:func:`paused_clock`), so everything it records and every time it
  measures stays on its own axis.  From then on the worlds meet on one axis again; a chunk that crosses between
  them has its time (``ready_at``) moved by its world's lag for its pass.

Where a drifting wafer's buffers run dry within the copies, its lead stops growing and from then on it keeps the
pacing world's step.  The simulation gives it the whole delay at once: in its first block behind the delay it
waits, in one go, for what the lead could not carry, and ends that block where the real run has it
(:func:`waited_for`); its copies (free blocks) and that wait add up to what its blocks took.

Checked, not assumed (any failure raises :class:`~wss.model.folding.layer_fold.LayerFoldMismatch`, and the ladder
folds less, with the same answers):

* the delay is measured on the first compared block of the representative and of the world's wafers (the pacing
  period less the world's block, times the copies); chunks past the fold point that reach the world before that
  block is done are held until it is, and the fold is refused where they were held longer than their delay;
* every drifting wafer's compared blocks take that block and split alike by cause, or its second one waits longer
  for one cause alone (its lead ran out there); a world's wafers drift alike; the pacing world's blocks repeat as
  any fold's (the drifting worlds' parts checked on their own axis);
* each drifting wafer's first block behind the delay repeats its free block, or waits longer for one cause alone
  (its lead ran out), and then the block after keeps the pacing world's step, waiting the free block's causes and
  ``P - δ`` more of that one, or the two blocks after it do together, and the one after them alone (its block inputs
  coming back beside the stream may take a block more to settle) (``settles`` where a forward run-out is refused: a
  longer stretch before the fold may see the wafers back in step);
* a delayed chunk that finds its inbox full goes in no later than the rest of its broadcast went into theirs (the
  broadcast would have waited for it); a gradient that crosses off its pass's axis does not complete its reduction
  before the pause, and is let go without anything waiting behind it where the drifting world hears that late.

A drift fold is tried only where nothing but uneven shards and stragglers sets the wafers apart (a node down may
have made them uneven), the representative has the most work in every slot, and no drifting world shares a
bandwidth with the pacing world (activation stores of their own: on the wafers' hosts, limited or not, not on
MemoryX): else every block of such slots is simulated, as before (:func:`drifting_wafers`).  A limited host store's
bandwidth belongs to its wafer's world: its timers move with that world at a pause and read its clock
(:attr:`~wss.model.components.shared_bandwidth.SharedBandwidth.clock`).  With a straggler, every other wafer
drifts ahead of it, in every slot.  A recorded run drift-folds too: each world's records are on its own axis, and
its parts' spans go past its own block copies (:attr:`DriftWorld.world_layers`,
:meth:`~wss.model.folding.folded_spans.UnfoldedSpans.in_world`)."""

from __future__ import annotations

import heapq
from collections.abc import Callable, Container, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import simpy
from simpy.events import URGENT, Condition

from wss.model.components.links import Chunk, Inlet, Link
from wss.model.folding.fold import REL_TOL, close, seconds_by_cause
from wss.model.folding.layer_fold import FoldPoint, LayerFold, LayerFoldMismatch, LayersFold

if TYPE_CHECKING:
    from wss.model.components.shared_bandwidth import SharedBandwidth
    from wss.model.components.wafer import Wafer
    from wss.model.plan import Plan
    from wss.model.sim.unfolded import UnfoldedCluster

__all__ = ["DriftWorld", "Delay", "drift_world", "drifting_wafers", "less_work", "paused_clock", "waited_for"]


def _count(counts: dict[int, int], key: int, by: int) -> None:
    """Add ``by`` to ``counts[key]``, leaving no zero behind: :meth:`DriftWorld._try_pause` scans what is left on
    every chunk that crosses into a drifting world, so only the passes with chunks still on their way stay."""
    n = counts.get(key, 0) + by
    if n:
        counts[key] = n
    else:
        counts.pop(key, None)


def _world_now(env: Any) -> float:
    """``now`` once the pacing world has paused: each world's clock (simulated time less its pauses so far), read by
    the world of the process asking (the pacing world's where no process asks).

    Read on every ``env.now`` of the run from then on, so it is kept short: the world is cached on the process
    itself (:meth:`DriftWorld.world_of` finds it once), and the lags are the drift world's list, bound to the
    environment (:meth:`DriftWorld._move` changes it in place)."""
    proc = env._active_proc
    if proc is None:
        return float(env._now - env._lags[0])
    try:
        world = proc._drift_world
    except AttributeError:
        world = proc._drift_world = env._drift.world_of(proc)
    return float(env._now - env._lags[world])


def paused_clock(cls: type) -> type:
    """The environment class a run switches to at its first pause (:meth:`DriftWorld._move`): ``cls`` with ``now``
    read per world (:func:`_world_now`); until then no clock lags and nothing pays for the check."""
    return type(f"Paused{cls.__name__}", (cls,), {"now": property(_world_now), "paused": True})


@dataclass(frozen=True)
class Delay:
    """The delay line of one drifting world at one fold point: ``seconds`` (the copies times its wafers' lead a
    block), for every chunk of a pass from ``point.c`` on; ``block`` is its wafers' block it was measured on."""

    point: FoldPoint
    world: int
    seconds: float
    block: float


@dataclass
class _Pending:
    """A fold point of one drifting world whose delay is not known yet: a chunk past it crossed before the
    representative and the world's wafers had started its second compared block."""

    point: FoldPoint
    #: succeeds once it is measured (made where a chunk is held for it)
    measured: simpy.Event | None = None
    #: whether the chunks that crossed before went in undelayed (the world did not drift in the block before)
    let_in: bool | None = None


@dataclass
class DriftWorld:
    """The drifting worlds of an unfolded run (numbered from 1; 0 is the pacing world), the fold points they may
    drift at and the delays they were given.

    Each drifting world is one subtree the pacing world broadcasts into (the wafers with fewer samples below one
    top link, and the links only they use): wafers in different subtrees may drift at different paces."""

    wafers: list[Wafer]
    #: id -> world of every object whose processes belong to a drifting world (its wafers, their input workers
    #: and activation stores, their offload returns, the SwarmX links only they use, and its delay lines)
    members: dict[int, int]
    #: the drifting worlds' links (counted by pass), and those at the top of their subtrees
    links: list[Link]
    tops_down: list[Link]
    tops_up: list[Link]
    #: the micro-batch slots where some drifting wafers have less work than the representative: the fold points
    #: they may drift at (in the others every wafer's blocks are checked as in any fold)
    slots: frozenset[int] = frozenset()
    #: a run recorded for traces: a lead that runs out over the copies is refused (:meth:`_may_run_out`)
    recorded: bool = False
    #: the SwarmX levels' and the offload returns' views, by name (their figure is a member's)
    views: set[str] = field(default_factory=set)
    delays: list[Delay] = field(default_factory=list)
    #: each drifting wafer's block at each fold point it drifted at, by wafer name and the point's pass ``c``
    periods: dict[tuple[str, int], float] = field(default_factory=dict)
    #: the drifting wafers whose lead ran out over the copies of a fold point (by name and its pass ``c``), and
    #: the cause they waited for in their first block behind its delay (:func:`waited_for`)
    ran_out: dict[tuple[str, int], str] = field(default_factory=dict)
    #: each world's clock lag behind simulated time (its pauses so far), by world
    lags: list[float] = field(default_factory=list)
    #: the broadcasts into the drifting worlds' top links, and each top link's (by id) index among them
    fanouts: list[Any] = field(default_factory=list)
    _parent: dict[int, int] = field(default_factory=dict)
    #: the name of every part of a drifting world -> its world
    _names: dict[str, int] = field(default_factory=dict)
    _env: simpy.Environment | None = None
    #: each world's fold points still to decide (program order), the wafers' marks, the representative's name
    _points: dict[int, list[FoldPoint]] = field(default_factory=dict)
    _marks: dict[str, dict[int, tuple[float, int, float]]] = field(default_factory=dict)
    _rep: str = ""
    #: (fold point pass ``c``, world) -> its delay line (None: that world does not drift there); those whose
    #: chunks crossed before their compared blocks could be measured
    _decided: dict[tuple[int, int], Delay | None] = field(default_factory=dict)
    #: (fold point, world) -> the fold point and what its held chunks wait for, where a chunk past the fold point
    #: reached the world before its compared blocks could be measured (:meth:`_measure`)
    _pending: dict[tuple[int, int], _Pending] = field(default_factory=dict)
    #: how many chunks were held so (:meth:`_Line.held`)
    early: int = 0
    #: (broadcast id, pass, chunk) -> when its children outside the drifting worlds had all taken the chunk
    _taken: dict[tuple[int, int, int], float] = field(default_factory=dict)
    #: fold point pass ``c`` -> the top links (by id) that have not yet had a chunk from it: the pause waits for them
    _waiting: dict[int, set[int]] = field(default_factory=dict)
    #: the drifting wafers' leaf edges going up (where their gradients enter the world's tree)
    leaves_up: list[Link] = field(default_factory=list)
    #: pass -> the drifting worlds' gradient chunks of it waiting at a reduction of the pacing world, and those on
    #: their way there from a drifting wafer (counted as each wafer's chunk enters its leaf edge; a chunk leaving a
    #: world's top stands for one from each of its wafers)
    _held: dict[int, int] = field(default_factory=dict)
    _upcoming: dict[int, int] = field(default_factory=dict)
    _owns: dict[simpy.Process, int] = field(default_factory=dict)
    #: each world's delay lines (index 0 unused)
    lines: list[_Line] = field(default_factory=list)
    #: each world's number of simulated wafers, by world (read for every gradient chunk leaving a world)
    sizes: dict[int, int] = field(default_factory=dict)
    #: after the run, each drifting world's block copies (its first wafer's: its wafers drift alike), by world:
    #: where its parts' records go on the unfolded axis (:meth:`~wss.model.folding.folded_spans.UnfoldedSpans.in_world`)
    world_layers: dict[int, LayersFold] = field(default_factory=dict)

    # -- the worlds -----------------------------------------------------------------------------------------------

    @property
    def worlds(self) -> range:
        """The drifting worlds' numbers."""
        return range(1, len(self.lags))

    def world_wafers(self, world: int) -> list[Wafer]:
        return [w for w in self.wafers if self.members[id(w)] == world]

    def world_of(self, proc: simpy.Process) -> int:
        """The world a process runs in: a drifting world where its generator is a method of one of its parts (a
        part's processes and those it starts, such as a wafer's sends), else the pacing world (0)."""
        world = self._owns.get(proc)
        if world is None:
            frame = getattr(proc._generator, "gi_frame", None)
            me = frame.f_locals.get("self") if frame is not None else None
            world = self._owns[proc] = self.members.get(id(me), 0) if me is not None else 0
        return world

    def world_of_event(self, event: simpy.Event, depth: int = 0) -> int:
        """The world of the process a scheduled event resumes (directly or through a condition), or of the part whose
        callback it runs (a drifting world's store bandwidth's timer); 0 for none."""
        for callback in event.callbacks or ():
            owner = getattr(callback, "__self__", None)
            if isinstance(owner, simpy.Process):
                world = self.world_of(owner)
                if world:
                    return world
            elif isinstance(owner, Condition) and depth < 8:
                world = self.world_of_event(owner, depth + 1)
                if world:
                    return world
            elif owner is not None:
                world = self.members.get(id(owner), 0)
                if world:
                    return world
        return 0

    def ahead(self, world: int) -> float:
        """How far world ``world``'s clock runs ahead of the pacing world's (their pauses' difference)."""
        return self.lags[0] - self.lags[world]

    def ignores(self, name: str, worlds: Container[int] | None = None) -> bool:
        """Whether the pacing world's fold check leaves a counter or queue out: the parts' of the drifting worlds
        (of ``worlds``, if given) (``<part>`` or ``<part>.<what>``), and a SwarmX level's or the offload returns'
        view, whose figure is its busiest member's (each member is checked, or counted by pass, on its own)."""
        part = name
        while part:
            world = self._names.get(part)
            if world is not None:
                return worlds is None or world in worlds
            part = part.rpartition(".")[0]
        return name.removesuffix(".bytes") in self.views

    def ignorer(self, c: int) -> Callable[[str], bool] | None:
        """What the pacing world's check at the fold point ending at pass ``c`` leaves out: the parts of the worlds
        that drift there (they are checked on their own axis); None where none does (every part is checked as in
        any fold)."""
        drifting = {k for k in self.worlds if self._decided.get((c, k)) is not None}
        if not drifting:
            return None
        return lambda name: self.ignores(name, drifting)

    def marked_passes(self, f: FoldPoint) -> tuple[int, ...]:
        """The first passes of the block before a fold point's compared ones (:meth:`_drifted_before`), of the
        block its copies end before (the first behind its delay line) and of the blocks after it, up to the pass
        after the fourth: the wafers mark them (:meth:`at_mark`, :meth:`check_after`)."""
        return 2 * f.a - f.b, f.c, *(k * f.c - (k - 1) * f.b for k in (2, 3, 4, 5))

    def lag(self, pass_index: int, world: int) -> float:
        """How far ahead of the simulation world ``world`` is for a chunk of ``pass_index``: its delays at the fold
        points the pass comes after."""
        return sum(d.seconds for d in self.delays if d.world == world and pass_index >= d.point.c)

    # -- the crossings ------------------------------------------------------------------------------------------

    def install(self, env: simpy.Environment, points: Sequence[FoldPoint],
                marks: dict[str, dict[int, tuple[float, int, float]]], rep: str) -> None:
        """Put the crossings in place, before the run starts: at the inbox of each link at the top of a drifting
        subtree (a broadcast's chunks come in) and at the inlet of each reduction a drifting world sends into
        (its gradients go out); the fold ``points`` the worlds may drift at (those in its :attr:`slots`), measured
        on the wafers' ``marks`` (the probe's, by wafer name) and the representative wafer's (named ``rep``)."""
        self._env, self._marks, self._rep = env, marks, rep
        self.sizes = {k: len(self.world_wafers(k)) for k in self.worlds}
        ordered = sorted((f for f in points if f.micro_batch in self.slots), key=lambda f: f.c)
        self._points = {k: list(ordered) for k in self.worlds}
        for fanout in self.fanouts:
            fanout.put = self._broadcast(fanout, fanout.put)
        for link in self.tops_down:
            fanout = self.fanouts[self._parent[id(link)]]
            link.inbox.put = self._incoming(link, link.inbox.put, fanout)  # type: ignore[method-assign,assignment]
        for link in self.tops_up:
            assert link.out is not None
            link.out = _Outgoing(self, self.members[id(link)], link, link.out)
        for link in self.leaves_up:
            link.inbox.put = self._going_up(link.inbox.put)  # type: ignore[method-assign,assignment]

    def _going_up(self, put: Callable[[Chunk], simpy.Event]) -> Callable[[Chunk], simpy.Event]:
        """A drifting wafer's leaf edge going up: count the gradient chunks on their way to the pacing world's
        reduction, by pass (through the world's own tree, where the wafer's edge is not its top)."""
        upcoming = self._upcoming

        def counted_put(item: Chunk) -> simpy.Event:
            if item.kind == "weights":
                _count(upcoming, item.pass_index, 1)
            return put(item)

        return counted_put

    def _broadcast(self, fanout: Any, put: Callable[[Chunk], simpy.Event]) -> Callable[[Chunk], simpy.Event]:
        """A broadcast into a drifting world: note when its other children have all taken each chunk (on the
        pacing world's clock: a delayed copy for a drifting world must not be what the broadcast waited for)."""
        env = self._env
        assert env is not None
        taken = self._taken

        def noted_put(item: Chunk) -> simpy.Event:
            event = put(item)
            key = (id(fanout), item.pass_index, item.seq)
            if event.triggered:
                taken[key] = env.now
            else:
                assert event.callbacks is not None
                event.callbacks.append(lambda _e: taken.__setitem__(key, env.now))
            return event

        return noted_put

    def _incoming(self, link: Link, put: Callable[[Chunk], simpy.Event],
                  fanout: Any) -> Callable[[Chunk], simpy.Event]:
        env, world = self._env, self.members[id(link)]
        assert env is not None

        def crossing_put(item: Chunk) -> simpy.Event:
            self._decide(item.pass_index, world, link)
            measured = self.pending(item.pass_index, world)
            if measured is not None:  # hold it until its delay is known
                self.early += 1
                env.process(self.lines[world].held(put, item, measured, fanout))
                done = env.event()
                done.succeed()
                return done
            lag, ahead = self.lag(item.pass_index, world), self.ahead(world)
            item.ready_at += lag
            delay = lag - ahead
            if delay < -REL_TOL * ahead:
                raise LayerFoldMismatch(f"a chunk of pass {item.pass_index} reached drifting wafers after the "
                                        "pause of a later pass's fold point", "")
            if delay <= REL_TOL * lag:
                return put(item)
            env.process(self.lines[world].delayed(put, item, delay, fanout))
            done = env.event()
            done.succeed()  # the broadcast goes on: on the drifting world's axis it took the chunk then
            return done

        return crossing_put

    def _decide(self, pass_index: int, world: int, link: Link) -> None:
        """Before a chunk of ``pass_index`` enters drifting world ``world`` at ``link``: decide every fold point it
        is past for that world (its delay), or leave it pending until its blocks can be measured, and pause the
        pacing world once it may (:meth:`_try_pause`)."""
        points = self._points[world]
        while points and pass_index >= points[0].c:
            f = points.pop(0)
            self._waiting.setdefault(f.c, {id(top) for top in self.tops_down})
            self._pending[(f.c, world)] = _Pending(f)
            self._measure()
        for c, waiting in self._waiting.items():
            if pass_index >= c:
                waiting.discard(id(link))
        self._try_pause()

    def _measure(self) -> None:
        """Decide each pending fold point whose compared blocks the representative and the world's wafers have all
        started: the world's delay there (none where its wafers' block is the pacing world's), measured on the
        first of them.  Called as a chunk past a fold point crosses and as wafers mark blocks."""
        for key, pending in list(self._pending.items()):
            f, world = pending.point, key[1]
            rep, wafers = self._marks.get(self._rep, {}), self.world_wafers(world)
            if f.b not in rep or not all(f.b in self._marks.get(w.name, {}) for w in wafers):
                continue
            del self._pending[key]
            period = rep[f.b][0] - rep[f.a][0]
            blocks = [self._marks[w.name][f.b][0] - self._marks[w.name][f.a][0] for w in wafers]
            if all(close(b, period) for b in blocks):
                self._decided[key] = None
            elif not all(close(b, blocks[0]) for b in blocks) or blocks[0] >= period:
                raise LayerFoldMismatch(f"pass {f.c}, {f.direction}: the smaller shards' blocks took {blocks!r} s, "
                                        f"the pacing world's {period!r} s", f.direction, f.micro_batch, step=f.step)
            elif pending.let_in:
                raise LayerFoldMismatch(f"pass {f.c}, {f.direction}: its chunks went into drifting wafers before "
                                        "their lead could be measured, and they drift there", f.direction,
                                        f.micro_batch, step=f.step)
            else:
                delay = Delay(f, world, f.copies * (period - blocks[0]), blocks[0])
                self._decided[key] = delay
                self.delays.append(delay)
            if pending.measured is not None:
                pending.measured.succeed()

    def marked(self) -> None:
        """As any simulated wafer starts a marked pass: decide the fold points it lets be measured, and pause once
        that may be due."""
        if self._pending:
            self._measure()
            self._try_pause()

    def pending(self, pass_index: int, world: int) -> simpy.Event | None:
        """What a chunk of ``pass_index`` crossing into ``world`` before its fold point's delay is known must wait
        for: the measuring, where the world's wafers drifted in the block before the compared ones (else the
        chunk goes in now, as where the world does not drift, and the measuring checks that it does not);
        None where it may go in now."""
        for (c, k), pending in self._pending.items():
            if k == world and pass_index >= c:
                if pending.let_in is None:
                    pending.let_in = not self._drifted_before(pending.point, world)
                if pending.let_in:
                    return None
                if pending.measured is None:
                    assert self._env is not None
                    pending.measured = self._env.event()
                return pending.measured
        return None

    def _drifted_before(self, f: FoldPoint, world: int) -> bool:
        """Did the world's wafers take less time than the representative over the block before fold point ``f``'s
        compared ones (false where that is not known yet)?"""
        z = 2 * f.a - f.b
        rep = self._marks.get(self._rep, {})
        owns = [self._marks.get(w.name, {}) for w in self.world_wafers(world)]
        if not all(z in m and f.a in m for m in (rep, *owns)):
            return False
        period = rep[f.a][0] - rep[z][0]
        return any(not close(m[f.a][0] - m[z][0], period) for m in owns)

    def _try_pause(self) -> None:
        """Pause for each fold point in order, once the pacing world no longer does anything of a pass before it
        with a drifting world: every top link has had a chunk past the fold point (those before all went in), no
        gradient of a drifting world of an earlier pass waits at or goes to a reduction of the pacing world, and
        every drifting wafer has started the fold point's last pass.  The pacing world pauses for the largest
        delay, each drifting world for the rest of it (:meth:`_move`)."""
        while self._waiting:
            c = min(self._waiting)
            if self._waiting[c] or any(k[0] == c for k in self._pending) or \
                    any(n for p, n in self._held.items() if p < c) or \
                    any(n for p, n in self._upcoming.items() if p < c) or \
                    not all(c in self._marks.get(w.name, {}) for w in self.wafers):
                return
            del self._waiting[c]
            seconds = {k: (d.seconds if (d := self._decided.get((c, k))) is not None else 0.0) for k in self.worlds}
            longest = max(seconds.values(), default=0.0)
            if longest > 0.0:
                self._pause([longest, *(longest - seconds[k] for k in self.worlds)])

    def _pause(self, shifts: list[float]) -> None:
        """Pause each world by its shift (the pacing world first) now: once the events due now that came before
        have run, every event a world waits for moves by its shift and its clock back by as much."""
        env = self._env
        assert env is not None
        event = env.event()
        assert event.callbacks is not None
        event.callbacks.append(lambda _e: self._move(env, shifts))
        event._ok, event._value = True, None
        env.schedule(event, URGENT)

    def _move(self, env: simpy.Environment, shifts: list[float]) -> None:
        queue = env._queue
        queue[:] = [(t + shifts[self.world_of_event(ev)], prio, eid, ev) for t, prio, eid, ev in queue]
        heapq.heapify(queue)
        if not getattr(env, "paused", False):
            env.__class__ = paused_clock(type(env))
            env._drift = self  # type: ignore[attr-defined]
            env._lags = self.lags  # type: ignore[attr-defined]
        for k, shift in enumerate(shifts):
            self.lags[k] += shift

    # -- the checks ---------------------------------------------------------------------------------------------

    def at_fold(self, fold: LayerFold) -> list[str]:
        """As the representative wafer starts fold point ``fold``'s last pass (its blocks checked): each drifting
        world's compared blocks must be the block its delay was measured on (where none was, its wafers are checked
        as any other wafer, when they reach the pass); return the names of the wafers that drift here."""
        f, period = fold.point, fold.period
        drifting = []
        for k in self.worlds:
            delay = self._decided.get((f.c, k))
            if delay is None:
                continue
            if not close(f.copies * (period - delay.block), delay.seconds):
                raise LayerFoldMismatch(f"pass {f.c}: the pacing world's block changed after the delay was measured",
                                        f.direction, f.micro_batch, step=f.step)
            for w in self.world_wafers(k):
                own = self._marks.get(w.name, {})
                where = f"{w.name} at pass {f.c}"
                if f.c not in own:
                    raise LayerFoldMismatch(f"{where}: not ahead of the pacing world at its fold point", f.direction,
                                            f.micro_batch, step=f.step)
                (ta, la, _), (tb, lb, _), (tc, lc, _) = own[f.a], own[f.b], own[f.c]
                if not close(tb - ta, delay.block) or tc - tb < delay.block * (1 - REL_TOL):
                    raise LayerFoldMismatch(f"{where}: blocks took {tb - ta!r} s and {tc - tb!r} s, not "
                                            f"{delay.block!r} s", f.direction, f.micro_batch, step=f.step,
                                            settles=tc - tb > tb - ta)
                if close(tc - tb, delay.block):
                    self._same_causes(w, (la, lb), (lb, lc), f, "between two blocks")
                else:  # its lead ran out in the second compared block already: it waits behind the delay too
                    self._may_run_out(w, f)
                    self.ran_out[(w.name, f.c)] = waited_for(w, delay, (la, lb), (lb, lc), (tc - tb) - delay.block)
                self.periods[(w.name, f.c)] = delay.block
                drifting.append(w.name)
        return drifting

    def at_mark(self, wafer: Wafer, pass_index: int, marks: dict[int, tuple[float, int, float]]) -> None:
        """As a drifting wafer starts a pass: where it ends its first block behind a delay line, that block must
        repeat its first compared block, or else be where its lead ran out (:func:`waited_for`); where it starts a
        fold point's last pass, a pause may be due."""
        self._try_pause()
        world = self.members[id(wafer)]
        for delay in self.delays:
            f = delay.point
            if delay.world == world and pass_index == 2 * f.c - f.b and f.c in marks:
                (_, la, _), (_, lb, _), (tc, lc, _), (td, ld, _) = marks[f.a], marks[f.b], marks[f.c], \
                    marks[pass_index]
                key, extra = (wafer.name, f.c), (td - tc) - delay.block
                if key not in self.ran_out and close(td - tc, delay.block):
                    self._same_causes(wafer, (la, lb), (lc, ld), f, "in its block behind the delay")
                    continue
                self._may_run_out(wafer, f)
                cause = waited_for(wafer, delay, (la, lb), (lc, ld), extra)
                if self.ran_out.setdefault(key, cause) != cause:
                    raise LayerFoldMismatch(f"{wafer.name}: its lead ran out at pass {f.c} waiting for "
                                            f"{self.ran_out[key]}, but it waited behind the delay for {cause}",
                                            f.direction, f.micro_batch, step=f.step)

    def _may_run_out(self, wafer: Wafer, f: FoldPoint) -> None:
        """A run recorded for traces refuses a run-out: its one wait behind the delay gives every number of the
        Result, but the real run spreads those waits over the copies, and a trace places every span where the run
        has it (``settles`` in the forward passes: a longer stretch may see the wafers back in step)."""
        if self.recorded:
            raise LayerFoldMismatch(f"{wafer.name}: its lead ran out over the copies at pass {f.c}, and a recorded "
                                    "run keeps every span where the run has it", f.direction, f.micro_batch,
                                    step=f.step, settles=f.direction == "forward")

    def check_after(self, marks: dict[str, dict[int, tuple[float, int, float]]]) -> None:
        """After the run: every drifting wafer ended its block behind each of its world's delay lines (checked as
        it did, :meth:`at_mark`); where its lead ran out over the copies, its next block kept the pacing world's
        step (the pacing period), waiting that much longer than a compared block in the cause it waited for
        behind the delay, and in nothing else.

        Or it took one more block to settle (:meth:`_settled`): its next two blocks together keep two pacing
        periods, split as two pacing blocks, and the block after them keeps one.  Where its block inputs come back
        over the wire the weights cross from a store of its own, the one wait behind the delay moves them against
        the weight stream, and the next block waits a little longer and the one after as much less (GPT-3 175B on
        25 wafers: 52.7 us each way); the wafer then stands where a run that kept the pacing step all along would,
        and every number equals the run that simulates every block (tests/core/test_drift_fold.py)."""
        for delay in self.delays:
            f = delay.point
            for w in self.world_wafers(delay.world):
                own = marks.get(w.name, {})
                if 2 * f.c - f.b not in own:
                    raise LayerFoldMismatch(f"{w.name}: no whole block behind the delay at pass {f.c}", f.direction,
                                            f.micro_batch, step=f.step)
                cause = self.ran_out.get((w.name, f.c))
                if cause is None:
                    continue
                p2 = 2 * f.c - f.b
                period = delay.block + delay.seconds / f.copies
                blocks = self._settled(own, f, period)
                if not blocks:
                    raise LayerFoldMismatch(f"{w.name}: its lead ran out over the copies at pass {f.c}, and its "
                                            "next block did not keep the pacing world's step", f.direction,
                                            f.micro_batch, step=f.step)
                a = {c: blocks * v for c, v in seconds_by_cause(w.timeline[own[f.a][1]:own[f.b][1]]).items()}
                b = seconds_by_cause(w.timeline[own[p2][1]:own[(blocks + 2) * f.c - (blocks + 1) * f.b][1]])
                a[cause] = a.get(cause, 0.0) + blocks * (period - delay.block)
                for c in a.keys() | b.keys():
                    if abs(a.get(c, 0.0) - b.get(c, 0.0)) > REL_TOL * blocks * period:
                        raise LayerFoldMismatch(f"{w.name}: its lead ran out over the copies at pass {f.c}, and its "
                                                f"next block spent {b.get(c, 0.0)!r} s on {c}, not {a.get(c, 0.0)!r}",
                                                f.direction, f.micro_batch, step=f.step)

    @staticmethod
    def _settled(own: Mapping[int, tuple[float, int, float]], f: FoldPoint, period: float) -> int:
        """How many blocks after its first behind the delay a wafer whose lead ran out took to keep the pacing
        step: 1 (the next block is a pacing period long), 2 (the next two are two periods long together and the
        block after them one), or 0 (neither: the fold is refused)."""
        p2, p3, p4, p5 = (k * f.c - (k - 1) * f.b for k in (2, 3, 4, 5))
        if p3 in own and close(own[p3][0] - own[p2][0], period):
            return 1
        if p5 in own and close(own[p4][0] - own[p2][0], 2 * period) and close(own[p5][0] - own[p4][0], period):
            return 2
        return 0

    def _same_causes(self, w: Wafer, first: tuple[int, int], second: tuple[int, int], f: FoldPoint,
                     where: str) -> None:
        a, b = seconds_by_cause(w.timeline[first[0]:first[1]]), seconds_by_cause(w.timeline[second[0]:second[1]])
        scale = max(sum(a.values()), 1e-300)
        for cause in a.keys() | b.keys():
            if abs(a.get(cause, 0.0) - b.get(cause, 0.0)) > REL_TOL * scale:
                raise LayerFoldMismatch(f"{w.name} at pass {f.c}: {cause} differs {where}", f.direction,
                                        f.micro_batch, step=f.step)

    # -- after the run: the drifting worlds' copies --------------------------------------------------------------

    def wafer_fold(self, wafer: Wafer, fold: LayerFold, marks: dict[int, tuple[float, int, float]]) -> LayerFold:
        """A drifting wafer's copies at fold point ``fold``: its own block (period, spans from its own marks)."""
        f = fold.point
        (ta, la, ca), (tb, lb, cb), (tc, _, _) = marks[f.a], marks[f.b], marks[f.c]
        spans = tuple((a - ta, b - ta, cause) for a, b, cause, _ in wafer.timeline[la:lb])
        return LayerFold(f, tc, tb - ta, {f"{wafer.name}.compute": cb - ca}, spans)

    def link_deltas(self, fold: LayerFold) -> dict[str, float]:
        """The drifting worlds' links' busy seconds and bytes in one copy: what they moved for the copied block's
        passes (counted by pass: their transfers follow the drifting wafers, not the pacing world's block)."""
        lo, hi = fold.point.b, fold.point.c
        out = {}
        for link in self.links:
            tally = link.tally or {}
            busy = sum(v[0] for p, v in tally.items() if lo <= p < hi)
            moved = sum(v[1] for p, v in tally.items() if lo <= p < hi)
            out[link.name], out[link.name + ".bytes"] = busy, moved
        return out


class _Line:
    """A drifting world's delay lines: processes of that world (by this object's world in ``members``)."""

    def __init__(self, drift: DriftWorld, world: int):
        self.drift, self.world = drift, world

    def delayed(self, put: Callable[[Chunk], simpy.Event], item: Chunk, delay: float,
                fanout: Any) -> Generator[simpy.Event, Any, None]:
        """Process: put ``item`` once ``delay`` has passed.  Where its inbox is full then, it goes in once there is
        room; on the pacing world's clock that is when it would have gone in, and the broadcast's other children
        must not have taken their copies before (else the broadcast would have waited for the drifting world)."""
        drift = self.drift
        env = drift._env
        assert env is not None
        yield env.timeout(delay)
        event = put(item)
        if event.triggered:
            return
        yield event
        done = drift._taken.get((id(fanout), item.pass_index, item.seq))
        late = env.now - drift.lag(item.pass_index, self.world) - (done if done is not None else float("inf"))
        if late > REL_TOL * max(delay, 1e-300):
            raise LayerFoldMismatch(f"a chunk of pass {item.pass_index} went into drifting wafers' full inbox "
                                    f"{late:.3g} s after the rest of its broadcast (the broadcast would have waited "
                                    "for them)", "")

    def held(self, put: Callable[[Chunk], simpy.Event], item: Chunk, measured: simpy.Event,
             fanout: Any) -> Generator[simpy.Event, Any, None]:
        """Process: a chunk that reached the world before its fold point's delay could be measured waits for the
        measuring, then for the rest of its delay (:meth:`delayed`).  Where it waited longer than that already (its
        world does not drift there, or drifts less than the wait) the fold is refused."""
        drift = self.drift
        env = drift._env
        assert env is not None
        t0 = env._now
        yield measured
        delay = drift.lag(item.pass_index, self.world) - drift.ahead(self.world)
        rest = delay - (env._now - t0)
        if rest < -REL_TOL * max(delay, env._now - t0):
            raise LayerFoldMismatch(f"a chunk of pass {item.pass_index} reached drifting wafers {env._now - t0:.3g} s "
                                    f"before its fold point's lead could be measured, longer than its delay "
                                    f"({delay:.3g} s)", "")
        item.ready_at += drift.lag(item.pass_index, self.world)
        yield from self.delayed(put, item, max(rest, 0.0), fanout)

    def heard(self, event: simpy.Event, delay: float) -> Generator[simpy.Event, Any, None]:
        """Process: succeed ``event`` after ``delay``."""
        env = self.drift._env
        assert env is not None
        yield env.timeout(delay)
        event.succeed()


class _Outgoing:
    """The inlet of a reduction a drifting world sends into.  A gradient crosses on the pacing world's axis where
    its pass's lag is how far the world runs ahead of the pacing world.  One of a pass before a fold point, sent
    after its pause, goes through a delay line into the reduction and arrives on time; when the reduction lets it
    go, the drifting world hears that late on its own axis, harmless only where nothing waits behind it.  One of a
    pass after it, sent before the pause, arrives early and must not complete the reduction (the pacing world
    would have waited for it at another time).  The gradients waiting at the reduction are counted by pass: a pause
    waits for those of passes before its fold point (:meth:`DriftWorld._try_pause`)."""

    def __init__(self, drift: DriftWorld, world: int, link: Link, inner: Inlet):
        self.drift, self.world, self.link, self.inner = drift, world, link, inner
        self.node: Any = getattr(inner, "node", inner)

    def put(self, item: Chunk) -> simpy.Event:
        drift, env = self.drift, self.drift._env
        assert env is not None
        _count(drift._upcoming, item.pass_index, -drift.sizes[self.world])  # one chunk from each of its wafers
        drift._try_pause()
        lag, ahead = drift.lag(item.pass_index, self.world), drift.ahead(self.world)
        item.ready_at -= lag
        if lag < ahead * (1 - REL_TOL):  # the pacing world hears it ``ahead - lag`` later on its clock than now
            heard = env.event()
            env.process(_put_later(self, item, ahead - lag, heard))
            return heard
        return self._put(item)

    def _put(self, item: Chunk, heard: simpy.Event | None = None) -> simpy.Event:
        """Put ``item`` into the reduction now; return what the drifting world waits for (``heard``, where given,
        succeeds when the reduction lets it go)."""
        drift = self.drift
        lag, key = drift.lag(item.pass_index, self.world), (item.pass_index, item.seq)
        released = self.inner.put(item)
        if key not in self.node._arrived:  # it completed the reduction
            if lag > drift.ahead(self.world) * (1 + REL_TOL):
                raise LayerFoldMismatch(f"a gradient of pass {item.pass_index} from drifting wafers completed its "
                                        "reduction before the pause of its pass's fold point", "")
        else:
            _count(drift._held, item.pass_index, 1)

            def let_go(_e: simpy.Event) -> None:
                _count(drift._held, item.pass_index, -1)
                late = drift.ahead(self.world) - lag  # the drifting world should have heard it this much earlier
                if late > REL_TOL * max(lag, 1e-300) and self.link.inbox.items:
                    raise LayerFoldMismatch(f"a gradient of pass {item.pass_index} was let go {late:.3g} s late on "
                                            "its drifting wafers' axis with more waiting behind it", "")
                drift._try_pause()

            assert released.callbacks is not None
            released.callbacks.append(let_go)
        if heard is None:
            return released

        def hear(_e: simpy.Event) -> None:
            heard.succeed()

        assert released.callbacks is not None
        released.callbacks.append(hear)
        return heard


def _put_later(out: _Outgoing, item: Chunk, delay: float, heard: simpy.Event) -> Generator[simpy.Event, Any, None]:
    """Process (the pacing world's: a pause moves it): put ``item`` into the reduction after ``delay``."""
    env = out.drift._env
    assert env is not None
    yield env.timeout(delay)
    out._put(item, heard)


def waited_for(wafer: Wafer, delay: Delay, free: tuple[int, int], block: tuple[int, int], extra: float) -> str:
    """The cause a drifting wafer waited for in ``block`` (timeline positions), ``extra`` seconds longer than its
    ``free`` one (its first compared block, the delay's): its lead ran out.

    In the real run the wafer gained ``δ`` a block until its buffers ran dry, then kept the pacing world's
    step, each block waiting ``P - δ`` longer than a free one.  The simulation gives it the whole delay at once:
    in its first block behind the delay it waits, in one go, what the lead could not carry, and it ends that
    block where the real run has it, keeping step with the same chunk of the pacing world (every earlier wait
    was for a chunk a whole number of pacing periods before, and they come ``P`` apart, longer than its own
    block); its copies (free blocks) and this block's wait add up to what its blocks took.  Allowed where the
    extra time is one cause alone and the block after it is a pacing block, or the two after it are two
    (:meth:`DriftWorld.check_after`); else the
    ladder folds less (``settles`` in the forward passes: a longer stretch may see the wafers back in step)."""
    f = delay.point
    a = seconds_by_cause(wafer.timeline[free[0]:free[1]])
    b = seconds_by_cause(wafer.timeline[block[0]:block[1]])
    scale = max(sum(b.values()), 1e-300)
    grew = sorted(c for c in a.keys() | b.keys() if abs(b.get(c, 0.0) - a.get(c, 0.0)) > REL_TOL * scale)
    if extra > 0 and len(grew) == 1 and close(b.get(grew[0], 0.0) - a.get(grew[0], 0.0), extra):
        return grew[0]
    raise LayerFoldMismatch(f"{wafer.name}: a block at pass {f.c} took {delay.block + extra!r} s, its first "
                            f"compared block {delay.block!r} s (its lead ran out over the copies, and it waited "
                            f"longer in {', '.join(grew) or 'nothing'})", f.direction, f.micro_batch,
                            step=f.step, settles=f.direction == "forward" and extra > 0)


def drifting_wafers(cluster: UnfoldedCluster, sizes: Sequence[Sequence[int]]) -> tuple[list[int], frozenset[int]]:
    """The wafers that may drift ahead of the representative in a folded slot, where a drift fold may stand for
    them, and the micro-batch slots where some do: those with less work there (fewer samples, or no straggler's
    slowdown).  None unless the representative has the most work in every slot (it paces every broadcast and
    reduction), nothing but uneven shards and stragglers sets the wafers apart (a node down may have made them
    uneven; a slow edge or jitter would set a pace of their own) and every such wafer's activation store is its own
    (a host store, limited or not: on MemoryX its traffic would share a bandwidth with the pacing world's)."""
    plan = cluster.plan
    if not plan.layer_runs:
        return [], frozenset()
    rep = int(cluster.wafer.name.rsplit(".", 1)[1])
    apart, slots = less_work(plan, sizes, rep, [w for w, s in enumerate(cluster.stand_in) if s >= 0])
    if not slots or slots <= set(plan.blocks_unfolded_in):
        return [], frozenset()
    if not plan.scenario.hardware.activation_store.is_per_wafer:
        return [], frozenset()
    return apart, slots


def less_work(plan: Plan, sizes: Sequence[Sequence[int]], rep: int, live: Sequence[int]
              ) -> tuple[list[int], frozenset[int]]:
    """The wafers (of ``live``) with less work than the representative ``rep`` in some micro-batch slot and no
    more in any, and the slots where some have less; none unless ``rep`` has the most work in every slot and
    nothing but uneven shards and stragglers sets the wafers apart (a slow edge or jitter would set a pace of
    their own).  These wafers never hold up the busiest: they take every broadcast chunk sooner and send every
    gradient sooner.  Where the work of wafer ``w`` in slot ``i`` is ``sizes[w][i]`` times its slowdown."""
    faults = plan.scenario.faults
    if faults.links or faults.jitter is not None:
        return [], frozenset()
    slow = faults.slowdowns()
    work = {w: [n * slow.get(w, 1.0) for n in sizes[w]] for w in live}
    if any(x > r * (1 + 1e-12) for w in live for x, r in zip(work[w], work[rep])):
        return [], frozenset()
    apart = [w for w in live if work[w] != work[rep]]
    return apart, frozenset(i for i, r in enumerate(work[rep]) if any(work[w][i] < r for w in apart))


def drift_world(cluster: UnfoldedCluster, drifting: Sequence[int], slots: frozenset[int],
                recorded: bool = False) -> DriftWorld:
    """The drifting worlds of ``cluster``: one per subtree whose wafers below are all among ``drifting`` (wafer
    numbers) under a node that is not, with its simulated wafers, their own parts and the SwarmX edges of the
    subtree; drifting in ``slots``, in a run ``recorded`` for traces or not."""
    tree = cluster.tree
    fan, depth = tree.fan_out, tree.levels
    apart = set(drifting)
    reachable = {w for w, s in enumerate(cluster.stand_in) if s >= 0}

    def below(level: int, edge: int) -> set[int]:
        return {w for w in reachable if w // fan ** (depth - level) == edge}

    # The subtrees: each edge whose wafers are all drifting, under a node whose are not (the root's are not).
    tops: list[tuple[int, int]] = []
    for level in range(1, depth + 1):
        for c in sorted(set(tree.stand_in[level - 1]) - {-1}):
            leaves = below(level, c)
            above = below(level - 1, c // fan) if level > 1 else reachable
            if leaves and leaves <= apart and not above <= apart:
                tops.append((level, c))
    members: dict[int, int] = {}
    links: list[Link] = []
    bandwidths: list[SharedBandwidth] = []  # the drifting wafers' limited stores' bandwidths
    tops_down: list[Link] = []
    tops_up: list[Link] = []
    wafers: list[Wafer] = []
    for world, (top_level, top) in enumerate(tops, start=1):
        leaves = below(top_level, top)
        for w in cluster.simulated:
            if int(w.name.rsplit(".", 1)[1]) in leaves:
                wafers.append(w)
                members[id(w)] = world
        backs, own = _own_parts(cluster, world, members)
        links += backs
        bandwidths += own
        for direction, edges in (("down", tree.down_edges), ("up", tree.up_edges)):
            for level in range(top_level, depth + 1):
                for c in sorted(set(tree.stand_in[level - 1]) - {-1}):
                    link = edges[level - 1][c]
                    if id(link) in members or not below(level, c) <= leaves or not below(level, c):
                        continue
                    members[id(link)] = world
                    links.append(link)
                    if level == top_level:
                        (tops_down if direction == "down" else tops_up).append(link)
    for link in links:
        link.tally = {}
        link.world = members[id(link)]
    fanouts: list[Any] = []
    parent: dict[int, int] = {}
    for node_row in tree.fanouts:
        for fanout in node_row:
            for link in tops_down:
                if any(box is link.inbox for box in fanout.inboxes):
                    if all(f is not fanout for f in fanouts):
                        fanouts.append(fanout)
                    parent[id(link)] = next(i for i, f in enumerate(fanouts) if f is fanout)
    names = {w.name: members[id(w)] for w in wafers} | {link.name: members[id(link)] for link in links}
    for parts in cluster.wafer_parts:
        owner = members.get(id(parts.wafer))
        if owner is not None:
            names[parts.inputs.name] = owner
            if parts.store is not None:
                names[parts.store.name] = owner
    names |= {bw.name: members[id(bw)] for bw in bandwidths}
    views = {group.name for group in cluster.groups()}
    leaves_up = [tree.leaf_up(int(w.name.rsplit(".", 1)[1])) for w in wafers]
    drift = DriftWorld(wafers, members, links, tops_down, tops_up, slots, recorded, leaves_up=leaves_up, views=views,
                       lags=[0.0] * (len(tops) + 1),
                       fanouts=fanouts, _parent=parent, _names=names)
    drift.lines = [_Line(drift, k) for k in range(len(tops) + 1)]
    for line in drift.lines[1:]:
        members[id(line)] = line.world
    for bw in bandwidths:  # its timers' callbacks run with no process active: read its world's clock
        bw.clock = _world_clock(bw.env, drift.lags, members[id(bw)])
    return drift


def _own_parts(cluster: UnfoldedCluster, world: int, members: dict[int, int]
               ) -> tuple[list[Link], list[SharedBandwidth]]:
    """Make the parts of world ``world``'s wafers (already ``members``) members too: their input workers, activation
    stores and offload returns, and a limited store's bandwidths (a host store's, each wafer's own); return the
    offload returns and those bandwidths."""
    backs: list[Link] = []
    bandwidths: list[SharedBandwidth] = []
    for parts in cluster.wafer_parts:
        if members.get(id(parts.wafer)) != world:
            continue
        for x in (parts.inputs, parts.store, parts.back):
            if x is not None:
                members[id(x)] = world
        if parts.back is not None:
            backs.append(parts.back)
        if parts.store is not None:
            for bw in (*parts.store.writes, *parts.store.reads):
                members[id(bw)] = world
                bandwidths.append(bw)
    return backs, bandwidths


def _world_clock(env: simpy.Environment, lags: list[float], world: int) -> Callable[[], float]:
    """``now`` on world ``world``'s axis: simulated time less its pauses so far (``lags`` changes in place)."""
    return lambda: float(env._now - lags[world])
