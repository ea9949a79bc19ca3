"""The part protocol (wss/model/components/part.py): a cluster starts, counts and names its parts from its list of
parts, so a part added to that list is started, counted and explained without further code."""

from __future__ import annotations

from pathlib import Path

import pytest

import wss
from wss.model.components.part import Held, Process
from wss.model.scenario.hardware import HardwareConfig
from wss.model.scenario.presets import HARDWARE_PART_KINDS, PART_KINDS, config_root
from wss.model.sim.cluster import Cluster, run_cluster
from wss.model.sim.unfolded import UnfoldedCluster, run_unfolded

FC = Path(__file__).resolve().parents[2] / "scenarios" / "fc_mnist.yaml"


class _Ticker:
    """A part of the test's own: one process ticking every microsecond for ten ticks, one counter."""

    def __init__(self, cluster: Cluster):
        self.env, self.name, self.ticks = cluster.env, "ticker", 0
        self.event = cluster.env.event()

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.run())]

    def run(self) -> Process:
        for _ in range(10):
            yield self.env.timeout(1e-6)
            self.ticks += 1

    def counters(self) -> dict[str, float]:
        return {self.name + ".ticks": float(self.ticks)}

    def waits(self) -> dict[int, str]:
        return {id(self.event): "the ticker's event"}

    def state(self) -> dict[str, Held]:
        return {}


@pytest.mark.parametrize("fold_wafers", ["true", "false"])
def test_a_part_in_the_list_is_started_counted_and_named(monkeypatch, fold_wafers):
    cls = Cluster if fold_wafers == "true" else UnfoldedCluster
    own = cls.parts
    added: list[_Ticker] = []

    def parts(self):
        if not added:
            added.append(_Ticker(self))
        return [*own(self)[:-1], added[0], own(self)[-1]]

    monkeypatch.setattr(cls, "parts", parts)
    plan = wss.plan(wss.load_scenario(FC, [f"simulation.fold_wafers={fold_wafers}", "training.steps=1"]))
    cluster = (run_cluster if fold_wafers == "true" else run_unfolded)(plan)
    assert added[0].ticks == 10
    assert cluster.counters()["ticker.ticks"] == 10.0
    assert cluster.wait_context()[0][id(added[0].event)] == "the ticker's event"


def test_every_counter_belongs_to_a_part_of_the_folded_cluster():
    cluster = run_cluster(wss.plan(wss.load_scenario(FC)))
    names = [p.name for p in cluster.parts()]
    assert len(names) == len(set(names))
    for key in cluster.counters():
        assert any(key == n or key.startswith(n + ".") for n in names), key


def test_the_hardware_part_kinds_are_declared_once_and_match_the_schema_and_the_presets():
    for kind in HARDWARE_PART_KINDS:
        assert kind in HardwareConfig.model_fields and kind in PART_KINDS
    folders = {p.name for p in config_root().iterdir() if p.is_dir()} - {"models"}
    assert folders == set(PART_KINDS)
    from wss.model.scenario import loader

    assert loader._PART_KINDS is HARDWARE_PART_KINDS


@pytest.mark.parametrize("fold_wafers", ["true", "false"])
def test_both_clusters_build_each_simulated_wafers_parts_in_one_place(monkeypatch, fold_wafers):
    """Both clusters are built by one path, wire (which builds each simulated wafer's own parts with build_wafer):
    the folded cluster's one wafer and the unfolded one's each simulated wafer, and the one list of parts starts
    them all, each in wafer order."""
    import wss.model.sim.cluster as folded

    built = []
    own, own_wire = folded.build_wafer, folded.wire
    wired = []

    def counting(*args, **kwargs):
        built.append(own(*args, **kwargs))
        return built[-1]

    def wiring(*args, **kwargs):
        wired.append(own_wire(*args, **kwargs))
        return wired[-1]

    monkeypatch.setattr(folded, "build_wafer", counting)
    monkeypatch.setattr(folded, "wire", wiring)
    monkeypatch.setattr("wss.model.sim.unfolded.wire", wiring)
    faults = [] if fold_wafers == "true" else ["faults.stragglers=[{wafer: 1, slowdown: 1.5}]"]  # 2 simulated
    plan = wss.plan(wss.load_scenario(FC, [f"simulation.fold_wafers={fold_wafers}", "training.steps=1", *faults]))
    cluster = (run_cluster if fold_wafers == "true" else run_unfolded)(plan)
    assert cluster.wafer_parts == built == wired[0] and len(built) == (1 if fold_wafers == "true" else 2)
    parts = cluster.parts()
    assert parts[-len(built):] == [w.wafer for w in built]
    assert [p for p in parts if any(p is w.inputs for w in built)] == [w.inputs for w in built]
    assert all(w.wafer.passes for w in built)
