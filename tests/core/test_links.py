"""Links in a bare SimPy environment: pipelining through a chain, and back-pressure."""

from __future__ import annotations

import pytest
import simpy

from wss.model.components.links import Chunk, Link


def build_chain(env, n_links, bandwidth, latency, capacity=2, sink_capacity=float("inf")):
    links = [Link(env, f"test.l{i}", bandwidth, latency, capacity) for i in range(n_links)]
    sink = simpy.Store(env, capacity=sink_capacity)
    for a, b in zip(links, links[1:]):
        a.connect(b.inbox)
    links[-1].connect(sink)
    for link in links:
        env.process(link.run())
    return links, sink


def feed(env, inbox, n, size, log=None):
    """Process: put n chunks of ``size`` bytes, recording when each put is accepted."""
    for i in range(n):
        yield inbox.put(Chunk(pass_index=0, seq=i, n_chunks=n, bytes=size, ready_at=env.now))
        if log is not None:
            log.append((i, env.now))


def drain(env, sink, arrivals, n):
    """Process: take chunks from the sink, each usable once its flight latency has passed."""
    for _ in range(n):
        chunk = yield sink.get()
        if chunk.ready_at > env.now:
            yield env.timeout(chunk.ready_at - env.now)
        arrivals.append((chunk.seq, env.now))


@pytest.mark.parametrize(
    "n_links, n_chunks, size, bandwidth, latency",
    [
        (1, 1, 1000.0, 100.0, 0.0),
        (1, 5, 1000.0, 100.0, 0.5),
        (3, 4, 64.0, 8.0, 1.25),
        (4, 10, 2.0**20, 1.5e11, 1e-6),
        (6, 2, 3.0, 1.0, 0.0),
    ],
)
def test_chain_finishes_at_the_pipeline_formula(n_links, n_chunks, size, bandwidth, latency):
    env = simpy.Environment()
    links, sink = build_chain(env, n_links, bandwidth, latency)
    arrivals = []
    env.process(feed(env, links[0].inbox, n_chunks, size))
    env.process(drain(env, sink, arrivals, n_chunks))
    env.run()
    per_chunk = size / bandwidth
    expected_last = n_links * (latency + per_chunk) + (n_chunks - 1) * per_chunk
    assert [seq for seq, _ in arrivals] == list(range(n_chunks))  # in order
    assert arrivals[-1][1] == pytest.approx(expected_last, rel=1e-12)
    # chunk k arrives k serialisations after the first
    for seq, t in arrivals:
        assert t == pytest.approx(n_links * (latency + per_chunk) + seq * per_chunk, rel=1e-12)
    for link in links:
        assert link.chunks == n_chunks
        assert link.bytes == pytest.approx(n_chunks * size)
        assert link.busy_s == pytest.approx(n_chunks * per_chunk)


def test_slowest_link_sets_the_pace():
    env = simpy.Environment()
    links = [Link(env, "fast", 100.0, 0.0, 2), Link(env, "slow", 10.0, 0.0, 2), Link(env, "fast2", 100.0, 0.0, 2)]
    sink = simpy.Store(env)
    links[0].connect(links[1].inbox)
    links[1].connect(links[2].inbox)
    links[2].connect(sink)
    for link in links:
        env.process(link.run())
    arrivals = []
    env.process(feed(env, links[0].inbox, 6, 100.0))
    env.process(drain(env, sink, arrivals, 6))
    env.run()
    # deterministic tandem: sum of one chunk's service times + (n - 1) x the slowest service time
    assert arrivals[-1][1] == pytest.approx((1 + 10 + 1) + 5 * 10, rel=1e-12)


def test_full_inbox_blocks_the_sender():
    env = simpy.Environment()
    # A 10-byte buffer holds one 10-byte chunk by its bytes, two by the floor (MIN_CHUNKS_BUFFERED).
    (link,), sink = build_chain(env, 1, bandwidth=10.0, latency=0.0, capacity=10, sink_capacity=1)
    accepted = []
    env.process(feed(env, link.inbox, 5, 10.0, accepted))  # one chunk takes 1 s on the link
    env.run(until=100)
    # chunk 0 goes straight to the link, chunks 1 and 2 wait in the inbox; chunk 3 gets in when the link
    # takes chunk 1 at t=1, and then the link blocks on the full sink with chunk 1 in hand.
    assert accepted == [(0, 0.0), (1, 0.0), (2, 0.0), (3, 1.0)]
    assert len(sink.items) == 1  # chunk 0 delivered, nobody drains
    assert len(link.inbox.items) == 2  # chunks 2 and 3 wait; chunk 1 is held by the blocked link
    assert link.busy_s == pytest.approx(2.0)

    # Draining the sink at t=100 releases the whole chain, one chunk per second.
    arrivals = []
    env.process(drain(env, sink, arrivals, 5))
    env.run()
    assert accepted[4:] == [(4, 100.0)]
    assert [seq for seq, _ in arrivals] == [0, 1, 2, 3, 4]
    assert [t for _, t in arrivals] == pytest.approx([100.0, 100.0, 101.0, 102.0, 103.0])


def test_backpressure_propagates_up_a_chain():
    env = simpy.Environment()
    links, _sink = build_chain(env, 3, bandwidth=1.0, latency=0.0, capacity=1, sink_capacity=1)
    accepted = []
    env.process(feed(env, links[0].inbox, 20, 1.0, accepted))
    env.run(until=50)
    # a stuck sink holds the whole chain: each link holds two chunks in its inbox (its floor) and one in
    # hand, the sink one, and nothing more is accepted at the source.
    assert len(accepted) == 1 + 3 * 3
    assert env.now == 50
