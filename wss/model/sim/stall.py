"""Say why a run stopped making progress, instead of letting SimPy end it with a bare RuntimeError.

SimPy ends ``env.run(until=event)`` with "No scheduled events left but 'until'
event was not triggered" when every process waits for something no other
process will ever do: a deadlock.  :func:`run_or_explain` runs the
environment and, on that condition, raises
:class:`~wss.errors.SimulationStalled` naming each blocked process and what it
waits for (a full inbox, bytes of DRAM staging, an update, input data).

The description reads the SimPy event a process waits on (``Process.target``)
and names its resource through a map of the cluster's stores, containers and
events, so it works for any part wired in :mod:`wss.model.sim.cluster`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import simpy
from simpy.resources.container import ContainerGet, ContainerPut
from simpy.resources.resource import Request
from simpy.resources.store import StoreGet, StorePut

from wss.errors import SimulationStalled

__all__ = ["run_or_explain", "describe_wait"]

_NO_EVENTS = "No scheduled events left"


def run_or_explain(env: simpy.Environment, until: simpy.Event, processes: Mapping[str, simpy.Process],
                   context: Callable[[], tuple[Mapping[int, str], str]]) -> None:
    """``env.run(until=until)``; a deadlock becomes :class:`SimulationStalled`.

    Parameters
    ----------
    processes
        The run's processes by scope name (``memoryx.stream``, ``wafer``, ...).
    context
        Called only on a deadlock: returns ``id(resource or event) -> what it
        is`` for the cluster's stores, containers, resources and the events
        processes wait on, and where the run was (e.g. the wafer's pass).
    """
    try:
        env.run(until=until)
    except RuntimeError as exc:
        if not str(exc).startswith(_NO_EVENTS):
            raise
        names, where = context()
        waits = [f"{name} {describe_wait(proc.target, names)}" for name, proc in processes.items()
                 if proc.is_alive and not _idle(proc.target)]
        raise SimulationStalled(f"at t = {env.now:.9g} s ({where})", waits or ["(no process is blocked)"]) from None


def _idle(event: simpy.Event | None) -> bool:
    """A process waiting for work on an empty inbox is idle, not blocked: it is not why the run stopped."""
    return isinstance(event, StoreGet) and not event.resource.items


def describe_wait(event: simpy.Event | None, names: Mapping[int, str]) -> str:
    """What a process waiting on ``event`` waits for, in words."""
    if event is None:
        return "is not waiting"
    if isinstance(event, StorePut):
        store = event.resource
        return (f"waits to put into {names.get(id(store), 'a store')}, which is full "
                f"({len(store.items)} of {store.capacity} items)")
    if isinstance(event, StoreGet):
        return f"waits for an item from {names.get(id(event.resource), 'a store')}"
    if isinstance(event, ContainerGet):
        box = event.resource
        return (f"waits for {event.amount:.6g} B of {names.get(id(box), 'a container')}, which has "
                f"{box.level:.6g} B of {box.capacity:.6g} B")
    if isinstance(event, ContainerPut):
        box = event.resource
        return (f"waits to return {event.amount:.6g} B to {names.get(id(box), 'a container')}, which holds "
                f"{box.level:.6g} B of {box.capacity:.6g} B")
    if isinstance(event, Request):
        return f"waits for {names.get(id(event.resource), 'a shared resource')}, held by another process"
    return f"waits for {names.get(id(event), 'an event no process will trigger')}"
