"""Pins every SimPy internal that wss.model.components.simpy_internals relies on, and checks its fast paths
against SimPy's own code path.

Run against a new SimPy before moving the pin in pyproject.toml (``simpy>=4.1.2,<4.2``): a failure here names
what changed.  tests/core/test_fast_paths.py checks whole scenarios both ways.
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Callable, Generator
from typing import Any

import pytest
import simpy
from simpy.core import EmptySchedule, StopSimulation
from simpy.events import NORMAL, PENDING, URGENT, EventPriority, Timeout
from simpy.resources.base import BaseResource
from simpy.resources.resource import Release, Request
from simpy.resources.store import StoreGet, StorePut

from wss.model.components.simpy_internals import FastStore, fast_timeout, run_until
from wss.model.sim.engine import Environment


def _params(func: Callable[..., Any]) -> list[str]:
    return list(inspect.signature(func).parameters)


def test_the_environment_keeps_a_heap_of_time_priority_id_event():
    env = simpy.Environment()
    assert env._queue == [] and env._now == 0 and env._active_proc is None
    assert isinstance(env._eid, itertools.count)
    later, now = env.timeout(2.0), env.event().succeed()
    assert len(env._queue) == 2
    (t0, p0, id0, e0), (t1, p1, id1, e1) = env._queue  # a heap: the earliest first
    assert (t0, p0, e0) == (0, NORMAL, now) and (t1, p1, e1) == (2.0, NORMAL, later)
    assert id0 > id1 and next(env._eid) == id0 + 1  # ids count up in the order events are scheduled
    assert _params(simpy.Environment.schedule) == ["self", "event", "priority", "delay"]


def test_the_active_process_is_kept_in_active_proc():
    env = simpy.Environment()
    seen: list[object] = []

    def proc() -> Generator[simpy.Event, Any, None]:
        seen.append(env._active_proc)
        yield env.timeout(1)

    p = env.process(proc())
    env.run()
    assert seen == [p]


def test_event_internals_and_priorities():
    env = simpy.Environment()
    event = env.event()
    assert event._value is PENDING and event.callbacks == []
    event.succeed("v")
    assert event._ok is True and event._value == "v"
    failed = env.event()
    failed.fail(ValueError("boom"))
    assert failed._ok is False and isinstance(failed._value, ValueError)
    assert not hasattr(failed, "_defused")
    failed.defused = True
    assert failed._defused is True
    assert EventPriority(-1) < URGENT < NORMAL == EventPriority(1)


def test_store_events_and_resource_queues():
    env = simpy.Environment()
    store = simpy.Store(env, capacity=1)
    assert store._env is env and store.put_queue == [] and store.get_queue == [] and store.items == []
    assert _params(StorePut.__init__) == ["self", "store", "item"]
    assert _params(StoreGet.__init__) == ["self", "resource"]
    assert _params(BaseResource._trigger_put) == ["self", "get_event"]
    assert _params(BaseResource._trigger_get) == ["self", "put_event"]
    first, second = store.put("a"), store.put("b")
    assert isinstance(first, StorePut)
    assert (first.env, first.resource, first.proc, first.item) == (env, store, None, "a")
    assert first.callbacks == [store._trigger_get] and first._ok and store.items == ["a"]
    assert second._value is PENDING and store.put_queue == [second]
    get = store.get()
    assert isinstance(get, StoreGet) and (get.env, get.resource, get.proc) == (env, store, None)
    assert get.callbacks == [store._trigger_put] and get._value == "a"


def test_resource_requests_and_releases():
    """What FastResource does inline: a request granted at once or queued, a release that succeeds at once and
    lets the first queued request in when it runs (SimPy's Resource stops at the first put it tries)."""
    env = simpy.Environment()
    wire = simpy.Resource(env, capacity=1)
    assert _params(Request.__init__) == ["self", "resource"] and _params(Release.__init__) == ["self", "resource",
                                                                                                 "request"]
    first, second = wire.request(), wire.request()
    assert (first.env, first.resource, first.proc, first.usage_since) == (env, wire, None, 0)
    assert first.callbacks == [wire._trigger_get] and first._ok and wire.users == [first]
    assert second._value is PENDING and wire.put_queue == [second]
    assert wire._do_put(second) is None
    release = wire.release(first)
    assert isinstance(release, Release) and (release.request, release.resource, release.proc) == (first, wire, None)
    assert release.callbacks == [wire._trigger_put] and release._ok and wire.users == [] and wire.get_queue == []
    assert wire.put_queue == [second]  # until the release runs
    env.step(), env.step()
    assert wire.users == [second] and second._ok and wire.put_queue == []


def test_timeouts_made_inline_are_simpys():
    """fast_timeout makes the Timeout SimPy makes, queued with the same key; a negative delay is refused."""
    plain, fast = simpy.Environment(), simpy.Environment()
    for env in (plain, fast):
        env.timeout(1.0)
        env.run(until=0.5)
    a, b = plain.timeout(2.5, "v"), fast_timeout(fast, 2.5, "v")
    assert type(a) is type(b) is Timeout
    assert vars(a).keys() == vars(b).keys() and (b.env, b.callbacks, b._value, b._delay, b._ok) == (fast, [], "v", 2.5,
                                                                                                  True)
    assert [entry[:3] for entry in plain._queue] == [entry[:3] for entry in fast._queue]
    with pytest.raises(ValueError, match="Negative delay"):
        fast_timeout(fast, -1.0)
    assert isinstance(Environment().timeout(1.0), Timeout)


def test_stop_simulation_and_empty_schedule():
    env = simpy.Environment()
    with pytest.raises(EmptySchedule):
        env.step()
    event = env.event()
    event.callbacks.append(StopSimulation.callback)
    event.succeed(7)
    with pytest.raises(StopSimulation) as stop:
        env.step()
    assert stop.value.args == (7,)


def _model(env: simpy.Environment, store: simpy.Store, log: list[tuple[float, str]]) -> list[simpy.Process]:
    """Producers and consumers on a two-slot store: puts and gets that wait, and ones that do not; from t = 20
    a consumer waits on the empty store for a slow producer."""

    def producer(name: str, n: int, gap: float, start: float = 0.0) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(start)
        for i in range(n):
            yield store.put(f"{name}{i}")
            log.append((env.now, f"put {name}{i}"))
            if gap:
                yield env.timeout(gap)

    def consumer(name: str, n: int, gap: float, start: float = 0.0) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(start)
        for _ in range(n):
            item = yield store.get()
            log.append((env.now, f"{name} got {item}"))
            yield env.timeout(gap)

    return [env.process(producer("a", 6, 0.0)), env.process(producer("b", 4, 0.7)),
            env.process(consumer("x", 5, 1.0)), env.process(consumer("y", 5, 0.3)),
            env.process(producer("c", 3, 2.0, start=21.0)), env.process(consumer("z", 3, 0.0, start=20.0))]


def _run(fast: bool) -> tuple[list[tuple[float, str]], list[Any], int]:
    env = simpy.Environment()
    store = FastStore(env, capacity=2) if fast else simpy.Store(env, capacity=2)
    log: list[tuple[float, str]] = []
    procs = _model(env, store, log)
    run: Callable[[simpy.Event], Any] = (lambda e: run_until(env, e)) if fast else (lambda e: env.run(until=e))
    values = [run(procs[2]), run(procs[3]), run(procs[3]), run(procs[5])]  # stop, resume, one already processed
    return log, values, next(env._eid)


def test_fast_paths_schedule_the_same_events_as_simpy():
    fast, plain = _run(fast=True), _run(fast=False)
    assert fast == plain
    log, _, events = fast
    assert len(log) == 26 and log[-1] == (25.0, "z got c2") and events > 50


def test_a_failed_event_crashes_the_run_as_in_simpy():
    def crash(env: simpy.Environment) -> Generator[simpy.Event, Any, None]:
        yield env.timeout(1)
        raise ValueError("broken part")

    raised = []
    for runner in (run_until, simpy.Environment.run):
        env = simpy.Environment()
        env.process(crash(env))
        with pytest.raises(ValueError, match="broken part") as exc:
            runner(env, env.event())  # the crash ends the run before events run out
        raised.append((type(exc.value.__cause__), env.now))
    assert raised[0] == raised[1] == (ValueError, 1)


def test_running_out_of_events_says_what_simpy_says():
    messages = []
    for runner in (run_until, simpy.Environment.run):
        env = simpy.Environment()
        never = env.event()
        with pytest.raises(RuntimeError) as exc:
            runner(env, never)
        messages.append(str(exc.value).replace(repr(never), "<event>"))
    assert messages[0] == messages[1]
    assert messages[0].startswith("No scheduled events left")  # what wss.model.sim.stall recognises
