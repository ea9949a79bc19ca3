"""The runtime's fixed time per kernel update on MemoryX (``hardware.runtime.update_overhead_s``).

Each update job takes its work (DRAM, flash, FLOPs side by side) and then the fixed time, one job at a time, so a
step of many kernels and little work waits for their sum, and the analytic level prices it as the simulator runs
it.  Gradient accumulation and the global norm's jobs do not pay it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import wss
from wss.model.machine.memoryx_rates import memoryx_rates
from wss.model.machine.optimizer_costs import job_seconds
from wss.model.simulate import simulate_detailed
from wss.studies.estimate import estimate

ROOT = Path(__file__).resolve().parents[2]
U = 1e-3


def _fc_mnist(u: float, **over: object) -> wss.Scenario:
    return wss.load_scenario(ROOT / "scenarios" / "fc_mnist.yaml", overrides={
        "hardware.wafers": 1, "hardware.runtime.update_overhead_s": u, **over})


def test_it_is_serialised_only_when_set():
    """Scenarios without it keep their serialised form (and hash); one with it keeps it through a round trip."""
    plain = _fc_mnist(0.0)
    assert "update_overhead_s" not in plain.model_dump(mode="json")["hardware"]["runtime"]
    costly = _fc_mnist(U)
    dumped = costly.model_dump(mode="json")
    assert dumped["hardware"]["runtime"]["update_overhead_s"] == U
    assert wss.load_scenario(dumped).hardware.runtime.update_overhead_s == U
    assert not costly.hardware.runtime.is_ideal


def test_every_update_takes_its_work_and_then_the_fixed_time():
    """On FC-MNIST in two micro-batches without clipping (jobs of microseconds in the backward passes, nothing
    contending for MemoryX's DRAM), each update lasts its work with MemoryX to itself plus the fixed time, and each
    accumulation its work alone.  (With clipping the updates run beside the next step's stream, which shares the
    DRAM.)"""
    scenario = _fc_mnist(U, **{"training.micro_batch": 32, "training.gradient_clipping": "none"})
    result, cluster = simulate_detailed(scenario, record=False)
    rates, opt = memoryx_rates(scenario), cluster.optimizer
    jobs = [j for j in opt.jobs if not j.stand_in]
    assert {j.kind for j in jobs} == {"update", "accumulate"}
    for job in jobs:
        work = job_seconds(job.traffic, rates.dram_Bps, rates.flash_read_Bps, rates.flash_write_Bps,
                           rates.optimizer_flops)[0]
        fixed = U if job.kind == "update" else 0.0
        assert job.end - job.start == pytest.approx(work + fixed, rel=1e-9, abs=1e-12)
    assert result.step_time_s > 0


def test_a_small_step_of_many_kernels_waits_for_their_sum():
    """FC-MNIST's step is about 0.1 ms of work: at 1 ms an update it grows by nearly its three updates' sum, since
    the next step's first passes need their kernels updated and the updates run one at a time."""
    base, costly = wss.simulate(_fc_mnist(0.0)), wss.simulate(_fc_mnist(U))
    kernels = 3
    grown = costly.step_time_s - base.step_time_s
    assert kernels * U - base.step_time_s <= grown <= kernels * U + 1e-9


@pytest.mark.parametrize(("path", "over"), [
    ("scenarios/validation/base/bert_base_sst2_1xcs2.yaml", {"training.global_batch": 128}),
    ("scenarios/validation/base/bert_large_sst2_1xcs2.yaml",
     {"training.global_batch": 128, "training.gradient_clipping": "global_norm"}),
    ("scenarios/gpt3_175b.yaml", {}),
])
def test_the_planner_prices_it_as_the_simulator_runs_it(path, over):
    """BERT-base at batch 128 (updates in the backward passes' order, mostly hidden under them), BERT-large with
    global-norm clipping (every update after the last gradient, ahead of the next forward passes) and GPT-3 175B on
    192 wafers (blocks folded: the folded blocks' updates pay it too): the analytic step equals the simulated one,
    and the cost lengthens each (measured: at most 1.1e-6 apart)."""
    base = wss.load_scenario(ROOT / path, overrides=over)
    costly = wss.load_scenario(ROOT / path, overrides={**over, "hardware.runtime.update_overhead_s": 9e-4})
    sim, est = wss.simulate(costly), estimate(costly)
    assert est.step_time_s == pytest.approx(sim.step_time_s, rel=1e-5)
    assert sim.step_time_s > wss.simulate(base).step_time_s


def test_layer_folding_keeps_it_exact():
    """GPT-3 175B on 192 wafers at 1 ms an update: the folded blocks' updates stand in the optimizer's queue as
    their kernels' own, so the folded run gives every number of the run that simulates every block."""
    s = wss.load_scenario(ROOT / "scenarios" / "gpt3_175b.yaml", overrides={"hardware.runtime.update_overhead_s": U})
    folded = simulate_detailed(s, record=False)[0]
    full = simulate_detailed(s, record=False, fold_layers=False)[0]
    assert folded.step_time_s == pytest.approx(full.step_time_s, rel=1e-9)
    for cause, seconds in full.breakdown_s.items():
        assert folded.breakdown_s[cause] == pytest.approx(seconds, rel=1e-9, abs=1e-12)


def test_the_global_norms_jobs_do_not_pay_it():
    """With clipping, the first step's norm jobs (as each gradient arrives, before any update) last what they last
    without the cost, to the bit; its updates each last the fixed time more than their work."""
    runs = [simulate_detailed(_fc_mnist(u, **{"training.gradient_clipping": "global_norm"}), record=False)[1]
            for u in (0.0, U)]
    norms = [[j.end - j.start for j in c.optimizer.jobs if j.kind == "norm" and j.step == 0] for c in runs]
    assert norms[0] and norms[0] == norms[1]
    updates = [j for j in runs[1].optimizer.jobs if j.kind == "update"]
    assert updates and all(j.end - j.start >= U for j in updates)
