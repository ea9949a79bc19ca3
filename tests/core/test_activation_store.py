"""The activation store (``hardware.activation_store``): where offloaded block inputs wait, and how fast.

Closed forms on a tiny GPT whose step is bound by one part at a time: a host store slower than the
wafer's edge, MemoryX's network shared by every wafer beside the weight stream; the store's room
checked before the run; the default store unchanged; and the planner and the estimate pricing the
store as the simulator runs it.
"""

from __future__ import annotations

import json

import pytest
import simpy
from core_helpers import SCENARIOS, ideal_hardware, scenario_dict
from test_unfolded import _assert_same_answer, _both

import wss
from wss.cli import main
from wss.errors import InfeasibleError
from wss.model.components.activations import ActivationReturn, ActivationStore, ActivationStoreSettings
from wss.model.components.links import ByteStore, Chunk
from wss.model.components.shared_bandwidth import SharedBandwidth
from wss.model.plan import rank_candidates
from wss.model.plan.search import forced_scenario
from wss.studies.check import scenario_hash

D, BLOCKS, SEQ, MB = 256, 4, 64, 8
TINY = {"name": "tiny-gpt", "input": "tokens", "seq_len": SEQ, "layers": [
    {"kind": "embedding", "name": "embed", "vocab_size": 512, "d_model": D, "max_positions": SEQ},
    {"kind": "transformer_block", "name": "block", "repeat": BLOCKS, "d_model": D, "n_heads": 4, "d_ff": 4 * D},
    {"kind": "output_head", "name": "head", "d_model": D, "vocab_size": 512, "tied": True},
]}
#: One micro-batch's block inputs on one wafer (fp16): what goes out and comes back.
ACT = BLOCKS * MB * SEQ * D * 2


def _raw(mode: str, wafers: int = 1, store: dict | None = None, **hw) -> dict:
    """Two micro-batches of 8 per wafer, two steps; every part ideal but those ``hw`` slows; compute short."""
    hardware = ideal_hardware(**hw)
    hardware["wafer"] = {**hardware.get("wafer", {}), "clock_Hz": 1e11}
    if store is not None:
        hardware["activation_store"] = store
    return scenario_dict(model=TINY, wafers=wafers, global_batch=2 * MB * wafers, steps=2, optimizer="adamw",
                         training={"activation_checkpointing": mode, "micro_batch": MB}, hardware=hardware)


# ------------------------------------------------------------------------------------------ the parts alone


def test_a_weighted_transfer_ends_when_the_transfers_it_stands_for_would():
    """Weighted processor sharing: one transfer of 4 b bytes with weight 4 beside a transfer of weight 1 ends
    with four transfers of b beside it (each gets a fifth of the bandwidth)."""
    ends = []
    for weights in ([4.0], [1.0] * 4):
        env = simpy.Environment()
        bw = SharedBandwidth(env, 100.0, "ports")
        other = bw.transfer(1000.0)
        mine = [bw.transfer(400.0 / len(weights), w) for w in weights]
        env.run(env.all_of(mine))
        ends.append(env.now)
        env.run(other)
        assert env.now == pytest.approx(14.0)  # 1400 bytes at 100 B/s
    assert ends[0] == pytest.approx(ends[1]) == pytest.approx(5.0)  # 400 bytes at four fifths of 100 B/s


def test_a_limited_store_returns_a_block_input_once_stored_at_its_bandwidth():
    """A store of 10 B/s: a block input of 100 bytes arrives (10 s in), then goes back (10 s)."""
    env = simpy.Environment()
    bw = SharedBandwidth(env, 10.0, "store")
    done = {(0, 0): env.event()}
    settings = ActivationStoreSettings((ActivationReturn(0, 0, 5, 100.0, 4, sent_pass=1),), intake_bytes=1000)
    store = ActivationStore(env, settings, done, (bw,), (bw,))
    back = ByteStore(env, 1000)
    store.connect(back)
    env.process(store.absorb())
    env.process(store.run())
    done[(0, 0)].succeed()
    for c in range(4):
        store.intake.put(Chunk(1, c, 4, 25.0, kind="activation"))
    env.run(until=19.9)
    assert len(back.items) < 4 and store.stored[1].triggered
    env.run(until=20.1)
    assert len(back.items) == 4 and store.bytes == 100.0 and store.bytes_stored == 100.0


# ------------------------------------------------------------------------------------------- the default


def _own_hardware(raw: dict) -> dict:
    """``raw`` with its hardware spelled out part by part, without the cluster preset (whose store is its activation
    servers): a scenario that leaves the store out then gets the model's own default."""
    hw = {k: v for k, v in raw["hardware"].items() if k != "activation_store"}
    hw.update(preset=None, wafer={"preset": "wse2", **hw["wafer"]}, memoryx={"preset": "memoryx-12tb", **hw["memoryx"]},
              swarmx={"preset": "swarmx-1to4", **hw["swarmx"]})
    return {**raw, "hardware": hw}


def test_the_default_store_is_the_store_left_out():
    """Left out of a hardware without a cluster preset, given empty, or the host-unlimited preset: the same Result
    (the scenario keeps its hash); left out, it stays out of result.json."""
    omitted = wss.simulate(_own_hardware(_raw("offload")))
    empty = wss.simulate({**_own_hardware(_raw("offload")),
                          "hardware": {**_own_hardware(_raw("offload"))["hardware"], "activation_store": {}}})
    assert omitted.to_json() == empty.to_json()
    assert scenario_hash(omitted.scenario) == scenario_hash(empty.scenario)
    preset = json.loads(wss.simulate(_raw("offload", store={"preset": "host-unlimited"})).to_json())
    assert preset["scenario"]["hardware"]["activation_store"]["name"] == "host-unlimited"
    data = json.loads(omitted.to_json())
    assert "activation_store" not in data["scenario"]["hardware"]
    preset["scenario"], data["scenario"] = {}, {}
    assert preset == data
    assert not any("store" in k or "ports" in k for k in omitted.utilisation)


def test_a_cluster_presets_store_is_its_activation_servers_and_a_move_to_memoryx_leaves_their_rate():
    """The cluster presets name the activation servers (each wafer's own store, at the calibrated rate); a store moved
    to MemoryX, in the file or by --set, keeps neither their rate nor their name, and a rate given with the move is
    refused (it applies to a host store only)."""
    s = wss.load_scenario(SCENARIOS / "gpt3_175b.yaml")
    store = s.hardware.activation_store
    assert (store.name, store.location, store.is_per_wafer) == ("activation-servers", "host", True)
    assert store.bandwidth_Bps and store.bandwidth_Bps > 1e9
    for moved in (wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", {"hardware.activation_store.location": "memoryx"}),
                  wss.load_scenario(_raw("offload", store={"location": "memoryx"}))):  # over the cluster's servers
        assert moved.hardware.activation_store.location == "memoryx"
        assert moved.hardware.activation_store.bandwidth_Bps is None
        assert moved.hardware.activation_store.name == "activation-store"
    with pytest.raises(wss.ScenarioError, match="bandwidth_Bps applies to location 'host' only"):
        wss.load_scenario(SCENARIOS / "gpt3_175b.yaml", {"hardware.activation_store.location": "memoryx",
                                                         "hardware.activation_store.bandwidth_Bps": 1e10})


# ------------------------------------------------------------------------------------------- closed forms


@pytest.mark.parametrize("bandwidth", [1e8, 1e9])
def test_a_host_store_slower_than_the_edge_costs_its_bytes_over_its_bandwidth(bandwidth):
    """Every part ideal but the store: each block input goes in during the forward pass and comes back during
    the backward one, each at the store's rate, so offloading adds the bytes both ways over its bandwidth."""
    off = wss.simulate(_raw("offload", store={"bandwidth_Bps": bandwidth}))
    blk = wss.simulate(_raw("blocks"))
    returned = off.link_bytes["activations->wafer"].per_link_bytes
    assert returned == pytest.approx(2 * ACT)
    assert off.step_time_s - blk.step_time_s == pytest.approx(2 * returned / bandwidth, rel=0.05)
    assert off.utilisation["activations.store"] == pytest.approx(1.0, abs=0.05)
    assert off.bound_by == "offload"


@pytest.mark.parametrize("wafers", [1, 4])
def test_memoryx_gives_each_wafer_a_share_of_the_network_the_stream_leaves(wafers):
    """MemoryX's network binds (the step streams at its rate): block inputs going in use the ports the gradients
    leave free in the forward pass, but coming back they share the stream's ports with every other wafer's, so
    offloading adds every wafer's returned bytes over the network."""
    net = 1e9
    hw = {"memoryx": {"network_bandwidth_Bps": net / 12}}  # 12 shards: 1 GB/s in all
    off = wss.simulate(_raw("offload", wafers, store={"location": "memoryx"}, **hw))
    blk = wss.simulate(_raw("blocks", wafers, **hw))
    returned = off.link_bytes["activations->wafer"].per_link_bytes
    assert off.step_time_s - blk.step_time_s == pytest.approx(wafers * returned / net, rel=0.05)
    assert off.utilisation["memoryx.ports.out"] == pytest.approx(1.0, abs=0.05)


@pytest.mark.parametrize("store", [{"location": "memoryx"}, {"bandwidth_Bps": 3e8}], ids=["memoryx", "host"])
def test_unfolded_gives_the_folded_answer_with_a_limited_store(store):
    hw = {"memoryx": {"network_bandwidth_Bps": 2e8 / 12}}
    raw = _raw("offload", 4, store=store, **hw)
    _assert_same_answer(*_both(raw))


# --------------------------------------------------------------------------------------------- the room


def test_a_host_store_too_small_for_a_micro_batch_is_refused_before_the_run():
    need = ACT  # one micro-batch of 8 samples on one wafer
    fits = wss.load_scenario(_raw("offload", store={"capacity_bytes": need}))
    assert wss.plan(fits).checkpointing == "offload"
    small = wss.load_scenario(_raw("offload", store={"capacity_bytes": need - 1}))
    with pytest.raises(InfeasibleError) as exc:
        wss.plan(small)
    problem = exc.value.problems[0]
    assert problem.path == "hardware.activation_store.capacity_bytes"
    assert "8 samples" in problem.message and "1.05 MB" in problem.message
    auto = wss.plan(wss.load_scenario(small, ["training.activation_checkpointing=auto"]))
    assert auto.checkpointing != "offload"


def test_memoryx_without_dram_to_spare_is_refused_and_auto_does_without(tmp_path, capsys):
    """GPT 1T fills MemoryX's DRAM with its state: no room for 192 wafers' block inputs."""
    source = SCENARIOS / "gpt_1t.yaml"
    memoryx = wss.load_scenario(source, ["hardware.activation_store.location=memoryx"])
    assert wss.plan(memoryx).checkpointing == "blocks"
    assert main(["validate", str(source), "--set", "hardware.activation_store.location=memoryx",
                 "--set", "training.activation_checkpointing=offload"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:")
    assert "hardware.activation_store.location" in err[0] and "2.58 TB" in err[0] and "192 wafers" in err[0]


def test_memoryx_takes_no_host_fields():
    with pytest.raises(wss.ScenarioError, match="bandwidth_Bps applies to location 'host' only"):
        wss.load_scenario(_raw("offload", store={"location": "memoryx", "bandwidth_Bps": 1e9}))


# ------------------------------------------------------------------------------------ planner and estimate


def test_with_memoryx_as_the_store_auto_prefers_blocks_and_the_simulator_agrees():
    """Cerebras-GPT 13B offloads with a store that keeps up with the wafer's edge; with MemoryX as the store its 16
    wafers' block inputs share MemoryX's network, and the planner chooses 'blocks' instead: the simulator agrees it
    is faster."""
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", ["hardware.activation_store.location=memoryx"])
    ranked = rank_candidates(s)
    assert ranked[0].checkpointing == "blocks"
    offload = min((c for c in ranked if c.checkpointing == "offload"), key=lambda c: c.step_time_s)
    chosen = wss.simulate(s).step_time_s
    assert chosen < wss.simulate(forced_scenario(s, offload)).step_time_s
    unlimited = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",
                                  ["hardware.activation_store.preset=host-unlimited"])
    assert rank_candidates(unlimited)[0].checkpointing == "offload"


@pytest.mark.parametrize("store", [{"location": "memoryx"}, {"bandwidth_Bps": 1e8}, {"bandwidth_Bps": 3e7}],
                         ids=["memoryx", "host-hidden-in-part", "host-bound"])
def test_the_estimate_and_the_planner_price_the_store_as_the_simulator_runs_it(store):
    """The closed forms give each direction its phase's time (the forward pass going in, the backward sweep
    coming back); the simulator also overlaps the last block's input with the rest of the forward pass, so a
    store about as fast as the phases is priced a little high (8% here), and the extremes closely."""
    hw = {"memoryx": {"network_bandwidth_Bps": 1e9 / 12}}
    raw = _raw("offload", 4, store=store, **hw)
    sim = wss.simulate(raw).step_time_s
    blocks = wss.simulate(_raw("blocks", 4, **hw)).step_time_s
    assert sim > 1.05 * blocks  # the store costs time: the closed forms must see it
    assert wss.estimate(raw).step_time_s == pytest.approx(sim, rel=0.1)
    assert rank_candidates(wss.load_scenario(raw))[0].step_time_s == pytest.approx(sim, rel=0.1)


def test_summary_and_validate_say_where_block_inputs_go(capsys):
    source = SCENARIOS / "cerebras_gpt_13b.yaml"
    assert main(["validate", str(source), "--set", "training.activation_checkpointing=offload"]) == 0
    assert "block inputs to each wafer's hosts at 25 GB/s both ways together" in capsys.readouterr().out
    assert main(["validate", str(source), "--set", "hardware.activation_store.preset=host-unlimited"]) == 0
    assert "block inputs to each wafer's hosts, as fast as the wafer's edge" in capsys.readouterr().out
    assert main(["simulate", str(source), "--set", "hardware.activation_store.location=memoryx",
                 "--set", "training.activation_checkpointing=offload"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.strip().startswith("offload ") and "block inputs" in x)
    assert "to MemoryX" in line and "300 GB/s" in line and "16 wafers" in line and "busy" in line


@pytest.mark.parametrize("store", ["hardware.activation_store.location=memoryx",
                                   "hardware.activation_store.bandwidth_Bps=2e9"], ids=["memoryx", "host"])
def test_micro_batches_and_steps_fold_with_a_limited_store(store):
    """Cerebras-GPT 13B cut to 16 of its 40 blocks on 2 wafers, 7 micro-batches and 7 steps with a limited store
    (the host one binds the step; MemoryX shares its ports with the stream): folded (5 of each simulated, 2 copies
    of each; 7 is the fewest that fold, and more copies only repeat the checked period) as simulating every one,
    the store's intake and transfers checked to repeat.  16 blocks take the 40's path (the blocks' fold is tried
    and its check fails on the same queue, then micro-batches and steps fold) at under a third of its events."""
    s = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", [
        "hardware.wafers=2", "training.global_batch=28", "training.micro_batch=2", "training.steps=7",
        "workload.model.layers.1.repeat=16", "training.activation_checkpointing=offload", store])
    folded = wss.simulate(s)
    assert folded.cluster["micro_batches_simulated"] == 5 and folded.cluster["steps_simulated"] == 5
    if "bandwidth" in store:
        assert folded.breakdown_s["offload"] > 0.5 * folded.step_time_s
    else:
        assert folded.utilisation["memoryx.ports.out"] > 0.3
    every = wss.simulate(wss.load_scenario(s, ["simulation.fold_micro_batches=false"]))
    assert folded.step_time_s == pytest.approx(every.step_time_s, rel=1e-9)
    for c, v in every.breakdown_s.items():
        assert folded.breakdown_s[c] == pytest.approx(v, rel=1e-9, abs=1e-9 * every.step_time_s), c
    assert folded.utilisation["activations.store"] == pytest.approx(every.utilisation["activations.store"], rel=1e-9)


def test_the_summary_gives_memoryx_store_rate_as_the_run_has_it():
    """With the store on MemoryX, the plan's summary gives MemoryX's network as the run has it: a shard at half
    its network rate halves it for all (the shards added up at the slowest's), not the configured figure."""
    from wss.model.machine.memoryx_rates import memoryx_rates
    from wss.views.summary import format_plan, si

    sets = {"training.activation_checkpointing": "offload", "hardware.activation_store.location": "memoryx"}
    base = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml", sets)
    slow = wss.load_scenario(SCENARIOS / "cerebras_gpt_13b.yaml",
                             {**sets, "faults.shards": [{"shard": 0, "network_factor": 0.5}]})
    assert memoryx_rates(slow).network_Bps == 0.5 * memoryx_rates(base).network_Bps
    for s in (base, slow):
        assert f"its network, {si(memoryx_rates(s).network_Bps, 'B/s')} each way" in format_plan(wss.plan(s))
