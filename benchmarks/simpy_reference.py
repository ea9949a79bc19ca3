"""The bare SimPy loop every simulator benchmark measures beside its cases.

A producer puts ``n`` items into a two-slot store and a consumer takes each and waits one time
unit: the same store-and-forward pattern as a wss link, with no model around it.  Timed in the
same run as a case, it turns wall times from a noisy machine into ratios that can be compared.
"""

from __future__ import annotations

import time

import simpy

__all__ = ["run_simpy_loop"]


def run_simpy_loop(n: int) -> tuple[float, int]:
    """Wall seconds of the loop over ``n`` items, and the SimPy events it scheduled."""
    env = simpy.Environment()
    store = simpy.Store(env, capacity=2)

    def producer():
        for i in range(n):
            yield store.put(i)

    def consumer():
        for _ in range(n):
            yield store.get()
            yield env.timeout(1.0)

    env.process(producer())
    env.process(consumer())
    t = time.perf_counter()
    env.run()
    return time.perf_counter() - t, next(env._eid)
