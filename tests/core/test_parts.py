"""The part protocol (wss/model/components/part.py): a cluster starts, counts and names its parts from its list of
parts, so a part added to that list is started, counted and explained without further code."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

import wss
from wss.model.components.part import (
    Carried,
    Held,
    PowerDraw,
    Process,
    Reading,
    Track,
    carried_of,
    state_of,
    utilisation_of,
)
from wss.model.folding.fold import FoldMismatch
from wss.model.folding.layer_fold import LayerFoldMismatch
from wss.model.folding.run_plan import folding_plan
from wss.model.scenario.hardware import HardwareConfig
from wss.model.scenario.presets import HARDWARE_PART_KINDS, PART_KINDS, config_root
from wss.model.sim.cluster import Cluster, run_cluster
from wss.model.sim.unfolded import UnfoldedCluster, run_unfolded
from wss.model.simulate import simulate_detailed
from wss.views.trace import build_trace

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


# ------------------------------------------------------------------ the recipe (docs/architecture.md)

GPT13 = FC.parent / "cerebras_gpt_13b.yaml"


#: Each of the gauge's ticks: a microsecond busy, 100 bytes moved toward the wafer; it is 2 units, each drawing
#: 100 W busy and 10 W idle.
TICK_S, TICK_BYTES, UNITS, BUSY_W, IDLE_W = 1e-6, 100.0, 2, 100.0, 10.0


class _Gauge:
    """A hardware part of the test's own, added as the recipe adds one: a process ticking ten times, counters,
    an event a process could wait on, what it holds at a fold point (``holding()``), what the Result reports
    of it (its busy fraction, the bytes it moved toward each wafer that trains and the power it draws) and its
    ticks as a trace's track (each a transfer of the program's first pass)."""

    def __init__(self, env, name, holding):
        self.env, self.name, self.ticks, self.holding = env, name, 0, holding
        self.event = env.event()
        self.spans: list[tuple[float, float, int, float]] = []

    def processes(self) -> list[tuple[str, Process]]:
        return [(self.name, self.run())]

    def run(self) -> Process:
        for _ in range(10):
            yield self.env.timeout(TICK_S)
            self.ticks += 1
            self.spans.append((self.env.now - TICK_S, self.env.now, 0, TICK_BYTES))

    def tracks(self) -> list[Track]:
        return [Track(self.name, "ticks", self.spans, self.name)]

    def counters(self) -> dict[str, float]:
        return {self.name + ".ticks": float(self.ticks), self.name + ".busy": self.ticks * TICK_S,
                self.name + ".bytes": self.ticks * TICK_BYTES}

    def waits(self) -> dict[int, str]:
        return {id(self.event): f"the event of {self.name}"}

    def utilisation(self, at: Reading) -> dict[str, float]:
        return {self.name: at.total(self.name + ".busy") / at.seconds}

    def carried(self, at: Reading) -> dict[str, Carried]:
        return {f"{self.name}->wafer": Carried(at.wafers, at.total(self.name + ".bytes"))}

    def power_draw(self, utilisation: dict[str, float]) -> PowerDraw:
        return PowerDraw(self.name, UNITS, utilisation[self.name], BUSY_W, IDLE_W)

    def state(self) -> dict[str, Held]:
        return {self.name + ".held": Held(self.holding(self.env))}


def _add_gauge(monkeypatch, kind: str, holding) -> list[_Gauge]:
    """What the recipe's edits of sim/cluster.py do, as patches: a shared part built in build_backbone, a field of
    Backbone, passed into the cluster by assemble; a part of each wafer built in build_wafer, a field of
    WaferParts; either in its place in Cluster.parts(), and last in Cluster.reported(), Cluster.carriers(),
    Cluster.powered() and Cluster.tracks().
    Nothing in sim/unfolded.py, result/ or elsewhere."""
    import wss.model.sim.cluster as cluster_module

    gauges: list[_Gauge] = []
    if kind == "shared":
        backbone, assemble = cluster_module.build_backbone, cluster_module.assemble

        def build_backbone(plan):
            bb = backbone(plan)
            bb.gauge = _Gauge(bb.env, "gauge", holding)
            gauges.append(bb.gauge)
            return bb

        def assembled(cls, bb, *args, **kwargs):
            cluster = assemble(cls, bb, *args, **kwargs)
            cluster.gauge = bb.gauge
            return cluster

        monkeypatch.setattr(cluster_module, "build_backbone", build_backbone)
        monkeypatch.setattr(cluster_module, "assemble", assembled)
        monkeypatch.setattr("wss.model.sim.unfolded.build_backbone", build_backbone)  # the names it imported
        monkeypatch.setattr("wss.model.sim.unfolded.assemble", assembled)
    else:
        wafer = cluster_module.build_wafer

        def build_wafer(env, *args, **kwargs):
            own = wafer(env, *args, **kwargs)
            own.gauge = _Gauge(env, f"gauge{own.wafer.name[len('wafer'):]}", holding)
            gauges.append(own.gauge)
            return own

        monkeypatch.setattr(cluster_module, "build_wafer", build_wafer)
    parts = Cluster.parts

    def with_gauge(self):
        own = parts(self)
        added = [self.gauge] if kind == "shared" else [w.gauge for w in self.wafer_parts]
        return [*own[:-len(self.wafer_parts)], *added, *own[-len(self.wafer_parts):]]

    def added(self):
        return [self.gauge] if kind == "shared" else [w.gauge for w in self.wafer_parts]

    reported, carriers, powered, tracks = Cluster.reported, Cluster.carriers, Cluster.powered, Cluster.tracks
    monkeypatch.setattr(Cluster, "parts", with_gauge)
    monkeypatch.setattr(Cluster, "reported", lambda self: [*reported(self), *added(self)])
    monkeypatch.setattr(Cluster, "carriers", lambda self: [*carriers(self), *added(self)])
    monkeypatch.setattr(Cluster, "powered", lambda self: [*powered(self), *added(self)])
    monkeypatch.setattr(Cluster, "tracks", lambda self: [*tracks(self), *(t for g in added(self) for t in g.tracks())])
    return gauges


@pytest.mark.parametrize("kind", ["shared", "wafer"])
@pytest.mark.parametrize("fold_wafers", ["true", "false"])
def test_a_hardware_part_added_by_the_recipe_is_started_counted_named_and_compared(monkeypatch, kind, fold_wafers):
    gauges = _add_gauge(monkeypatch, kind, lambda env: 0)
    faults = [] if fold_wafers == "true" else ["faults.stragglers=[{wafer: 1, slowdown: 1.5}]"]  # 2 simulated
    plan = wss.plan(wss.load_scenario(FC, [f"simulation.fold_wafers={fold_wafers}", "training.steps=1", *faults]))
    cluster = (run_cluster if fold_wafers == "true" else run_unfolded)(plan)
    assert len(gauges) == (1 if kind == "shared" or fold_wafers == "true" else 2)
    names, _ = cluster.wait_context()
    state = cluster.state()
    for gauge in gauges:
        assert gauge.ticks == 10 and cluster.counters()[gauge.name + ".ticks"] == 10.0
        assert names[id(gauge.event)] == f"the event of {gauge.name}"
        assert state[gauge.name + ".held"] == Held(0)


@pytest.mark.parametrize("kind", ["shared", "wafer"])
def test_a_part_holding_more_at_each_fold_point_refuses_the_steps_fold(monkeypatch, kind):
    """Twelve steps fold into five (steps 0-3 and the last) when the added part holds the same at each step's start,
    and not when it holds more each time: its state is compared with the rest of the cluster's."""
    plan = wss.plan(wss.load_scenario(FC, ["training.steps=12"]))
    assert plan.step_fold_copies > 0
    with monkeypatch.context() as patch:
        _add_gauge(patch, kind, lambda env: 0)
        assert run_cluster(plan).folding.step_fold is not None
    with monkeypatch.context() as patch:
        _add_gauge(patch, kind, lambda env: round(env.now * 1e6))  # grows with the run
        with pytest.raises(FoldMismatch, match=r"queues differ at the starts of two steps \(gauge.held \d+ vs \d+\)"):
            run_cluster(plan)


def test_a_part_of_each_wafer_holding_more_at_each_block_refuses_the_unfolded_layer_fold(monkeypatch):
    """The unfolded cluster compares the added part of each simulated wafer at the blocks' fold points."""
    s = wss.load_scenario(GPT13, ["hardware.wafers=2", "training.steps=1", "simulation.fold_wafers=false",
                                  "faults.stragglers=[{wafer: 1, slowdown: 1.5}]"])
    plan = folding_plan(s, None)
    assert plan.layer_runs
    with monkeypatch.context() as patch:
        _add_gauge(patch, "wafer", lambda env: 0)
        assert run_unfolded(plan).folding.layers is not None
    with monkeypatch.context() as patch:
        _add_gauge(patch, "wafer", lambda env: round(env.now * 1e6))
        with pytest.raises(LayerFoldMismatch, match=r"gauge.0.held \d+ vs \d+, gauge.1.held"):
            run_unfolded(plan)


@pytest.mark.parametrize("kind", ["shared", "wafer"])
@pytest.mark.parametrize("fold_wafers", ["true", "false"])
def test_a_hardware_part_added_by_the_recipe_is_reported_in_the_result(monkeypatch, kind, fold_wafers):
    """The part's own utilisation, bytes and power reach the Result after every part the Result already listed
    (its power before the SwarmX nodes'), with no edit to the measurement, the energy or the Result: two steps of
    10 ticks each, on 3 wafers (unfolded: each simulated wafer's gauge under its own name)."""
    s = wss.load_scenario(FC, ["hardware.wafers=3", "training.steps=2", f"simulation.fold_wafers={fold_wafers}"])
    plain = wss.simulate(s)
    gauges = _add_gauge(monkeypatch, kind, lambda env: 0)
    result, _ = simulate_detailed(s, record=False)
    names = [g.name for g in gauges]
    assert len(set(names)) == len(names) and (len(names) == 1 or (kind, fold_wafers) == ("wafer", "false"))
    assert list(result.utilisation) == [*plain.utilisation, *names]
    assert list(result.link_bytes) == [*plain.link_bytes, *(f"{n}->wafer" for n in names)]
    for name in names:
        assert result.utilisation[name] == pytest.approx(10 * TICK_S / result.total_time_s, rel=1e-12)
        moved = result.link_bytes[f"{name}->wafer"]
        assert (moved.links, moved.per_link_bytes) == (3, pytest.approx(10 * TICK_BYTES / 2, rel=1e-12))
    assert {k: result.utilisation[k] for k in plain.utilisation} == plain.utilisation
    energy, before = result.energy, plain.energy
    assert energy is not None and before is not None
    assert list(energy.by_part_J) == ["wafer", "memoryx", *names, "swarmx"]
    for name in names:
        busy = result.utilisation[name]
        assert energy.busy_fraction[name] == busy
        assert energy.by_part_J[name] == pytest.approx(UNITS * (busy * BUSY_W + (1 - busy) * IDLE_W)
                                                       * result.step_time_s, rel=1e-12)
    assert energy.per_step_J == pytest.approx(sum(energy.by_part_J.values()), rel=1e-12)
    assert {k: energy.by_part_J[k] for k in before.by_part_J} == before.by_part_J


@pytest.mark.parametrize("kind", ["shared", "wafer"])
@pytest.mark.parametrize("fold_wafers", ["true", "false"])
def test_a_hardware_part_added_by_the_recipe_is_drawn_in_the_trace(monkeypatch, kind, fold_wafers):
    """The part's track is drawn, with no edit to the trace, as a process of its own after the SwarmX levels:
    its ten ticks (merged, one pass's transfers back to back) and its busy counter; every other process as before."""
    s = wss.load_scenario(FC, ["hardware.wafers=3", "training.steps=1", f"simulation.fold_wafers={fold_wafers}"])

    def processes(doc):
        return [e["args"]["name"] for e in doc["traceEvents"] if e["name"] == "process_name"]

    plain = processes(build_trace(*simulate_detailed(s, record=True)))
    gauges = _add_gauge(monkeypatch, kind, lambda env: 0)
    doc = build_trace(*simulate_detailed(s, record=True))
    names = [g.name for g in gauges]
    levels = [p for p in plain if p.startswith("SwarmX level")]
    after = plain.index(levels[-1]) + 1
    assert processes(doc) == [*plain[:after], *names, *plain[after:]]
    for name in names:
        pid = next(e["pid"] for e in doc["traceEvents"] if e["name"] == "process_name" and e["args"]["name"] == name)
        ticks = [e for e in doc["traceEvents"] if e["pid"] == pid and e["ph"] == "X"]
        assert len(ticks) == 1 and ticks[0]["args"]["chunks"] == 10
        assert ticks[0]["args"]["bytes"] == 10 * TICK_BYTES and ticks[0]["dur"] == pytest.approx(10 * TICK_S * 1e6)
        assert any(e["ph"] == "C" and e["pid"] == pid and e["name"] == f"{name} busy" for e in doc["traceEvents"])


def test_two_parts_reporting_one_key_cannot_hide_each_other():
    a, b = _Gauge(simpy.Environment(), "gauge", lambda env: 0), _Gauge(simpy.Environment(), "gauge", lambda env: 1)
    at = Reading(lambda counter: 1.0, 2.0, 3)
    assert utilisation_of([a], at) == {"gauge": 0.5} and carried_of([a], at) == {"gauge->wafer": Carried(3, 1.0)}
    with pytest.raises(ValueError, match=r"gauge repeats reported entries: \['gauge'\]"):
        utilisation_of([a, b], at)
    with pytest.raises(ValueError, match="gauge repeats reported entries"):
        carried_of([a, b], at)


def test_two_parts_of_one_name_cannot_hide_each_others_state():
    a, b = _Gauge(simpy.Environment(), "gauge", lambda env: 0), _Gauge(simpy.Environment(), "gauge", lambda env: 1)
    assert state_of([a]) == {"gauge.held": Held(0)}
    with pytest.raises(ValueError, match="gauge repeats state entries"):
        state_of([a, b])
