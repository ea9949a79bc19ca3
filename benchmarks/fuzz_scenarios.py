"""Fuzz the scenario schema: mutated scenarios through ``wss validate``, ``wss simulate`` and the Python API.

Cases are drawn by Hypothesis from the shipped scenarios and their mutations: a field set to a value
of the wrong type (booleans, strings, lists, mappings, null), to an extreme or non-finite number, or
scaled by up to 10^30 either way; a field removed; an unknown key added; a huge layer repeat, step
count, batch or wafer count; YAML text mutations (alias "billion laughs" and merge-key bombs, nesting
500 deep, a 4,300-digit integer, a 100 KB string, duplicate keys, anchors that are fine, stray
characters); and ``--set`` overrides, good and bad (misspelt keys, keys through list items out of
range, malformed ``key=value``, integer and empty keys through the API).

Every case runs in a worker process with a time limit (an alarm in the worker, and a hard kill by
the parent a little later) and a memory limit, and ends in one outcome class:

* ``accepted``: exit 0 / a Result, and (for a simulation) a finite, positive step time;
* ``rejected``: a wss error (exit 2 with one ``error:`` message of at most 2,000 characters, or
  argparse's usage error), never a traceback;
* ``traceback``: any other exception, or an exit code that is not 0 or 2;
* ``hang``: no answer within the time limit;
* ``nonsense``: accepted with a step time that is not finite and positive, or a rejection whose
  message is empty, multi-screen (over 2,000 characters) or carries a traceback;
* ``stalled``: exit 3, the simulator's own deadlock report (a model fault, counted apart).

Run: ``nice python benchmarks/fuzz_scenarios.py --cases 10000`` prints the outcome counts by class
and by channel, and the first bad cases in full.  ``tests/core/test_fuzz_scenarios.py`` runs a
fast subset in the default test suite.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import io
import json
import math
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: Shipped scenarios to mutate: the cheap ones (a simulation of each takes about a second or less).
BASES = ("fc_mnist.yaml", "fc_mnist_numerics.yaml", "bert_large.yaml", "gpt3_175b.yaml", "cs3_gpt3_13b.yaml")
CHANNELS = ("validate", "simulate", "api")
#: Other commands that take a scenario: the closed-form estimate, sizing (a token model: bert_large and the
#: GPT scenarios) and a sweep over --vary values.
COMMAND_CHANNELS = ("estimate", "size", "sweep")
#: Commands that read result files (report, diff, plot) or baselines (check), fed mutated ones.
RESULT_CHANNELS = ("report", "diff", "plot", "check")
ALL_CHANNELS = CHANNELS + COMMAND_CHANNELS + RESULT_CHANNELS
GOOD = ("accepted", "rejected")
CLASSES = ("accepted", "rejected", "traceback", "hang", "nonsense", "stalled")
#: Longest acceptable rejection message.
MAX_MESSAGE = 2000
#: Memory a worker may use (address space), bytes.
MEMORY_LIMIT = 4 * 2**30


# --------------------------------------------------------------------------- cases (Hypothesis)


def _strategies(channels: tuple[str, ...] = CHANNELS) -> Any:
    """The Hypothesis strategy of one case: ``{"base", "channel", "data" | "text", "overrides", ...}``.

    ``channels`` are those of :data:`CHANNELS` and :data:`COMMAND_CHANNELS` the cases go through.
    """
    import yaml
    from hypothesis import strategies as st

    from wss.model.scenario import Scenario
    from wss.model.scenario.validation_errors import field_paths

    bases = {name: yaml.safe_load((ROOT / "scenarios" / name).read_text()) for name in BASES}
    layer_fields = ["repeat", "in_features", "out_features", "d_model", "n_heads", "d_ff", "d_head", "vocab_size",
                    "max_positions", "sparsity", "kind", "activation", "tied", "causal", "classes", "name"]
    schema_keys = sorted(set(field_paths(Scenario))) + [
        f"workload.model.layers.{i}.{f}" for i in (0, 1, 2, -1, 7, 99) for f in layer_fields
    ]
    numeric_keys = [k for k in schema_keys if _is_number_field(Scenario, k)] + [
        k for k in schema_keys if k.startswith("workload.model.layers.") and k.rsplit(".", 1)[1] in layer_fields[:11]
    ]
    magnitude = st.floats(-30, 30).map(lambda e: 10.0**e)
    extreme = st.sampled_from([
        0, -1, 1, -0.0, 5e-324, -5e-324, 1e-300, 1e300, 1e308, -1e308, math.inf, -math.inf, math.nan,
        2**31, 2**63, 2**64 + 1, 10**30, 10**400, 1e9, 1e6, 1_000_000, 100_000, 10_000, 0.5, 0.999999, 1.0000001,
    ])
    weird = st.one_of(
        st.booleans(), st.none(), st.text(max_size=12),
        st.sampled_from(["yes", "no", "on", "off", "true", "16", "1e9", ".inf", ".nan", "auto", "none", "0x10",
                         "1_000", "cs2-cluster", "gpt3-175b", "wse2", "fc-mnist", "~", "", " ", "-"]),
        st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(-3, 3), max_size=2),
    )
    numbers = st.one_of(
        extreme, st.integers(-(10**20), 10**20), st.floats(allow_nan=True, allow_infinity=True),
        st.integers(1, 4096),
    )
    values = st.one_of(numbers, weird)
    mutation = st.one_of(
        st.tuples(st.just("set"), st.integers(0, 10**6), values),
        st.tuples(st.just("scale"), st.integers(0, 10**6), st.integers(-30, 30)),
        st.tuples(st.just("delete"), st.integers(0, 10**6), st.none()),
        st.tuples(st.just("unknown"), st.integers(0, 10**6), st.text(min_size=1, max_size=12)),
        st.tuples(st.just("retype"), st.integers(0, 10**6), weird),
    )
    work = st.tuples(
        st.sampled_from(["workload.model.layers.0.repeat", "workload.model.layers.1.repeat", "training.steps",
                         "training.global_batch", "hardware.wafers", "training.micro_batch",
                         "simulation.max_chunks_per_kernel", "simulation.chunk_bytes", "seed"]),
        st.sampled_from([10, 100, 1000, 10_000, 100_000, 1_000_000, 10**9, 10**12]),
    )
    set_key = st.one_of(st.sampled_from(schema_keys), st.sampled_from(schema_keys).map(_misspell),
                        st.text(max_size=20))
    set_text = st.one_of(
        st.tuples(set_key, values.map(_flow)).map(lambda kv: f"{kv[0]}={kv[1]}"),
        st.tuples(st.sampled_from(numeric_keys), magnitude).map(lambda kv: f"{kv[0]}={kv[1]!r}"),
        st.tuples(st.sampled_from(numeric_keys), magnitude).map(lambda kv: f"{kv[0]}={round(kv[1])}"),
        st.tuples(set_key, st.text(max_size=20)).map(lambda kv: f"{kv[0]}={kv[1]}"),
        st.sampled_from(["hardware.wafers", "=5", "hardware..wafers=2", ".=1", "hardware.wafers==2",
                         "workload.model.layers.99.repeat=2", "hardware.wafers=[1, 2", "hardware.wafers={",
                         "hardware.wafer.clock_Hz=yes", "hardware.wafers=true", "training.global_batch=1e9",
                         "simulation.chunk_bytes=5e-324", "hardware.swarmx.hop_latency_s=1e308",
                         "hardware.wafer.clock_Hz=1e-300", "hardware.wafer.nonweight_efficiency=5e-324",
                         "numerics.weight_decay=.inf", "numerics.learning_rate=1e300",
                         "workload.model.layers.0.repeat=1000000", "training.steps=1000000",
                         "hardware.wafers=100000", "hardware.allow_beyond_published_limits=true"]),
    )
    api_key = st.one_of(set_key, st.integers(-3, 3), st.none(), st.just(""), st.just("a..b"))
    text_mutation = st.one_of(st.just("none"), st.just("none"), st.sampled_from(
        ["laughs", "merge_bomb", "deep", "deep_map", "big_int", "long_string", "duplicate_key", "anchor", "garbage",
         "tab", "empty", "list_doc", "binary"]
    ))
    set_text = st.one_of(set_text, _bound_sets())
    case = st.fixed_dictionaries({
        "base": st.sampled_from(sorted(bases)),
        "channel": st.sampled_from(channels),
        "mutations": st.lists(mutation, max_size=3),
        "work": st.lists(work, max_size=1),
        "text_mutation": text_mutation,
        "sets": st.lists(set_text, max_size=2),
        "api_overrides": st.lists(st.tuples(api_key, values), max_size=2),
        "api_mapping": st.booleans(),
        "seed": st.integers(0, 2**32 - 1),
        "faults": st.one_of(st.none(), st.none(), _faults(numbers, weird)),
        "vary": st.lists(_vary_items(set_key, values), max_size=2),
    })
    return case.map(lambda c: _materialise(c, bases))


def _faults(numbers: Any, weird: Any) -> Any:
    """A ``faults`` section: every kind of fault, with factors at, inside and past their ranges, and nonsense.

    ``null`` for ``jitter``, ``flash``, ``failures`` or ``mtbf_hours_per_wafer`` and ``"auto"`` for
    ``checkpoint_every_steps`` are documented values: a case with them must be accepted when the rest is.
    """
    from hypothesis import strategies as st

    factor = st.one_of(st.sampled_from([5e-324, 1e-300, 9.99e-4, 1e-3, 0.01, 0.5, 1, 2, 1e3, 1000.5, 1e300, 0, -1,
                                        math.inf, math.nan]), numbers, weird)
    index = st.one_of(st.integers(-2, 16), st.sampled_from([10**6, 2**63]), weird)
    edge = st.sampled_from(["swarmx.l1.0", "swarmx.l1.1", "swarmx.l1.3", "swarmx.l2.5", "swarmx.l9.9", "x", ""])
    node = st.sampled_from(["swarmx.l1.n0", "swarmx.l2.n0", "swarmx.l2.n1", "swarmx.l9.n9", "nope"])
    shard = st.fixed_dictionaries({"shard": index}, optional={
        f"{rate}_factor": factor for rate in ("dram", "flash", "network", "optimizer")})
    failures = st.fixed_dictionaries({"restart_s": st.one_of(st.sampled_from([0, 60, 1e7, 1e8]), weird)}, optional={
        "mtbf_hours_per_wafer": st.one_of(st.none(), factor, st.sampled_from([1000.0, 1e9, 2e9])),
        "checkpoint_every_steps": st.one_of(st.just("auto"), index, st.just(1)),
        "storage": st.one_of(st.sampled_from(["parallel-fs", "nope"]),
                             st.fixed_dictionaries({"write_bandwidth_Bps": factor})),
        "train_steps": st.one_of(st.none(), index), "train_tokens": st.one_of(st.none(), factor)})
    return st.fixed_dictionaries({}, optional={
        "stragglers": st.lists(st.fixed_dictionaries({"wafer": index, "slowdown": factor}), max_size=2),
        "links": st.lists(st.fixed_dictionaries({"edge": edge, "bandwidth_factor": factor}), max_size=2),
        "nodes": st.lists(st.fixed_dictionaries({"node": node}, optional={"kind": st.sampled_from(["down", "up"])}),
                          max_size=1),
        "shards": st.lists(shard, max_size=2),
        "jitter": st.one_of(st.none(), st.fixed_dictionaries({"sigma": factor})),
        "flash": st.one_of(st.none(), st.fixed_dictionaries({"tail_probability": factor, "tail_factor": factor})),
        "failures": st.one_of(st.none(), failures),
        "events": st.lists(st.fixed_dictionaries({"at_step": index, "wafer": index}), max_size=2),
    })


def _bound_sets() -> Any:
    """``--set KEY=V`` with V at a number field's documented bound or just past it (from ``wss schema``)."""
    from hypothesis import strategies as st

    edges = []
    for key, low, high, integer in _ranges():
        if integer:
            edges += [(key, int(high)), (key, int(high) + 1), (key, int(low)), (key, int(low) - 1)]
        else:
            edges += [(key, high), (key, math.nextafter(high, math.inf)), (key, low),
                      (key, math.nextafter(low, -math.inf))]
    return st.sampled_from(edges).map(lambda kv: f"{kv[0]}={kv[1]!r}")


def _ranges() -> list[tuple[str, float, float, bool]]:
    """``(dotted key, lowest, highest, integer?)`` of every number field with a range, from the scenario's
    JSON Schema (the ranges the validator applies; a list's first item stands for all of them)."""
    from wss.views.schema import scenario_schema

    schema = scenario_schema()
    found: dict[str, tuple[str, float, float, bool]] = {}

    def walk(node: dict, path: tuple[str, ...], depth: int) -> None:
        if depth > 12:
            return
        if "$ref" in node:
            node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        if node.get("type") in ("number", "integer") and "maximum" in node:
            low = node.get("minimum", node.get("exclusiveMinimum"))
            if low is not None:
                key = ".".join(path)
                found.setdefault(key, (key, float(low), float(node["maximum"]), node["type"] == "integer"))
        for k, sub in node.get("properties", {}).items():
            walk(sub, (*path, k), depth + 1)
        for sub in node.get("anyOf", []) + node.get("oneOf", []):
            walk(sub, path, depth + 1)
        if isinstance(node.get("items"), dict):
            walk(node["items"], (*path, "0"), depth + 1)

    walk(schema, (), 0)
    return sorted(found.values())


def _vary_items(set_key: Any, values: Any) -> Any:
    """``--vary KEY=V1,V2`` items for the sweep channel: good ones, bad keys and values, non-scalar keys."""
    from hypothesis import strategies as st

    return st.one_of(
        st.sampled_from(["hardware.wafers=1,2", "training.steps=1,2", "seed=1,2", "training.micro_batch=auto,1",
                         "seed={? [1, 2] : 3}", "seed={[1]: 2},3", "hardware.wafers=", "=1,2", "hardware.wafers=1,,2",
                         "hardware.wafer.clock_Hz=yes,1e9", "hardware.wafers=[1, 2", "hardware.wafers=1,2000000",
                         "faults.links=[{edge: swarmx.l1.1, bandwidth_factor: 1e-300}]"]),
        st.tuples(set_key, values.map(_flow), values.map(_flow)).map(lambda kv: f"{kv[0]}={kv[1]},{kv[2]}"),
    )


def _is_number_field(root: Any, key: str) -> bool:
    from wss.model.scenario.validation_errors import key_types

    types = key_types(root, key) or []
    return any(_base_type(tp) in (int, float) for tp in types)


def _base_type(tp: Any) -> Any:
    import typing

    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    args = [a for a in typing.get_args(tp) if a is not type(None)]
    return _base_type(args[0]) if args and typing.get_origin(tp) is not None else tp


def _misspell(key: str) -> str:
    parts = key.split(".")
    last = parts[-1]
    if len(last) > 2:
        i = len(last) // 2
        parts[-1] = last[:i] + last[i + 1:]
    return ".".join(parts)


def _flow(value: Any) -> str:
    """A value as the YAML flow text of a ``--set`` (what a user would type)."""
    import yaml

    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**300:
        return "9" * 4300  # past Python's int/str conversion limit
    return yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


def _get(node: Any, path: tuple) -> Any:
    for p in path:
        node = node[p]
    return node


def _mutate(data: dict, mutation: tuple, paths: list[tuple] | None = None) -> None:
    """Apply one mutation at the path ``pick`` chooses among ``paths`` (default: every path in ``data``)."""
    kind, pick, arg = mutation
    paths = paths or [p for p in _paths(data) if p]
    if not paths:
        return
    path = paths[pick % len(paths)]
    parent, last = _get(data, path[:-1]), path[-1]
    current = parent[last]
    if kind == "set":
        parent[last] = arg
    elif kind == "scale" and isinstance(current, (int, float)) and not isinstance(current, bool):
        scaled = current * 10.0**arg if current else 10.0**arg
        parent[last] = int(scaled) if isinstance(current, int) and abs(scaled) < 1e18 else scaled
    elif kind == "delete":
        del parent[last]
    elif kind == "unknown":
        target = current if isinstance(current, dict) else parent if isinstance(parent, dict) else data
        target[arg] = 1
    elif kind == "retype":
        parent[last] = arg


def _materialise(c: dict, bases: dict) -> dict:
    """Apply a drawn case's mutations: the case as the worker runs it (JSON-ready)."""
    import copy

    data = copy.deepcopy(bases[c["base"]])
    if c.get("faults") is not None:
        data["faults"] = c["faults"]
    for m in c["mutations"]:
        _mutate(data, m)
    sets = list(c["sets"]) + [f"{k}={v}" for k, v in c["work"]]
    out: dict[str, Any] = {"base": c["base"], "channel": c["channel"], "sets": sets, "vary": list(c.get("vary", []))}
    text = _text(data, c["text_mutation"], random.Random(c["seed"]))
    out["text_mutation"] = c["text_mutation"]
    if c["channel"] == "api":
        out["overrides"] = [[k, v] for k, v in c["api_overrides"]] + [[k, v] for k, v in c["work"]]
        if c["api_mapping"] and c["text_mutation"] == "none":
            out["data"] = data
            return out
    out["text"] = text
    return out


def _text(data: Any, mutation: str, rng: random.Random) -> str:
    import yaml

    try:
        text = yaml.safe_dump(data, sort_keys=False, width=10**6)
    except (yaml.YAMLError, ValueError):
        text = "name: unrepresentable\n"
    if mutation == "laughs":
        return "".join(f"{a}: &{a} [{', '.join([f'*{b}'] * 9) if b else ', '.join(['lol'] * 9)}]\n"
                       for a, b in zip("abcdefghi", [None, *"abcdefgh"])) + text
    if mutation == "merge_bomb":
        merges = (f"m{i}: &m{i} {{<<: [*m{i - 1}, *m{i - 1}], k{i}: 1}}\n" for i in range(1, 40))
        bomb = "m0: &m0 {x: 1}\n" + "".join(merges)
        return bomb + text
    if mutation == "deep":
        return text + "extra: " + "[" * 600 + "]" * 600 + "\n"
    if mutation == "deep_map":
        return text + "".join("  " * i + f"k{i}:\n" for i in range(520)) + "  " * 520 + "x: 1\n"
    if mutation == "big_int":
        return text.replace("global_batch:", "global_batch: " + "9" * 4300 + "\n  old_global_batch:", 1)
    if mutation == "long_string":
        return text + "description: " + "x" * 100_000 + "\n"
    if mutation == "duplicate_key":
        return text + text.splitlines()[0] + "\n"
    if mutation == "anchor":
        return text.replace("training:", "training: &t", 1) + "anchored: *t\n"
    if mutation == "garbage":
        i = rng.randrange(len(text) + 1)
        junk = rng.choice(["\t", ": :", "[", "{", "&", "*x", "!!python/object:os.system", "\x00", "%"])
        return text[:i] + junk + text[i:]
    if mutation == "tab":
        return text.replace("  ", "\t", 1)
    if mutation == "empty":
        return ""
    if mutation == "list_doc":
        return "- " + text.replace("\n", "\n  ")
    if mutation == "binary":
        return text + "blob: !!binary aGVsbG8=\n"
    return text


# --------------------------------------------------------------------------- result files (Hypothesis)

#: Shipped scenarios whose results (and baselines) are mutated: a small run and a transformer.
RESULT_BASES = ("fc_mnist.yaml", "bert_large.yaml")
#: Whole-file mutations of a result: shapes the loader must refuse or the views must survive.
RESULT_SHAPES = ("empty_steps", "one_step", "empty_records", "no_records_of_step_0", "drop_wafer_records",
                 "reverse_records")
RESULT_TEXT = ("nan", "infinity", "huge_float", "big_int", "truncate", "garbage", "empty", "binary", "deep",
               "bom", "latin1", "list_doc", "zero_bytes")


def _result_strategies() -> Any:
    """The Hypothesis strategy of one result case: a shipped run's result.json (or, for ``check``, its
    baseline) mutated, through ``report``, ``diff``, ``plot`` or ``check``.

    Mutations are drawn as in :func:`_strategies` and applied in the worker to the file it made, mostly to
    the result's own fields (a pick of ``focus``) and otherwise anywhere (records, the resolved scenario).
    Setting an optional field to null (``energy``, ``plan_choice``, a step's ``loss``) gives a valid
    result: such a case must be accepted.
    """
    from hypothesis import strategies as st

    weird = st.one_of(st.booleans(), st.none(), st.text(max_size=8), st.sampled_from(["auto", "", "nan", "1e9"]),
                      st.lists(st.integers(-3, 3), max_size=2), st.dictionaries(st.text(max_size=4), st.integers(),
                                                                                  max_size=1))
    numbers = st.one_of(st.sampled_from([0, -1, 1, 5e-324, 1e-300, 1e300, 1e308, -0.0, 2**63, 10**30]),
                        st.floats(-1e12, 1e12), st.integers(-5, 10**6))
    mutation = st.tuples(st.sampled_from(["set", "scale", "delete", "unknown", "retype"]), st.integers(0, 10**6),
                         st.one_of(numbers, weird), st.booleans())
    return st.fixed_dictionaries({
        "channel": st.sampled_from(RESULT_CHANNELS),
        "base": st.sampled_from(RESULT_BASES),
        "mutations": st.lists(mutation, max_size=3),
        "shape": st.one_of(st.none(), st.none(), st.sampled_from(RESULT_SHAPES)),
        "text_mutation": st.one_of(st.just("none"), st.just("none"), st.just("none"), st.sampled_from(RESULT_TEXT)),
        "options": st.lists(st.sampled_from(["--by=kernel", "--by=layer", "--by=phase", "--sort=stall",
                                             "--sort=duration", "--limit=0", "--limit=1", "--csv", "--json",
                                             "--layers=0", "--step=0", "--step=1", "--step=-1", "--step=1000000",
                                             "--all", "swap"]), max_size=3, unique=True),
        "seed": st.integers(0, 2**32 - 1),
    })


_RESULT_DOCS: dict[str, tuple[dict, dict]] = {}


def _result_docs(base: str) -> tuple[dict, dict]:
    """The result.json document and the baseline of shipped scenario ``base`` (made once per worker)."""
    if base not in _RESULT_DOCS:
        import wss
        from wss.studies.check import baseline_from_result

        path = ROOT / "scenarios" / base
        result = wss.simulate(wss.load_scenario(path))
        baseline = baseline_from_result(result, path)
        _RESULT_DOCS[base] = (json.loads(result.to_json()), json.loads(baseline.to_json()))
    return _RESULT_DOCS[base]


def _mutated_file(doc: dict, case: dict, path: Path, is_result: bool) -> None:
    """Write ``doc`` with the case's mutations to ``path``."""
    import copy

    data = copy.deepcopy(doc)
    if is_result and case["shape"]:
        _reshape(data, case["shape"])
    for kind, pick, arg, focus in case["mutations"]:
        if kind == "scale":  # a power of ten, as in the scenario mutations
            arg = pick % 61 - 30
        elif kind == "unknown":  # a key: a short string
            arg = str(arg)[:12] or "x"
        shallow = [p for p in _paths(data) if 0 < len(p) <= 3 and p[0] not in ("scenario", "records")]
        _mutate(data, (kind, pick, arg), shallow if focus else None)
    text = json.dumps(data, indent=1, default=repr)
    path.write_bytes(_result_text(text, case["text_mutation"], random.Random(case["seed"])))


def _reshape(data: dict, shape: str) -> None:
    if shape == "empty_steps":
        data["steps"] = []
    elif shape == "one_step":
        data["steps"] = data["steps"][:1]
    elif shape == "empty_records":
        data["records"] = []
    elif shape == "no_records_of_step_0":
        data["records"] = [r for r in data["records"] if r.get("step") != 0]
    elif shape == "drop_wafer_records":
        data["records"] = [r for r in data["records"] if r.get("where") != "wafer"]
    elif shape == "reverse_records":
        data["records"] = data["records"][::-1]


def _result_text(text: str, mutation: str, rng: random.Random) -> bytes:
    import re

    numbers = list(re.finditer(r"(?<=: )-?[0-9][0-9.e+-]*", text))
    at = numbers[rng.randrange(len(numbers))] if numbers else None
    swap = {"nan": "NaN", "infinity": "Infinity", "huge_float": "1e999", "big_int": "9" * 5000}
    if mutation in swap and at is not None:
        return (text[: at.start()] + swap[mutation] + text[at.end():]).encode()
    if mutation == "truncate":
        return text[: rng.randrange(len(text))].encode()
    if mutation == "garbage":
        i = rng.randrange(len(text) + 1)
        return (text[:i] + rng.choice(["}", "]", ",", '"', "\\", "\x00", "{{", "::"]) + text[i:]).encode()
    if mutation == "empty":
        return b""
    if mutation == "binary":
        return bytes(rng.randrange(256) for _ in range(4096))
    if mutation == "deep":
        return ("{\"a\": " * 100_000 + "1" + "}" * 100_000).encode()
    if mutation == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if mutation == "latin1":
        return text.replace("wafer", "w\u00e4fer", 1).encode("latin-1", "replace")
    if mutation == "list_doc":
        return ("[" + text + "]").encode()
    if mutation == "zero_bytes":
        return b"\x00" * 100_000
    return text.encode()


def _run_result_case(case: dict, workdir: Path) -> tuple[str, str]:
    """Write the mutated file(s) and run the command; exit 0 (and for check 1, a regression found) is
    accepted, 2 a rejection, anything else a traceback."""
    result_doc, baseline_doc = _result_docs(case["base"])
    channel, options = case["channel"], case["options"]
    mutated, intact = workdir / "result.json", workdir / "intact.json"
    if channel == "check":
        (workdir / "baselines").mkdir()
        _mutated_file(baseline_doc, case, workdir / "baselines" / f"{Path(case['base']).stem}.json", False)
        argv = ["check", str(ROOT / "scenarios" / case["base"]), "--baselines", str(workdir / "baselines")]
        argv += [o for o in options if o in ("--all", "--json")]
    else:
        _mutated_file(result_doc, case, mutated, True)
        argv = [channel, str(mutated)]
        if channel == "report":
            argv += [o for o in options if o.startswith(("--by", "--sort", "--limit"))]
            argv += ["--csv", str(workdir / "rows.csv")] if "--csv" in options else []
        elif channel == "diff":
            intact.write_text(json.dumps(result_doc), encoding="utf-8")
            argv = ["diff", *([str(intact), str(mutated)] if "swap" in options else [str(mutated), str(intact)])]
            argv += [o for o in options if o in ("--json", "--layers=0")]
        else:
            argv += ["-o", str(workdir / "plots"), "--format", "png", "--quiet"]
            argv += [o for o in options if o.startswith("--step")]
    code, stdout, stderr = _main(argv)
    if code == 2:
        return _classify_rejection(stderr)
    if code == 0 or (code == 1 and channel == "check" and "REGRESSED" in stdout):
        return "accepted", f"exit {code}"
    return "traceback", f"exit code {code}: {stderr[-300:]}"


# --------------------------------------------------------------------------- one case, in a worker


class CaseTimeout(BaseException):
    """The per-case alarm went off."""


def _classify_rejection(message: str) -> tuple[str, str]:
    if "Traceback (most recent call last)" in message:
        return "nonsense", "a rejection carrying a traceback"
    if not message.strip():
        return "nonsense", "an empty rejection message"
    if len(message) > MAX_MESSAGE:
        return "nonsense", f"a rejection message of {len(message):,} characters"
    return "rejected", message.strip().splitlines()[0][:200]


def _step_outcome(step_time: Any) -> tuple[str, str]:
    ok = isinstance(step_time, (int, float)) and math.isfinite(step_time) and step_time > 0
    return ("accepted", f"step {step_time:.6g} s") if ok else ("nonsense", f"step_time_s {step_time!r}")


def run_case(case: dict, workdir: Path) -> tuple[str, str]:
    """Run one case in this process; return its outcome class and a one-line detail."""
    from wss.errors import SimulationStalled, WssError

    if case["channel"] in RESULT_CHANNELS:
        return _run_result_case(case, workdir)
    source: Any
    if "data" in case:
        source = case["data"]
    else:
        source = workdir / "scenario.yaml"
        source.write_text(case["text"], encoding="utf-8", errors="surrogatepass")
    if case["channel"] == "api":
        import wss

        overrides: Any = dict(case["overrides"]) if case["overrides"] else None
        try:
            result = wss.simulate(wss.load_scenario(source, overrides))
        except SimulationStalled as exc:
            return "stalled", str(exc).splitlines()[0][:200]
        except WssError as exc:
            return _classify_rejection(str(exc))
        return _step_outcome(result.step_time_s)
    return _run_cli(case, source, workdir)


def _main(argv: list[str]) -> tuple[int, str, str]:
    """Run ``wss`` in this process: exit code, stdout, stderr."""
    from wss.cli import main

    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 2
    return code, stdout.getvalue(), stderr.getvalue()


def _run_cli(case: dict, source: Path, workdir: Path) -> tuple[str, str]:
    channel = case["channel"]
    argv = [channel, str(source)]
    for s in case["sets"]:
        argv += ["--set", s]
    out_dir = workdir / "out"
    if channel == "simulate":
        argv += ["-o", str(out_dir), "--quiet"]
    elif channel == "estimate":
        argv += ["--json"]
    elif channel == "size":
        argv += ["--tokens", "1e9", "--max-wafers", "2", "--json"]
    elif channel == "sweep":
        for v in case.get("vary") or ["hardware.wafers=1,2"]:
            argv += ["--vary", v]
        argv += ["--executor", "serial", "--quiet", "-o", str(workdir / "sweep.csv")]
    code, stdout, stderr = _main(argv)
    if code == 3:
        return "stalled", stderr.splitlines()[0][:200]
    if code == 2:
        return _classify_rejection(stderr)
    if channel == "size" and code in (0, 1):  # 1: no size meets the target (there is none here)
        return _size_outcome(stdout)
    if code == 1 and channel == "sweep":
        return "traceback", f"sweep points failed unexpectedly: {stderr[-300:]}"
    if code != 0:
        return "traceback", f"exit code {code}: {stderr[-300:]}"
    if channel == "validate":
        return "accepted", "valid"
    if channel == "estimate":
        return _step_outcome(json.loads(stdout).get("step_time_s"))
    if channel == "sweep":
        return _sweep_outcome(workdir / "sweep.csv")
    doc = json.loads((out_dir / "result.json").read_text())
    return _step_outcome(doc.get("step_time_s"))


def _size_outcome(stdout: str) -> tuple[str, str]:
    """``size --json``: each size that ran has a finite, positive step time and days; nulls (no target, no
    recommendation, no power figure) are documented answers, not nonsense."""
    doc = json.loads(stdout)
    ran = [r for r in doc["rows"] if r["status"] == "ok"]
    for r in ran:
        for key in ("step_time_s", "days"):
            if _step_outcome(r[key])[0] != "accepted":
                return "nonsense", f"size row {r['wafers']} wafers: {key} {r[key]!r}"
    if not ran:
        return _classify_rejection(doc["rows"][0]["error"]) if doc["rows"] else ("nonsense", "no rows")
    return "accepted", f"{len(ran)} sizes"


def _sweep_outcome(csv_path: Path) -> tuple[str, str]:
    """A sweep's table: points that ran have finite, positive step times; if none ran, the first error is
    the rejection (a point that is invalid is a row with status error, and the command exits 0)."""
    import csv

    with csv_path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    ran = [r for r in rows if r["status"] == "ok"]
    for r in ran:
        kind, detail = _step_outcome(float(r["step_time_s"]) if r["step_time_s"] else None)
        if kind != "accepted":
            return kind, f"sweep point: {detail}"
    if not ran:
        return _classify_rejection(rows[0]["error"]) if rows else ("nonsense", "an empty table")
    return "accepted", f"{len(ran)} of {len(rows)} points"


def worker_main(timeout_s: float) -> None:
    """Read cases (JSON lines) on stdin, answer ``[class, detail]`` lines on the original stdout."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # nothing the code under test prints can corrupt the protocol
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    def alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout

    signal.signal(signal.SIGALRM, alarm)
    # Imported once, before the first case's clock starts: `wss.cli` loads the model lazily, and an alarm going
    # off while the first case imports it (numpy, SimPy, the planner; about a second on a loaded machine) would
    # leave half-imported extension modules that cannot be imported again, so every later case would fail.
    import wss.cli
    import wss.model.simulate  # noqa: F401

    for line in sys.stdin:
        case = json.loads(line)
        with tempfile.TemporaryDirectory(prefix="wss-fuzz-") as tmp:
            signal.setitimer(signal.ITIMER_REAL, timeout_s)
            try:
                outcome = run_case(case, Path(tmp))
            except CaseTimeout:
                outcome = ("hang", f"no answer in {timeout_s:g} s")
            except BaseException as exc:
                frames = traceback.extract_tb(exc.__traceback__)
                where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
                outcome = ("traceback", f"{type(exc).__name__} at {where}: {str(exc)[:200]}")
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        proto.write(json.dumps(outcome) + "\n")


class Worker:
    """A worker process that runs cases one at a time, restarted after a hard timeout."""

    def __init__(self, timeout_s: float):
        self.timeout_s = timeout_s
        self.proc: subprocess.Popen[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
        return subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--timeout", str(self.timeout_s)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env, cwd=ROOT,
        )

    def run(self, case: dict) -> tuple[str, str]:
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(json.dumps(case) + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            self.close()
            return "traceback", "the worker died"
        answer = _read_line(proc, self.timeout_s + 30)  # the worker's alarm fires first; this is the backstop
        if answer is None:
            died = proc.poll() is not None
            self.close()
            return ("traceback", "the worker died (memory or a crash)") if died else ("hang", "worker unresponsive")
        kind, detail = json.loads(answer)
        return kind, detail

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    with contextlib.suppress(OSError):
                        pipe.close()
            self.proc = None


def _read_line(proc: subprocess.Popen[str], timeout_s: float) -> str | None:
    import selectors

    assert proc.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    try:
        if not sel.select(timeout_s):
            return None
        line = proc.stdout.readline()
        return line or None
    finally:
        sel.close()


# --------------------------------------------------------------------------- many cases


def strategy(channels: tuple[str, ...] = ALL_CHANNELS) -> Any:
    """Cases through ``channels``: mutated scenarios (:func:`_strategies`) and mutated results
    (:func:`_result_strategies`)."""
    from hypothesis import strategies as st

    scenario = tuple(c for c in channels if c not in RESULT_CHANNELS)
    results = tuple(c for c in channels if c in RESULT_CHANNELS)
    parts = [_strategies(scenario)] if scenario else []
    if results:
        parts.append(_result_strategies().filter(lambda c: c["channel"] in results))
    return st.one_of(*parts)


def fuzz(n: int, seed: int, timeout_s: float, progress: bool = False,
         channels: tuple[str, ...] = ALL_CHANNELS) -> Iterator[tuple[dict, str, str]]:
    """Draw ``n`` cases with Hypothesis (seeded) and run each in a worker; yield ``(case, class, detail)``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed

    worker = Worker(timeout_s)
    results: list[tuple[dict, str, str]] = []

    @hseed(seed)
    @settings(max_examples=n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(strategy(channels))
    def draw(case: dict) -> None:
        kind, detail = worker.run(case)
        results.append((case, kind, detail))
        if progress and len(results) % 100 == 0:
            counts = collections.Counter(k for _, k, _ in results)
            print(f"{len(results):>6} cases: {dict(counts)}", file=sys.stderr, flush=True)

    try:
        draw()
    finally:
        worker.close()
    yield from results


def report(results: list[tuple[dict, str, str]], elapsed_s: float) -> str:
    by_class = collections.Counter(k for _, k, _ in results)
    by_channel: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for case, kind, _ in results:
        by_channel[case["channel"]][kind] += 1
    lines = [f"{len(results):,} cases in {elapsed_s:,.0f} s", "", f"{'class':<10} {'cases':>7}"]
    lines += [f"{c:<10} {by_class.get(c, 0):>7,}" for c in CLASSES]
    lines += ["", f"{'channel':<10} " + " ".join(f"{c:>9}" for c in CLASSES)]
    for ch in ALL_CHANNELS:
        lines.append(f"{ch:<10} " + " ".join(f"{by_channel[ch].get(c, 0):>9,}" for c in CLASSES))
    bad = [(case, kind, detail) for case, kind, detail in results if kind not in GOOD]
    if bad:
        lines += ["", f"first bad cases ({len(bad)} in all):"]
        for case, kind, detail in bad[:10]:
            shown = {k: (v[:300] + "..." if isinstance(v, str) and len(v) > 300 else v) for k, v in case.items()}
            lines.append(f"  {kind}: {detail}\n    {json.dumps(shown, default=repr)[:1500]}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=10_000, help="cases to draw and run (default 10,000)")
    ap.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds one case may take before it counts as a hang (default 120: the work bound is "
                         "a few minutes at most, and the bases here are far below it)")
    ap.add_argument("--save", type=Path, default=None, help="write every case and outcome to this JSON-lines file")
    ap.add_argument("--channels", default=",".join(ALL_CHANNELS),
                    help=f"comma-separated channels to draw cases for (default: all, {', '.join(ALL_CHANNELS)})")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker_main(args.timeout)
        return 0
    start = time.perf_counter()
    channels = tuple(c.strip() for c in args.channels.split(",") if c.strip())
    unknown = sorted(set(channels) - set(ALL_CHANNELS))
    if unknown or not channels:
        ap.error(f"unknown channels {unknown}; known: {', '.join(ALL_CHANNELS)}")
    results = list(fuzz(args.cases, args.seed, args.timeout, progress=True, channels=channels))
    print(report(results, time.perf_counter() - start))
    if args.save:
        with args.save.open("w") as f:
            for case, kind, detail in results:
                f.write(json.dumps({"class": kind, "detail": detail, "case": case}, default=repr) + "\n")
    return 0 if all(kind in GOOD for _, kind, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
