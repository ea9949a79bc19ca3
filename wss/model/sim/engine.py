"""SimPy's environment with its event loop in one function, and its timeouts made inline.

:meth:`simpy.Environment.run` calls :meth:`~simpy.Environment.step` once per
event; a step pops the event queue, runs the event's callbacks and checks
that the event did not fail.  :class:`Environment` runs until an event with
:func:`~wss.model.components.simpy_internals.run_until`, which does exactly
that in one loop (saving a method call and a few attribute lookups per event,
about a tenth of a wss run, which is dominated by events).  Events are
processed in the same order, so results are the same to the bit.  Its
``timeout`` makes the same :class:`simpy.Timeout` without SimPy's generic calls
(:func:`~wss.model.components.simpy_internals.fast_timeout`); the rest of SimPy
(events, processes, resources) is untouched.
"""

from __future__ import annotations

from typing import Any

import simpy

from wss.model.components.simpy_internals import event_count, fast_timeout, run_until

__all__ = ["Environment", "event_count"]


class Environment(simpy.Environment):
    """A :class:`simpy.Environment` whose ``run(until=event)`` steps through events in one loop."""

    def run(self, until: Any = None) -> Any:
        """As :meth:`simpy.Environment.run` (times and ``None`` are passed to it unchanged)."""
        if not isinstance(until, simpy.Event):
            return super().run(until)
        return run_until(self, until)

    #: As :meth:`simpy.Environment.timeout`: the same event, made and scheduled inline (bound as a method, with no
    #: call in between).
    timeout = fast_timeout  # type: ignore[assignment]
