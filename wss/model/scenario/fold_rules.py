"""Whether to fold the wafers into one: the rule behind ``simulation.fold_wafers``.

Folded, one wafer and one SwarmX root-to-leaf path stand for all of them
(:mod:`wss.model.sim.cluster`); unfolded, every wafer is its own process and every
tree edge its own link (:mod:`wss.model.sim.unfolded`), except that identical
wafers under identical subtrees are simulated once (:func:`stand_ins`).  The two agree exactly on a
uniform cluster, where every wafer gets the same chunks at the same times and
does the same work on them, so ``auto`` folds exactly then: it is the same
answer for a fraction of the events.  A cluster is not uniform when the global
batch does not divide evenly over the wafers (the wafers with one sample fewer
finish each pass early and wait).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping, Sequence

from wss.model.scenario.scenario import Scenario
from wss.model.scenario.shards import shard_samples

__all__ = ["fold_decision", "folds_wafers", "folds_for_the_step", "slowdown_for_the_step", "uniform_shards",
           "simulated_wafers", "stand_ins", "UNIFORM_REASON"]

#: Why a uniform cluster folds under ``simulation.fold_wafers: auto`` (the default, left out of result.json).
UNIFORM_REASON = "auto: the cluster is uniform, every wafer has the same number of samples"


def uniform_shards(scenario: Scenario) -> bool:
    """Does every wafer that trains (none is cut off by a node that is down) get the same number of samples?"""
    return len({n for n in shard_samples(scenario) if n}) == 1


def _shards(scenario: Scenario) -> str:
    """'1544 samples over 192 wafers: 8 wafers of 9, 184 of 8'."""
    samples = [n for n in shard_samples(scenario) if n]
    hi, lo = max(samples), min(samples)
    first = samples.count(hi)
    return (f"{scenario.training.global_batch} samples over {len(samples)} wafers: {first} "
            f"wafer{'s' if first > 1 else ''} of {hi}, {samples.count(lo)} of {lo}")


def _decision(scenario: Scenario) -> tuple[bool, str]:
    """Fold or not, and which rule decided: ``true``, ``false``, ``faults``, ``uniform`` or ``uneven``."""
    asked = scenario.simulation.fold_wafers
    if asked is True:
        return True, "true"
    if asked is False:
        return False, "false"
    if scenario.faults.sets_wafers_apart:
        return False, "faults"
    return (True, "uniform") if uniform_shards(scenario) else (False, "uneven")


def folds_wafers(scenario: Scenario) -> bool:
    """Does the run fold the wafers into one (:func:`wafer_folding` without its reason)?"""
    return _decision(scenario)[0]


def folds_for_the_step(scenario: Scenario) -> bool:
    """Would the wafers folded give the run's step exactly, where ``auto`` runs them apart?

    Under ``auto``, a cluster set apart only by uneven shards: every weight broadcast and every gradient
    reduction of the lock-step tree waits for the busiest wafer, and a smaller shard's micro-batches are never
    larger than the busiest wafer's in the same slot, so the busiest wafer standing for all gives the same step
    time, pacing and bound (tests/core/test_uneven_micro_batches.py); what only the run apart shows is every other
    wafer's own idle time.  Not where a part the wafers share carries each wafer's own bytes at its own times:
    offloaded block inputs kept by MemoryX (``hardware.activation_store.location: memoryx``) at a limited rate,
    which the folded chain moves as the busiest wafer's times the wafers' share.  Studies that read only the
    step (``wss size``) fold such runs: the same answer for a small fraction of the events.
    """
    return _decision(scenario)[1] == "uneven" and not _shared_store(scenario)


def slowdown_for_the_step(scenario: Scenario) -> float | None:
    """The slowdown that, given to every wafer, gives the run's step exactly, where ``auto`` runs the wafers apart
    for stragglers alone; None where no such slowdown does.

    With equal shards, the slowest wafer paces every weight broadcast and every gradient reduction of the
    lock-step tree as the busiest shard does (:func:`folds_for_the_step`): the faster wafers run ahead of it as far
    as the buffers let them and never hold it.  A cluster whose every wafer is that slow then has the same step,
    and it is one class of identical wafers, simulated as one (``simulation.wafer_classes``).  Not with a slow
    edge, jitter or a node down (they set wafers apart otherwise), scripted failure events, uneven shards (the
    pace could pass from wafer to wafer between micro-batches), nor a store on MemoryX (as above).
    """
    f, sim = scenario.faults, scenario.simulation
    if (sim.fold_wafers != "auto" or not sim.wafer_classes or not f.stragglers or f.links or f.nodes
            or f.jitter is not None or f.events or not uniform_shards(scenario) or _shared_store(scenario)):
        return None
    return max(f.slowdowns().values())


def _shared_store(scenario: Scenario) -> bool:
    """Does MemoryX keep every wafer's offloaded block inputs (a part the wafers share, each at its own times)?"""
    store = scenario.hardware.activation_store
    return store.location == "memoryx" and not store.is_unlimited


def fold_decision(scenario: Scenario) -> tuple[bool, str]:
    """Fold or not, and why in words, from ``simulation.fold_wafers`` and the scenario's uniformity
    (a Result's ``wafer_folding`` record)."""
    rule = _decision(scenario)[1]
    if rule == "true":
        extra = ""
        if not uniform_shards(scenario):
            extra = f"; the shards are uneven ({_shards(scenario)}): the busiest stands for all"
        return True, f"simulation.fold_wafers is true{extra}"
    if rule == "false":
        return False, "simulation.fold_wafers is false"
    if rule == "faults":
        return False, f"auto: faults ({scenario.faults.describe(apart_only=True)})"
    if rule == "uniform":
        return True, UNIFORM_REASON
    return False, f"auto: the shards are uneven, {_shards(scenario)}"


def simulated_wafers(scenario: Scenario) -> int:
    """Wafers an unfolded run simulates: one per class of identical wafers under identical subtrees
    (``simulation.wafer_classes``; :func:`stand_ins`), else every wafer.

    A wafer's kind here is its shard, its slowdown and, with jitter, itself (every wafer draws its own
    factors): equal shards make equal micro-batches, so these are the classes the run uses.  It is an upper
    bound: where lighter wafers hang beside the busiest, the run's nodes above the busiest also stand for each
    other (:func:`stand_ins`, ``drifting``), which takes the plan's micro-batches to decide.
    """
    hw, faults = scenario.hardware, scenario.faults
    if not scenario.simulation.wafer_classes or faults.jitter is not None:
        return sum(1 for n in shard_samples(scenario) if n)
    slow = faults.slowdowns()
    kinds = [(n, slow.get(w, 1.0)) if n else None for w, n in enumerate(shard_samples(scenario))]
    leaves = stand_ins(hw.swarmx.nodes_per_level(hw.wafers), hw.wafers, hw.swarmx.fan_out, kinds,
                       faults.bandwidth_factors())[-1]
    return sum(1 for w, s in enumerate(leaves) if s == w)


def _children(level: int, nodes_per_level: Sequence[int], wafers: int) -> int:
    """Edges leaving level ``level`` toward the wafers (the number of nodes, or wafers, one level down)."""
    return wafers if level == len(nodes_per_level) else nodes_per_level[level]


def stand_ins(nodes_per_level: Sequence[int], wafers: int, fan_out: int, kinds: Sequence[Hashable | None],
              factor: Mapping[str, float] | None = None, name: str = "swarmx",
              drifting: Collection[int] = ()) -> list[list[int]]:
    """Each edge's stand-in, level by level (root first): the edge simulated in its place.

    Two sibling edges are in one class when their subtrees time alike: the same bandwidth factors and, level by
    level, nodes whose children fall into the same classes in the same order of first appearance, down to wafers
    of equal ``kinds``.  How many children of one class a node has does not matter: a node's broadcast waits for
    room in each of them and its reduction for a sum from each, and alike children time alike (their stand-in's
    inlet counts each member), so a node over one wafer and a node over four alike are one class.  The first edge
    of a class stands for it; an edge inside a member's subtree is stood for by the first edge of its own class
    under the member's stand-in.  An edge that stands for itself is
    simulated; ``stand_ins(...)[-1][w]`` is the wafer simulated in wafer ``w``'s place.  With every
    kind distinct, every edge stands for itself (one process per wafer and per edge).

    A wafer of kind ``None`` is cut off (below a node that is down): it and every edge with no other
    wafer below it stand for nothing (``-1``) and carry nothing, so they set no node apart either.

    ``drifting`` names wafers with less work than the busiest in every micro-batch and nothing else of their own
    (:func:`wss.model.folding.drift.drifting_wafers`: no slow edge, no jitter, no shared store).  They never hold up
    a broadcast (they take every chunk sooner) nor a reduction (their gradients come sooner), so a node with a
    busiest wafer below it times as its busiest children alone do.  Its signature is then theirs: two such nodes
    with different drifting children are one class, and a drifting child the stand-in node has no class of is
    simulated under it (the stand-in node's broadcast and reduction take it in; its reduction counts each member
    it stands for).  One chain of nodes then stands for every busiest wafer, however the drifting ones hang beside
    them.
    """
    factor = factor or {}
    depth = len(nodes_per_level)
    widths = [_children(level, nodes_per_level, wafers) for level in range(1, depth + 1)]
    ids: dict[Hashable, int] = {}  # a signature -> a small integer naming it
    below: list[int] = [ids.setdefault(("wafer", k), len(ids)) for k in kinds]  # what hangs under each edge
    live = [k is not None for k in kinds]  # does any wafer that trains hang below the edge?
    paces = [k is not None and w not in drifting for w, k in enumerate(kinds)]  # ... one of the busiest?
    signatures: list[list[int]] = [[] for _ in range(depth)]
    alive: list[list[bool]] = [[] for _ in range(depth)]
    for level in range(depth, 0, -1):  # bottom-up: an edge's signature is its factor and its subtree's
        sig = [ids.setdefault(("edge", level, factor.get(f"{name}.l{level}.{c}", 1.0), below[c]), len(ids))
               for c in range(widths[level - 1])]
        signatures[level - 1], alive[level - 1] = sig, live
        nodes = nodes_per_level[level - 1]
        below = [ids.setdefault(("node", level, *_classes(sig[i * fan_out:(i + 1) * fan_out],
                                                         live[i * fan_out:(i + 1) * fan_out],
                                                         paces[i * fan_out:(i + 1) * fan_out])), len(ids))
                 for i in range(nodes)]
        live = [any(live[i * fan_out:(i + 1) * fan_out]) for i in range(nodes)]
        paces = [any(paces[i * fan_out:(i + 1) * fan_out]) for i in range(nodes)]
    out: list[list[int]] = []
    parent: list[int] = [0]  # the root node stands for itself
    for level in range(1, depth + 1):
        sig = signatures[level - 1]
        #: (the node standing for an edge's node, signature) -> the first live edge with it under the nodes it stands
        #: for: an edge of its own first, else one of a node it stands for (simulated under it)
        first: dict[tuple[int, int], int] = {}
        row = []
        for c in range(widths[level - 1]):
            if not alive[level - 1][c]:
                row.append(-1)
                continue
            row.append(first.setdefault((parent[c // fan_out], sig[c]), c))
        out.append(row)
        parent = row
    return out


def _classes(sig: Sequence[int], live: Sequence[bool], paces: Sequence[bool]) -> tuple[int, ...]:
    """A node's signature from its children's: their classes in order of first appearance, of the live ones that
    have a busiest wafer below them where any has (:func:`stand_ins`, ``drifting``), else of every live one."""
    keep = [x for x, ok, p in zip(sig, live, paces) if ok and p] or [x for x, ok in zip(sig, live) if ok]
    return tuple(dict.fromkeys(keep))
