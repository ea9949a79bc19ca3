"""Every piece of SimPy's private internals that wss uses, in one module: four fast paths.

A wss run is dominated by SimPy events, most of them puts and gets on link buffers.  Four fast paths
reach past SimPy's public API to save its generic machinery there:

* :class:`FastStore`, a :class:`simpy.Store` whose ``put`` and ``get`` do the common case inline:
  nobody waits ahead, so SimPy would try this event alone.  The event (a ``StorePut`` or
  ``StoreGet``), its callbacks and the moment it is scheduled are the same as SimPy's; so are its
  ``_trigger_put``/``_trigger_get`` (run on every chunk that waited for room or for an item), which try
  the first waiting event only, as SimPy's do for a store's ``_do_put``/``_do_get``.
* :class:`FastResource`, a :class:`simpy.Resource` whose ``request`` and ``release`` do the common case
  inline (a wire two channels share, the flash channel): the ``Request`` and ``Release`` events, the users
  and the moments they are scheduled are SimPy's.
* :func:`fast_timeout`, a :class:`simpy.events.Timeout` made and scheduled inline (``Environment.timeout`` of
  :mod:`wss.model.sim.engine`).
* :func:`run_until`, :meth:`simpy.Environment.run` with an event to run until, its
  :meth:`~simpy.Environment.step` inlined in one loop with the queue and the pop bound to locals.
  Events are processed in the same order (the same heap keyed by time, priority and the order they
  were scheduled).

So results are the same to the bit as with SimPy's own code path (tests/core/test_fast_paths.py runs
whole scenarios both ways).  With SimPy's public API instead (``simpy.Store.put``/``get``,
``simpy.Environment.run``), a 120T-parameter scenario on 192 wafers takes about a tenth more CPU.

What this module relies on, as in SimPy 4.1.2 (pyproject.toml pins ``simpy>=4.1.2,<4.2``; a new SimPy
must pass tests/core/test_simpy_internals.py, which pins each item, before the pin moves):

* ``Environment._queue`` (a heap of ``(time, priority, event id, event)``), ``._now``, ``._eid``
  (the counter of event ids) and ``._active_proc``;
* ``Event.callbacks``, ``._ok``, ``._value`` (``simpy.events.PENDING`` until triggered) and ``._defused``;
  the priorities ``simpy.events.NORMAL`` and ``EventPriority``;
* ``StorePut``/``StoreGet`` events with ``env``, ``resource``, ``proc`` (and ``item``); a resource's
  ``_env``, ``put_queue``, ``get_queue``, ``_trigger_put`` and ``_trigger_get``, which stop at the first event
  whose ``_do_put``/``_do_get`` returns nothing (``Store``'s and ``Resource``'s do);
* ``Timeout`` events with ``env``, ``callbacks``, ``_value``, ``_delay`` and ``_ok``, scheduled at ``NORMAL``
  priority;
* ``Request``/``Release`` events with ``resource``, ``proc``, ``usage_since`` (and ``request``); a
  ``Resource``'s ``users`` and ``capacity``;
* ``simpy.core.StopSimulation`` (and its ``callback``), ``EmptySchedule``, and the words of the
  RuntimeError SimPy raises when events run out before the event run until
  (:mod:`wss.model.sim.stall` recognises a deadlock by them);
* ``step`` as in SimPy 4.1.2, which processes an event again, with the callbacks not yet run, when a
  StopSimulation interrupted them.  SimPy 4.1.0 and 4.1.1 drop those callbacks, so their runs differ
  from :func:`run_until`'s (the tests fail there): hence the lower bound 4.1.2.
"""

from __future__ import annotations

from heapq import heappop, heappush
from typing import Any, NoReturn

import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, PENDING, EventPriority, Timeout
from simpy.resources.resource import Release, Request
from simpy.resources.store import StoreGet, StorePut

__all__ = ["FastResource", "FastStore", "fast_timeout", "run_until", "event_count"]


class FastStore(simpy.Store):
    """A :class:`simpy.Store` whose ``put`` and ``get`` skip SimPy's generic machinery when nobody waits ahead.

    What fits is the subclass's to say: :meth:`_admit` stores an item if there is room and says whether it
    did, :meth:`_take` removes the next item.  As defined here they are :class:`simpy.Store`'s (up to
    ``capacity`` items, first in first out).
    """

    def _admit(self, item: Any) -> bool:
        """Store ``item`` if there is room now; whether it was stored."""
        if len(self.items) < self.capacity:
            self.items.append(item)
            return True
        return False

    def _take(self) -> Any:
        """Remove and return the next item (there is one)."""
        return self.items.pop(0)

    def _do_put(self, event: StorePut) -> None:
        if self._admit(event.item):
            event.succeed()

    def _do_get(self, event: StoreGet) -> None:
        if self.items:
            event.succeed(self._take())

    def put(self, item: Any) -> StorePut:  # type: ignore[override]
        """Put ``item``: the event succeeds once it fits (at once if it does now)."""
        if self.put_queue:
            return StorePut(self, item)
        env = self._env
        event = StorePut.__new__(StorePut)
        event.env, event.item, event.resource, event.proc = env, item, self, env._active_proc
        event.callbacks = [self._after_put]
        if self._admit(item):
            event._ok, event._value = True, None
            heappush(env._queue, (env._now, NORMAL, next(env._eid), event))  # env.schedule(event), inlined
        else:
            event._value = PENDING
            self.put_queue.append(event)
        return event

    def get(self) -> StoreGet:
        """Take the next item: the event succeeds with it once there is one (at once if there is)."""
        if self.get_queue:
            return StoreGet(self)
        env = self._env
        event = StoreGet.__new__(StoreGet)
        event.env, event.resource, event.proc = env, self, env._active_proc
        event.callbacks = [self._after_get]
        if self.items:
            event._ok, event._value = True, self._take()
            heappush(env._queue, (env._now, NORMAL, next(env._eid), event))
        else:
            event._value = PENDING
            self.get_queue.append(event)
        return event

    def _after_put(self, event: StorePut) -> None:
        """A put's callback: let waiting gets try (SimPy's ``_trigger_get``, skipped when none waits)."""
        if self.get_queue:
            self._trigger_get(event)

    def _after_get(self, event: StoreGet) -> None:
        """A get's callback: let waiting puts try (SimPy's ``_trigger_put``, skipped when none waits)."""
        if self.put_queue:
            self._trigger_put(event)

    def _trigger_put(self, get_event: Any) -> None:
        """SimPy's ``_trigger_put`` for this store's ``_do_put``: that returns nothing, so SimPy tries the first
        waiting put only, which succeeds (and leaves the queue) if its item fits now."""
        queue = self.put_queue
        if queue:
            event = queue[0]
            if self._admit(event.item):
                env = self._env
                event._ok, event._value = True, None
                heappush(env._queue, (env._now, NORMAL, next(env._eid), event))  # event.succeed(), inlined
                queue.pop(0)

    def _trigger_get(self, put_event: Any) -> None:
        """SimPy's ``_trigger_get`` for this store's ``_do_get``: the first waiting get takes the next item, if
        there is one."""
        queue = self.get_queue
        if queue and self.items:
            event = queue[0]
            env = self._env
            event._ok, event._value = True, self._take()
            heappush(env._queue, (env._now, NORMAL, next(env._eid), event))  # event.succeed(item), inlined
            queue.pop(0)


class FastResource(simpy.Resource):
    """A :class:`simpy.Resource` whose ``request`` and ``release`` skip SimPy's generic machinery in the common
    case: a request when nobody waits ahead (granted at once if a slot is free), a release (always at once).

    The events (a ``Request``, a ``Release``), their callbacks, the order of the users and the moment each
    event is scheduled are SimPy's; so is the context manager (``with wire.request() as req``).
    """

    def request(self) -> Request:
        """Ask for a slot: the event succeeds once one is free (at once if one is now)."""
        if self.put_queue:
            return Request(self)
        env = self._env
        event = Request.__new__(Request)
        event.env, event.resource, event.proc = env, self, env._active_proc
        event.callbacks = [self._trigger_get]
        if len(self.users) < self.capacity:
            self.users.append(event)
            event.usage_since = env._now
            event._ok, event._value = True, None
            heappush(env._queue, (env._now, NORMAL, next(env._eid), event))
        else:
            event._value = PENDING
            self.put_queue.append(event)
        return event

    def release(self, request: Request) -> Release:
        """Give ``request``'s slot back: the event succeeds at once, and lets the next request in when it runs."""
        if self.get_queue:
            return Release(self, request)
        env = self._env
        event = Release.__new__(Release)
        event.env, event.request, event.resource, event.proc = env, request, self, env._active_proc
        event.callbacks = [self._trigger_put]
        if request in self.users:  # SimPy's Resource._do_get: releasing a request not granted is no error
            self.users.remove(request)
        event._ok, event._value = True, None
        heappush(env._queue, (env._now, NORMAL, next(env._eid), event))
        return event

    def _trigger_put(self, get_event: Any) -> None:
        """SimPy's ``_trigger_put`` for ``Resource._do_put``: that returns nothing, so SimPy tries the first waiting
        request only, which is granted (and leaves the queue) if a slot is free."""
        queue = self.put_queue
        if queue and len(self.users) < self.capacity:
            event = queue[0]
            env = self._env
            self.users.append(event)
            event.usage_since = env._now
            event._ok, event._value = True, None
            heappush(env._queue, (env._now, NORMAL, next(env._eid), event))
            queue.pop(0)


def fast_timeout(env: simpy.Environment, delay: float, value: Any = None) -> Timeout:
    """``env.timeout(delay, value)`` as :class:`simpy.events.Timeout` makes it, without the call through its
    ``BoundClass`` and ``env.schedule``: the same event, scheduled at the same moment (a wafer's compute, a link's
    serialisation: a timeout is most of a run's events)."""
    if delay < 0:
        raise ValueError(f"Negative delay {delay}")
    event = Timeout.__new__(Timeout)
    event.env, event.callbacks, event._value, event._delay, event._ok = env, [], value, delay, True
    heappush(env._queue, (env._now + delay, NORMAL, next(env._eid), event))  # env.schedule(event, NORMAL, delay)
    return event


def run_until(env: simpy.Environment, until: simpy.Event) -> Any:
    """``env.run(until=until)`` as :meth:`simpy.Environment.run` does it, stepping in one loop."""
    if until.callbacks is None:  # already processed
        return until.value
    until.callbacks.append(StopSimulation.callback)
    try:
        _step_until_stopped(env)
    except StopSimulation as exc:
        return exc.args[0]  # == until.value
    except EmptySchedule:
        assert not until.triggered
        raise RuntimeError(f'No scheduled events left but "until" event was not triggered: {until}') from None


def _step_until_stopped(env: simpy.Environment) -> NoReturn:
    """:meth:`simpy.Environment.step` until an exception ends it, inlined."""
    queue = env._queue
    while True:
        try:
            env._now, _, _, event = heappop(queue)
        except IndexError:
            raise EmptySchedule from None
        callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
        try:
            for callback in callbacks:
                callback(event)
        except StopSimulation:
            # As SimPy does: keep the callbacks not yet run, and process the event again on resuming.
            event.callbacks = callbacks[callbacks.index(callback) + 1 :]
            env.schedule(event, EventPriority(-1))
            raise
        if not event._ok and not hasattr(event, "_defused"):
            exc = type(event._value)(*event._value.args)
            exc.__cause__ = event._value
            raise exc


def event_count(env: simpy.Environment) -> int:
    """Events scheduled so far: SimPy numbers every scheduled event with ``Environment._eid``."""
    counter = getattr(env, "_eid", None)
    if counter is None:
        return 0
    return next(counter)
