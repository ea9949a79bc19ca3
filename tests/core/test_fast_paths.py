"""The simulator's fast paths change nothing: the same events in the same order, the same Result to the bit.

``wss.model.sim.engine.Environment`` runs SimPy's event loop in one function, ``ByteStore.put``/``get`` (and their
stores' triggers) and ``FastResource.request``/``release`` do
SimPy's common case inline.  Each is checked here against plain SimPy on runs that exercise what they
touch: full buffers (puts that wait, so the queued path and the inline one interleave), a wire shared by
two channels (activation offload), flash staging, and several steps.
"""

from __future__ import annotations

import simpy
from core_helpers import SCENARIOS, dense_model, scenario_dict
from simpy.resources.base import BaseResource

import wss
from wss.model.components.links import ByteStore
from wss.model.components.simpy_internals import FastResource, FastStore
from wss.model.sim import cluster as cluster_module
from wss.model.sim.engine import Environment

SMALL_BUFFERS = {"wafer": {"ingress_buffer_bytes": 2**16}, "swarmx": {"port_buffer_bytes": 2**16}}
CASES = [
    lambda: wss.load_scenario(SCENARIOS / "fc_mnist.yaml"),
    lambda: wss.load_scenario(SCENARIOS / "gpt3_6.7b_sparse.yaml", overrides={"hardware.wafers": 16}),
    lambda: scenario_dict(model=dense_model(256, 512, 512, 10), global_batch=8, steps=2,
                          training={"micro_batch": 1}, hardware=SMALL_BUFFERS),
    lambda: scenario_dict(model=dense_model(2048, 2048, 2048, 2048), steps=2, hardware={
        "memoryx": {"shards": 1, "dram_capacity_bytes": 4e7, "flash_capacity_bytes": 1e9}}),
    # Unfolded: uneven shards and a straggler under a tree of real nodes (broadcasts, reductions, full buffers).
    lambda: scenario_dict(model=dense_model(256, 512, 512, 10), global_batch=11, steps=2,
                          training={"micro_batch": 1}, hardware={**SMALL_BUFFERS, "wafers": 5},
                          faults={"stragglers": [{"wafer": 3, "slowdown": 1.3}]}),
]


def _json(case) -> str:
    return wss.simulate(case()).to_json()


def _plain_simpy(monkeypatch) -> None:
    monkeypatch.setattr(cluster_module, "Environment", simpy.Environment)
    monkeypatch.setattr(ByteStore, "put", simpy.Store.__dict__["put"])
    monkeypatch.setattr(ByteStore, "get", simpy.Store.__dict__["get"])
    for name in ("_trigger_put", "_trigger_get"):
        monkeypatch.setattr(FastStore, name, BaseResource.__dict__[name])
    for name in ("request", "release"):
        monkeypatch.setattr(FastResource, name, simpy.Resource.__dict__[name])
    monkeypatch.setattr(FastResource, "_trigger_put", BaseResource.__dict__["_trigger_put"])


def test_results_are_those_of_plain_simpy_to_the_bit(monkeypatch):
    fast = [_json(case) for case in CASES]
    _plain_simpy(monkeypatch)
    assert isinstance(cluster_module.Environment(), simpy.Environment)
    assert [_json(case) for case in CASES] == fast


def test_the_offloading_gpt_matches_plain_simpy(monkeypatch):
    """Offloaded block inputs come back over a wire they share with the weights."""
    case = lambda: wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",  # noqa: E731
                                     overrides={"training.activation_checkpointing": "offload"})
    fast = wss.simulate(case())
    assert fast.memory.activation_checkpointing == "offload"
    _plain_simpy(monkeypatch)
    assert wss.simulate(case()).to_json() == fast.to_json()


def test_byte_store_waits_when_full_and_keeps_order():
    env = Environment()
    store = ByteStore(env, 100)
    log: list[tuple[float, str]] = []

    class Item:
        def __init__(self, name: str, nbytes: float):
            self.name, self.bytes = name, nbytes

    def producer():
        for name, nbytes in (("a", 60), ("b", 60), ("c", 30), ("d", 90)):
            yield store.put(Item(name, nbytes))
            log.append((env.now, f"put {name}"))

    def consumer():
        yield env.timeout(1.0)
        for _ in range(4):
            item = yield store.get()
            log.append((env.now, f"got {item.name}"))
            yield env.timeout(1.0)

    env.process(producer())
    done = env.process(consumer())
    env.run(until=done)
    # Two items are admitted whatever their size, more only while the bytes fit: c (30 B) waits until a
    # (60 B) has left; d (90 B) does not fit beside c, but goes in as the second item once b has left.
    assert log == [(0, "put a"), (0, "put b"), (1.0, "got a"), (1.0, "put c"), (2.0, "got b"),
                   (2.0, "put d"), (3.0, "got c"), (4.0, "got d")]
    assert store.level == 0 and not store.items
