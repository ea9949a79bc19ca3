"""Faults: what makes one wafer or one SwarmX edge unlike the others.

A fault turns a uniform cluster into one where no single wafer stands for the rest, so a scenario
with faults runs unfolded (docs/unfolded.md).  Two kinds so far:

* a **straggler**: one wafer computes ``slowdown`` times slower (thermal throttling, a core region
  remapped around a defect): its kernel cycles and on-wafer ops take that much longer;
* a **degraded link**: one SwarmX edge, named as in ``wss validate``'s list (``swarmx.l<level>.<child>``),
  runs both directions at ``bandwidth_factor`` of its bandwidth.
"""

from __future__ import annotations

from pydantic import Field, SerializerFunctionWrapHandler, model_serializer

from wss.errors import FieldProblem
from wss.model.scenario.base import Frozen, Integer, Range, Real, bounded
from wss.model.scenario.validation_errors import did_you_mean

__all__ = ["Straggler", "LinkFault", "FaultsConfig", "fault_problems", "describe_edges"]


class Straggler(Frozen):
    """One wafer slower than the others."""

    wafer: Integer = bounded(description="Index of the wafer, 0 to hardware.wafers - 1.", within=Range(0, 1e6))
    slowdown: Real = bounded(description="Factor on the wafer's compute time (1.5: 50% slower).",
                               within=Range(0.0, 1e3, open_low=True))


class LinkFault(Frozen):
    """One SwarmX edge below its bandwidth, both directions."""

    edge: str = Field(description="Edge name, swarmx.l<level>.<child> (wss validate lists them).")
    bandwidth_factor: Real = bounded(description="Factor on the edge's bandwidth (0.5: half rate).",
                                       within=Range(0.0, 1e3, open_low=True))


class FaultsConfig(Frozen):
    """What differs between wafers and edges; empty by default (a uniform cluster)."""

    stragglers: list[Straggler] = Field(default_factory=list, description="Wafers that compute slower.")
    links: list[LinkFault] = Field(default_factory=list, description="SwarmX edges at part of their bandwidth.")

    @property
    def any(self) -> bool:
        return bool(self.stragglers or self.links)

    def slowdowns(self) -> dict[int, float]:
        """Wafer -> factor on its compute time (several entries for one wafer multiply)."""
        out: dict[int, float] = {}
        for s in self.stragglers:
            out[s.wafer] = out.get(s.wafer, 1.0) * s.slowdown
        return out

    def bandwidth_factors(self) -> dict[str, float]:
        """Edge name -> factor on its bandwidth (several entries for one edge multiply)."""
        out: dict[str, float] = {}
        for f in self.links:
            out[f.edge] = out.get(f.edge, 1.0) * f.bandwidth_factor
        return out

    def describe(self) -> str:
        """'wafer 3 1.5x slower, edge swarmx.l2.5 at 0.5x bandwidth'."""
        parts = [f"wafer {w} {s:g}x slower" for w, s in sorted(self.slowdowns().items())]
        parts += [f"edge {e} at {f:g}x bandwidth" for e, f in sorted(self.bandwidth_factors().items())]
        return ", ".join(parts)

    @model_serializer(mode="wrap")
    def _omit_empty(self, handler: SerializerFunctionWrapHandler) -> dict:
        data = handler(self)
        return {k: v for k, v in data.items() if v}


def describe_edges(edges: list[str]) -> str:
    """The edge names compactly, one range per level: 'swarmx.l1.0-2, swarmx.l2.0-11'."""
    levels: dict[str, list[int]] = {}
    for e in edges:
        prefix, _, child = e.rpartition(".")
        levels.setdefault(prefix, []).append(int(child))
    return ", ".join(f"{p}.{c[0]}" if len(c) == 1 else f"{p}.{c[0]}-{c[-1]}" for p, c in levels.items())


def fault_problems(faults: FaultsConfig, wafers: int, edges: list[str], fold_wafers: object) -> list[FieldProblem]:
    """Wafer indexes out of range, unknown edges (with the closest name), and faults on a folded run."""
    problems = []
    for i, s in enumerate(faults.stragglers):
        if s.wafer >= wafers:
            problems.append(FieldProblem(f"faults.stragglers.{i}.wafer",
                                         f"wafer {s.wafer} is out of range: hardware.wafers is {wafers} "
                                         f"(wafers 0 to {wafers - 1})"))
    known = set(edges)
    for i, f in enumerate(faults.links):
        if f.edge not in known:
            problems.append(FieldProblem(f"faults.links.{i}.edge",
                                         f"unknown edge {f.edge!r}{did_you_mean(f.edge, edges)} "
                                         f"(the edges of this tree: {describe_edges(edges)})"))
    if faults.any and fold_wafers is True:
        problems.append(FieldProblem("simulation.fold_wafers",
                                     "true cannot show faults (one wafer and one tree path stand for all): "
                                     "set it to auto or false"))
    return problems
