"""Block by block: where the blocks of an uneven slot start to repeat (diagnosis for the uneven-shard fold).

With uneven shards, the micro-batch slots where the wafers' sizes differ (the plan's ``uneven_slots``) fold their
blocks only where the fold check of :mod:`wss.model.folding.layer_fold` passes; where it fails, the ladder
simulates every block of those slots (:mod:`wss.model.folding.ladder`), and that run is what makes a cluster
size that does not divide the batch cost ten times and more the one that does.

This runs a scenario unfolded with every block of its uneven slots simulated, snapshots the cluster (counters and
queues, as a fold point does) as the representative wafer starts each block's first pass in those slots, and
prints, per slot and direction, for each block whether the fold check would pass with it and the next two as the
compared blocks; where the queues differ, whether everything else (period, counters, the wafer's time by cause)
would; and which queues differ, with their values.  ``--track NAME`` prints one state entry block by block.

Run: ``python tools/uneven_blocks.py scenarios/gpt3_175b.yaml --set hardware.wafers=63 [--diffs 3]``
(``--set`` takes YAML values: ``--set "faults.nodes=[{node: swarmx.l4.n1}]"``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

import wss
from wss.model.folding.fold import FoldMismatch, Snapshot, close, same_state
from wss.model.folding.layer_fold import FoldPoint, check_point
from wss.model.folding.probe import observe_passes
from wss.model.folding.run_plan import folding_plan
from wss.model.plan import Plan
from wss.model.program import Pass
from wss.model.sim.cluster import drain, start_parts
from wss.model.sim.unfolded import UnfoldedCluster, build_unfolded


@dataclass(frozen=True)
class BlockStart:
    """The cluster as the representative wafer started one block's first pass in an uneven slot."""

    block: int
    snapshot: Snapshot
    wafers: dict[str, float]  # every simulated wafer's start of the same pass, by name


@dataclass(frozen=True)
class Pair:
    """The fold check with ``block`` and the next as the compared blocks (and the one after as the first after
    the copies): ``verdict`` None where it passes, else why not; ``bare`` the same without the queues; ``differs``
    the state entries that differ between the two compared blocks' starts (name -> both values).  The check
    includes the other wafers' (:func:`~wss.model.folding.layer_fold.wafer_copies`): their blocks must be as long
    as the representative's."""

    block: int
    period: float
    verdict: str | None
    bare: str | None
    differs: dict[str, tuple[Any, Any]]
    leads: dict[str, float]  # how long before the representative each other wafer started the block


def uneven_slot_blocks(s: wss.Scenario) -> tuple[UnfoldedCluster, dict[tuple[int, str], list[BlockStart]]]:
    """Run ``s`` unfolded with every block of its uneven slots simulated (step 0); return the finished cluster and,
    per (micro-batch, direction) of those slots, the block starts in program order."""
    p = folding_plan(s, None)
    if not p.uneven_slots or not p.layer_runs:
        raise SystemExit(f"{s.name}: no uneven slot with identical blocks to fold")
    p = replace(p, blocks_unfolded_in=p.uneven_slots)
    cluster = build_unfolded(p)
    firsts = _first_passes(p, cluster.program)
    wanted = {i: key for key, blocks in firsts.items() for _, i in blocks}
    snaps: dict[int, Snapshot] = {}
    starts_of: dict[str, dict[int, float]] = {}
    rep, env = cluster.wafer, cluster.env

    def observer(q: Pass) -> None:
        if q.index in wanted:
            snaps[q.index] = Snapshot(env.now, len(rep.timeline), cluster.counters(), cluster.state())

    observe_passes(rep, observer)
    for w in cluster.simulated:
        times = starts_of.setdefault(w.name, {})
        observe_passes(w, lambda q, times=times: times.__setitem__(q.index, env.now) if q.index in wanted else None)
    wafers = len(cluster.simulated)
    parts = cluster.parts()
    processes = start_parts(env, parts[:-wafers])
    processes.update(start_parts(env, parts[-wafers:]))
    drain(cluster, env.all_of([processes[w.name] for w in cluster.simulated]), processes, s.training.steps)
    return cluster, {key: [BlockStart(b, snaps[i], {w: t[i] for w, t in starts_of.items()}) for b, i in blocks]
                     for key, blocks in firsts.items()}


def _first_passes(p: Plan, program: Sequence[Pass]) -> dict[tuple[int, str], list[tuple[int, int]]]:
    """(micro-batch, direction) -> [(block, its first pass)] in program order, in step 0's uneven slots."""
    out: dict[tuple[int, str], list[tuple[int, int]]] = {}
    seen: set[tuple[int, str, int]] = set()
    for q in program:
        block = p.ops[q.op].block
        if block is None or q.micro_batch not in p.uneven_slots or q.step != 0:
            continue
        d = "forward" if q.phase == "forward" else "backward"
        if (q.micro_batch, d, block) not in seen:
            seen.add((q.micro_batch, d, block))
            out.setdefault((q.micro_batch, d), []).append((block, q.index))
    return out


def pairs(cluster: UnfoldedCluster, micro_batch: int, direction: str, starts: Sequence[BlockStart]) -> list[Pair]:
    """The fold check at every three consecutive block starts of one uneven slot's passes in one direction."""
    timeline = cluster.wafer.timeline
    out = []
    for j in range(len(starts) - 2):
        x, y, z = (s.snapshot for s in starts[j:j + 3])
        snaps = {0: x, 1: y, 2: z}
        point = FoldPoint(0, micro_batch, direction, 0, 1, 2, 1)
        verdict = _verdict(point, snaps, timeline)
        bare = None
        if verdict is not None:
            bare = _verdict(point, {i: replace(v, state={}) for i, v in snaps.items()}, timeline)
        period = y.time - x.time
        differs = {name: (held.value, y.state[name].value) for name, held in x.state.items()
                   if name in y.state and not same_state({name: held}, {name: y.state[name]}, period)}
        rep = cluster.wafer.name
        leads = {w: t - starts[j].wafers[w] for w, t in ((w, starts[j].wafers[rep]) for w in starts[j].wafers)
                 if w != rep}
        for w in leads:
            a, b, c = (s.wafers[w] for s in starts[j:j + 3])
            if not (close(b - a, z.time - y.time) and close(c - b, z.time - y.time)):
                why = f"{w}'s blocks took {b - a!r} s and {c - b!r} s, the representative's {z.time - y.time!r} s"
                verdict = why if verdict is None else verdict
                bare = why if bare is None else bare
                break
        out.append(Pair(starts[j].block, period, verdict, bare, differs, leads))
    return out


def _verdict(point: FoldPoint, snaps: dict[int, Snapshot], timeline: Sequence[tuple[float, float, str, int]]
             ) -> str | None:
    try:
        check_point(point, snaps, timeline)
    except FoldMismatch as exc:
        return str(exc).split(": ", 1)[1]
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--set", action="append", default=[], help="KEY=YAML overrides (hardware.wafers=63)")
    ap.add_argument("--diffs", type=int, default=2, help="differing state entries to print per block")
    ap.add_argument("--track", action="append", default=[], help="a state entry to print block by block")
    args = ap.parse_args(argv)
    overrides = {k: yaml.safe_load(v) for k, v in (kv.split("=", 1) for kv in args.set)}
    s = wss.load_scenario(Path(args.scenario), overrides)
    cluster, slots = uneven_slot_blocks(s)
    print(f"{s.name}: uneven slots {sorted(cluster.plan.uneven_slots)}, {cluster.events:,} events")
    for (mb, d), starts in slots.items():
        print(f"micro-batch {mb}, {d}: {len(starts)} blocks")
        passing = []
        for pair, start in zip(pairs(cluster, mb, d, starts), starts, strict=False):
            state = start.snapshot.state
            tracked = " ".join(f"{n}={state[n].value!r}" for n in args.track if n in state)
            verdict = "repeats" if pair.verdict is None else f"differs: {pair.verdict[:140]}"
            if pair.bare is not None or pair.verdict is not None:
                verdict += " | without the queues: " + ("repeats" if pair.bare is None else pair.bare[:140])
            lead = max(pair.leads.values(), default=0.0)
            print(f"  block {pair.block:>3} period {pair.period:.10g} s lead {lead * 1e3:.4f} ms {tracked} {verdict}")
            for name, (a, b) in list(pair.differs.items())[:args.diffs]:
                print(f"      {name}: {a!r} -> {b!r}")
            if pair.verdict is None:
                passing.append(pair.block)
        print(f"  blocks whose check passes: {passing}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
