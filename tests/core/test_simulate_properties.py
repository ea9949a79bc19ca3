"""Properties of ``wss.simulate`` over generated scenarios (Hypothesis).

Scenarios are built as plain dicts from small strategies: the shipped small models (the FC-MNIST
preset, GPT-3 125M at a short sequence) and two inline ones (a two-layer MLP, a two-block
transformer), 1 to 8 wafers, a few samples per wafer, one or two steps, any optimizer, sparsity up to
0.9, and every bandwidth and the wafer clock scaled from the CS-2 preset.  Some draws spill MemoryX
state to flash so the flash bandwidths matter.  Each example simulates in tens of milliseconds.

The runs are derandomized (the same examples every run, so CI is deterministic) and use no example
database.  Only the public API is used: ``wss.load_scenario``, ``wss.plan``, ``wss.simulate`` and
Result fields.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

import wss
from wss.model.simulate import simulate_detailed

#: Inline models kept tiny: each simulates in about 10 ms.
MLP = {
    "name": "mlp",
    "input": "features",
    "layers": [
        {"kind": "dense", "in_features": 512, "out_features": 1024, "activation": "relu"},
        {"kind": "dense", "in_features": 1024, "out_features": 256, "activation": "none"},
    ],
}
TINY_GPT = {
    "name": "tiny-gpt",
    "input": "tokens",
    "seq_len": 64,
    "layers": [
        {"kind": "embedding", "vocab_size": 1024, "d_model": 256, "max_positions": 64},
        {"kind": "transformer_block", "repeat": 2, "d_model": 256, "n_heads": 4},
        {"kind": "output_head", "d_model": 256, "vocab_size": 1024},
    ],
}
#: name -> (workload.model, training fields the model needs)
MODELS: dict[str, tuple[Any, dict[str, Any]]] = {
    "fc-mnist": ("fc-mnist", {}),
    "mlp": (MLP, {}),
    "tiny-gpt": (TINY_GPT, {}),
    "gpt3-125m": ("gpt3-125m", {"seq_len": 128}),
}

#: Every rate a scenario sets: slowing any of them may only lengthen the step.
RATES = (
    "hardware.wafer.clock_Hz",
    "hardware.wafer.io_bandwidth_Bps",
    "hardware.swarmx.link_bandwidth_Bps",
    "hardware.memoryx.dram_bandwidth_Bps",
    "hardware.memoryx.network_bandwidth_Bps",
    "hardware.memoryx.flash_read_bandwidth_Bps",
    "hardware.memoryx.flash_write_bandwidth_Bps",
    "hardware.memoryx.optimizer_flops",
    "hardware.inputs.bandwidth_Bps",
)

#: Multipliers of a rate, from a hundredth to ten times the preset's (Hypothesis shrinks toward 1).
MULTIPLIER = st.sampled_from([1.0, 0.5, 2.0, 0.1, 10.0, 0.01, 0.25])

#: Derandomized (the same examples every run) and without an example database: CI is deterministic.
PROPERTIES = settings(
    deadline=None,
    derandomize=True,
    database=None,
)


def get(scenario: wss.Scenario, dotted: str) -> Any:
    """The value of a dotted field of a resolved scenario (``hardware.wafer.clock_Hz``)."""
    node: Any = scenario
    for part in dotted.split("."):
        node = getattr(node, part)
    return node


def build(raw: dict[str, Any], overrides: dict[str, Any] | None = None) -> wss.Scenario:
    """Load a generated scenario; draws the machine cannot hold are discarded (``assume``), not failed."""
    try:
        scenario = wss.load_scenario(raw, overrides)
        wss.plan(scenario)
    except wss.InfeasibleError:
        assume(False)
    return scenario


#: The CS-2 cluster preset resolved once: the rates the multipliers scale.
PRESET = wss.load_scenario(
    {
        "name": "preset",
        "hardware": {"preset": "cs2-cluster"},
        "workload": {"model": "fc-mnist"},
        "training": {"global_batch": 1},
    }
)


def put(raw: dict[str, Any], dotted: str, value: Any) -> None:
    """Set a dotted field in a scenario dict, making the mappings on the way."""
    *path, last = dotted.split(".")
    node = raw
    for part in path:
        node = node.setdefault(part, {})
    node[last] = value


@st.composite
def scenarios(draw) -> dict[str, Any]:
    """A small scenario as a dict: model, wafers, per-wafer batch, steps, optimizer, sparsity, rates.

    Only what differs from the cs2-cluster preset is spelled out, so a failing example reads short.
    """
    model, training = MODELS[draw(st.sampled_from(sorted(MODELS)))]
    n = draw(st.integers(1, 8))
    per_wafer = draw(st.integers(1, 8))
    raw: dict[str, Any] = {
        "name": "property",
        "hardware": {"preset": "cs2-cluster", "wafers": n},
        "workload": {"model": model, "sparsity": draw(st.sampled_from([0.0, 0.5, 0.9, 0.25, 0.75]))},
        "training": {
            "global_batch": n * per_wafer,
            "optimizer": draw(st.sampled_from(["sgd", "momentum", "adam", "adamw", "lamb"])),
            "steps": draw(st.integers(1, 2)),
            **training,
        },
    }
    micro = draw(st.one_of(st.just("auto"), st.integers(1, per_wafer)))
    if micro != "auto":
        raw["training"]["micro_batch"] = micro
    buffers = draw(st.sampled_from([None, 2**20, 2**24, 2**30]))  # a port buffer from a MiB to a GiB
    if buffers is not None:
        raw["hardware"]["swarmx"] = {"port_buffer_bytes": buffers}
        raw["hardware"]["wafer"] = {**raw["hardware"].get("wafer", {}), "ingress_buffer_bytes": buffers}
    for key in RATES:
        m = draw(MULTIPLIER)
        if m != 1.0:
            put(raw, key, get(PRESET, key) * m)
    spill = draw(st.sampled_from([None, 0.9, 0.5]))
    if spill is not None:
        # Part of the state in flash: DRAM holds a fraction of it (and stages prefetches in a quarter).
        try:
            state = wss.plan(raw).memoryx_state_bytes
        except wss.InfeasibleError:
            assume(False)
        shards = PRESET.hardware.memoryx.shards
        put(raw, "hardware.memoryx.dram_capacity_bytes", spill * state / shards)
        put(raw, "hardware.memoryx.flash_capacity_bytes", 4 * state / shards)
    return raw


# ---------------------------------------------------------------------------- step time and breakdown

#: fsum of a step's breakdown against its time: measured within 1 ulp (2.2e-16) over 3,000 random
#: draws; 1e-13 leaves room for another summation order and is far below any modelled term.
SUM_REL = 1e-13


def assert_step_time_and_breakdown(s: wss.Scenario, r: wss.Result) -> None:
    """Every step positive and finite, one per training step, its breakdown non-negative and summing to it."""
    assert math.isfinite(r.step_time_s) and r.step_time_s > 0
    assert len(r.steps) == s.training.steps
    for step in r.steps:
        assert math.isfinite(step.time_s) and step.time_s > 0
        assert all(v >= 0 for v in step.breakdown_s.values())
        assert math.fsum(step.breakdown_s.values()) == pytest.approx(step.time_s, rel=SUM_REL, abs=0)
    assert math.fsum(r.breakdown_s.values()) == pytest.approx(r.step_time_s, rel=SUM_REL, abs=0)


@settings(PROPERTIES, max_examples=100)
@given(scenarios())
def test_step_time_is_positive_and_finite_and_the_breakdown_sums_to_it(raw):
    """The scenarios as drawn, the planner choosing.  test_a_slower_part_never_shortens_the_step below checks the
    same of both runs of each of its 300 examples (the base, its plan pinned, and a slower copy): 700 runs in all
    are checked, where this test alone checked 300 before, at a third of its cost."""
    s = build(raw)
    assert_step_time_and_breakdown(s, wss.simulate(s))


# ---------------------------------------------------------------------------- monotone in every rate


@settings(PROPERTIES, max_examples=300)
@given(scenarios(), st.sampled_from(RATES), st.sampled_from([0.5, 0.9, 0.1, 0.99]))
def test_a_slower_part_never_shortens_the_step(raw, rate, factor):
    """Slowing one bandwidth (or the clock, or the optimizer) never makes the step shorter than the base step
    less the DRAM time of MemoryX's other users.

    MemoryX's DRAM is one bandwidth shared by the stream, the gradient intake and the optimizer.  A slower
    part can move the intake's and the optimizer's DRAM traffic into windows the stream leaves idle, so a
    DRAM-bound stream is delayed less: a scheduling anomaly of any shared resource, and a real one.  It
    can save at most all of that traffic's DRAM time, so that is the slack, derived per case (found: a
    0.9x clock shortening a DRAM-bound gpt3-125m step by 0.15%, against 6.3% of such traffic).  Before
    the DRAM was shared, 3,000 random draws found no step shortened by any amount.  The plan is pinned to
    the one chosen for the base: ``auto`` may choose another plan for the slower machine, one its analytic
    ranking put within 1% of the best, which the simulator can then find a little faster
    (tests/core/test_planner.py checks the choice itself).  Both runs also pass
    :func:`assert_step_time_and_breakdown`.
    """
    base = build(raw)
    plan = wss.plan(base)
    pin = {"training.activation_checkpointing": plan.checkpointing, "training.micro_batch": max(plan.micro_batches)}
    base = build(raw, pin)
    try:
        slower = build(raw, {**pin, rate: get(base, rate) * factor})
    except wss.ScenarioError:
        assume(False)  # slowed below the field's range (a clock under 1 MHz): no machine to compare
    r0, cluster = simulate_detailed(base)
    r1 = wss.simulate(slower)
    assert_step_time_and_breakdown(base, r0)
    assert_step_time_and_breakdown(slower, r1)
    t0, t1 = r0.step_time_s, r1.step_time_s
    mx = cluster.memoryx
    others = mx.bytes_in + math.fsum(j.traffic.dram_bytes for j in cluster.optimizer.jobs)
    slack = others / mx.dram.bandwidth_Bps / len(r0.steps)
    assert t1 >= t0 - slack, (rate, factor, t0, t1, slack)


# ---------------------------------------------------------------------------- weak scaling

#: Where doubling the wafers raises the throughput per wafer a little: 4 wafers (one tree level) take
#: 99.080 us a step, 8 wafers (two levels, global_batch 8) 99.035 us (up to 3% on gpt3-125m).  Each SwarmX
#: level is a buffered store-and-forward stage, so a deeper tree holds more weight chunks in flight and
#: lets the stream run further ahead of the wafer; raising hardware.swarmx.port_buffer_bytes on the 4-wafer run
#: gives the same gain.  That is the model's buffering per hop, not an error: weak scaling is exact only
#: at one tree depth (test below).
DEEPER_TREE_BUFFERS_MORE = {
    "name": "property",
    "hardware": {
        "preset": "cs2-cluster",
        "wafers": 4,
        "wafer": {"io_bandwidth_Bps": 3e10},
        "memoryx": {"network_bandwidth_Bps": 2.5e9},
    },
    "workload": {"model": "fc-mnist", "sparsity": 0.0},
    "training": {"global_batch": 4, "optimizer": "sgd", "steps": 1},
}


def _doubled(raw: dict) -> tuple[wss.Result, wss.Result, int, int]:
    """The scenario and its copy on twice the wafers at the same samples per wafer; their tree depths.

    Where the depths are the same, the two steps must be too, bit for bit (test_weak_scaling_is_exact_at_one_
    tree_depth): checked here for every pair made, so the doubling test's examples check it as well."""
    n = raw["hardware"]["wafers"]
    per_wafer = raw["training"]["global_batch"] // n
    one = build(raw)
    two = build(raw, {"hardware.wafers": 2 * n, "training.global_batch": 2 * n * per_wafer})
    a, b = wss.simulate(one), wss.simulate(two)
    levels_a, levels_b = wss.plan(one).tree_levels, wss.plan(two).tree_levels
    if levels_a == levels_b:
        assert b.step_time_s == a.step_time_s, (levels_a, a.step_time_s, b.step_time_s)
    return a, b, levels_a, levels_b


@settings(PROPERTIES, max_examples=100)
@example(DEEPER_TREE_BUFFERS_MORE)
@given(scenarios())
def test_doubling_the_wafers_never_more_than_halves_throughput_per_wafer(raw):
    """Twice the wafers at the same samples per wafer: the cluster is never slower than before.

    Throughput per wafer on 2N wafers is at least half that on N, i.e. total samples per second
    never falls when wafers are added at a fixed per-wafer batch.
    """
    a, b, _, _ = _doubled(raw)
    n = raw["hardware"]["wafers"]
    assert b.samples_per_s / (2 * n) >= 0.5 * a.samples_per_s / n, (a.step_time_s, b.step_time_s)


@settings(PROPERTIES, max_examples=30)
@given(scenarios())
def test_weak_scaling_is_exact_at_one_tree_depth(raw):
    """At the same SwarmX depth, twice the wafers at the same samples per wafer take the same step, bit for bit.

    Every wafer sees the same chunks at the same time, so only the tree's depth can change the step.  ``_doubled``
    checks this of every pair it makes, the doubling test's 100 examples too (84 of them at one depth): with these
    30, 114 pairs at one depth are checked, where this test alone checked 100.
    """
    a, b, levels_a, levels_b = _doubled(raw)
    assume(levels_a == levels_b)
    assert b.step_time_s == a.step_time_s
