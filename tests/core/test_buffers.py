"""Buffers are hardware, in bytes, and the answer converges in the simulation's resolution.

A link's inbox and the wafer's intake hold as many chunks as fit in their bytes (at least two: see
``wss.model.components.links.MIN_CHUNKS_BUFFERED``), so cutting the stream into finer chunks keeps the
same data in flight, and quartering ``simulation.chunk_bytes`` moves no shipped scenario's step by
more than 1% (the slow ones cut to fewer blocks, as below and as the cross-check runs them).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import simpy

import wss
from wss.model.components.links import ByteStore, Chunk
from wss.model.machine.figures import MIN_CHUNKS_BUFFERED, chunks_buffered

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "fidelity"))
from fidelity_helpers import CROSS_CHECK  # noqa: E402  (the reduced slow scenarios, as the cross-check runs them)


def _fill(capacity: int, chunk_bytes: float, offered: int = 1000) -> int:
    """How many chunks a ByteStore accepts before a put blocks."""
    env = simpy.Environment()
    store = ByteStore(env, capacity)
    puts = [store.put(Chunk(0, i, offered, chunk_bytes)) for i in range(offered)]
    env.run()
    return sum(p.triggered for p in puts)


@pytest.mark.parametrize(("capacity", "chunk", "held"), [
    (100, 10.0, 10), (100, 9.5, 10), (100, 33.0, 3), (100, 60.0, 2), (100, 500.0, 2), (2**27, 2**20, 128),
])
def test_a_buffer_holds_what_fits_in_its_bytes_and_at_least_two_chunks(capacity, chunk, held):
    assert _fill(capacity, chunk) == held == chunks_buffered(capacity, chunk)
    assert held >= MIN_CHUNKS_BUFFERED


def test_a_get_frees_the_bytes_of_the_chunk_it_takes():
    env = simpy.Environment()
    store = ByteStore(env, 100)
    for i in range(2):
        store.put(Chunk(0, i, 3, 40.0))
    late = store.put(Chunk(0, 2, 3, 40.0))
    env.run()
    assert store.level == 80 and not late.triggered  # 40 + 40 fit; a third 40 does not (past the two-chunk floor)
    store.get()
    env.run()
    assert late.triggered and store.level == 80


def test_buffer_sizes_are_validated():
    for key in ("hardware.swarmx.port_buffer_bytes", "hardware.wafer.ingress_buffer_bytes"):
        with pytest.raises(wss.ScenarioError, match=key.rsplit(".", 1)[-1]):
            wss.load_scenario(REPO / "scenarios" / "bert_large.yaml", {key: 0})
    with pytest.raises(wss.ScenarioError, match="buffers are hardware"):
        wss.load_scenario(REPO / "scenarios" / "bert_large.yaml", {"simulation.buffer_chunks": 2})


#: Shipped scenarios cut to fewer blocks here (beside the cross-check's reductions): their blocks' fold fails its
#: check in the second step, so each run simulates every block, 75 s of the suite's CPU at full size for both.
#: The step's sensitivity to the chunk size stays: quartering moves Llama-3 70B by +0.017% at 80 blocks and
#: +0.079% at 16, Mixtral by -0.092% at 32 and -0.093% at 12; with a buffer that counts chunks instead of bytes
#: (16 MiB each) it moves Llama-3 by +2.2% at 80 and +2.4% at 16 (caught), Mixtral by +0.58% and +0.66%.
FEWER_BLOCKS = {"llama3_70b_16xcs3": 16, "mixtral_8x7b_4xcs3": 12}


def _runs() -> list[tuple[str, dict]]:
    out = []
    for path in sorted((REPO / "scenarios").glob("*.yaml")):
        over = dict(CROSS_CHECK[path.stem][0]) if path.stem in CROSS_CHECK else {}
        if path.stem in FEWER_BLOCKS:
            over["workload.model.layers.1.repeat"] = FEWER_BLOCKS[path.stem]
        if "numerics" in path.stem:
            over["numerics.enabled"] = False  # timing only: the numerics do not change the step time
        out.append((path.stem, {"training.steps": 2, **over}))
    return out


@pytest.mark.parametrize(("name", "overrides"), _runs(), ids=[n for n, _ in _runs()])
def test_quartering_chunk_bytes_moves_no_shipped_step_by_more_than_one_percent(name, overrides):
    s = wss.load_scenario(REPO / "scenarios" / f"{name}.yaml", overrides)
    coarse = wss.simulate(s).step_time_s
    fine = wss.simulate(wss.load_scenario(s, {"simulation.chunk_bytes": s.simulation.chunk_bytes / 4})).step_time_s
    assert fine == pytest.approx(coarse, rel=0.01)
