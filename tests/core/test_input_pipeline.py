"""The input pipeline (``hardware.input_pipeline``): preparing samples by kind, with the scenario's workers.

One process spends the kind's cost on a sample; a wafer's input workers prepare in ``workers_per_wafer x
max(1, num_workers)`` processes (wss/model/machine/input_rate.py).  The simulated input workers and the analytic
level read that one rate, so an input-bound step is input-bound to both, and the Result says why.
"""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

import wss
from wss.errors import ScenarioError
from wss.model.machine.input_rate import input_transfer_s, preparation, preparation_samples_per_s
from wss.model.scenario.hardware import INPUT_KINDS, InputPipelineConfig
from wss.studies.estimate import estimate
from wss.views.summary import format_result

REPO = Path(__file__).resolve().parents[2]

#: ESM-2 35M, short and small enough to simulate in a second; several micro-batches, three steps.
ESM = {
    "name": "esm-inputs",
    "hardware": {"preset": "cs2-cluster", "wafers": 1,
                 "input_pipeline": {"preset": "masked-tokens", "workers_per_wafer": 1, "num_workers": 0}},
    "workload": {"model": "esm-2-35m"},
    "training": {"global_batch": 512, "seq_len": 512, "micro_batch": 128, "optimizer": "adamw", "steps": 3},
}


def _esm(**overrides: object) -> wss.Scenario:
    return wss.load_scenario(ESM, overrides)


def test_the_kinds_are_the_schemas():
    literal, _none = typing.get_args(InputPipelineConfig.model_fields["kind"].annotation)
    assert set(INPUT_KINDS) == set(typing.get_args(literal))


def test_rate_is_processes_over_one_samples_cost():
    s = _esm()
    cost = s.hardware.input_pipeline.prepare_s_per_token * 512
    assert cost > 0
    prep = preparation(s)
    assert prep is not None and prep.kind == "masked_tokens" and prep.processes == 1 and not prep.capped
    assert prep.samples_per_s == pytest.approx(1 / cost, rel=1e-12)
    # num_workers 0 is the main process: one process, as with one data-loader worker.
    assert preparation_samples_per_s(_esm(**{"hardware.input_pipeline.num_workers": 1})) == prep.samples_per_s
    many = _esm(**{"hardware.input_pipeline.num_workers": 4, "hardware.input_pipeline.workers_per_wafer": 2})
    assert preparation_samples_per_s(many) == pytest.approx(8 / cost, rel=1e-12)
    # The cost per token follows the sequence.
    longer = _esm(**{"training.seq_len": 1024})
    assert preparation_samples_per_s(longer) == pytest.approx(prep.samples_per_s / 2, rel=1e-12)


def test_a_given_samples_per_s_caps_the_pipeline():
    s = _esm(**{"hardware.inputs.samples_per_s": 10.0})
    prep = preparation(s)
    assert prep is not None and prep.capped and prep.samples_per_s == 10.0
    fast = _esm(**{"hardware.inputs.samples_per_s": 1e9})
    assert preparation_samples_per_s(fast) == preparation_samples_per_s(_esm())


def test_no_pipeline_no_limit_and_the_same_hash():
    s = wss.load_scenario(REPO / "scenarios" / "bert_large.yaml")
    assert preparation(s) is None
    assert "input_pipeline" not in s.model_dump()["hardware"]  # scenarios without one keep their hash
    assert "input_pipeline" in _esm().model_dump()["hardware"]
    assert input_transfer_s(10, 100.0, 1000.0, None) == 1.0  # moving only
    assert input_transfer_s(10, 100.0, 1000.0, 2.0) == 5.0  # preparing, the longer


def test_a_kind_prepares_its_models_input():
    with pytest.raises(ScenarioError) as err:
        _esm(**{"hardware.input_pipeline.preset": "image-decode"})
    assert any(p.path == "hardware.input_pipeline.kind" and "image" in p.message for p in err.value.problems)
    with pytest.raises(ScenarioError):
        wss.load_scenario(ESM, {"hardware.input_pipeline": {"prepare_s_per_sample": 1e-3}})  # a cost with no kind


def test_every_preset_is_sourced_or_calibrated():
    for path in sorted((REPO / "configs" / "input_pipeline").glob("*.yaml")):
        text = path.read_text()
        assert "ASSUMPTION" in text or "CALIBRATED on M" in text, path.name
        if "CALIBRATED on" in text:  # checked on another row, or said to be unchecked
            assert "Checked on M" in text or "UNCHECKED" in text, path.name


def test_slow_preparation_bounds_the_simulated_step_and_the_result_says_so():
    s = _esm()
    rate = preparation_samples_per_s(s)
    assert rate is not None
    r = wss.simulate(s)
    assert r.bound_by == "input"
    # Input-bound: the wafer takes samples as fast as one process masks them (less the first step's wait).
    assert r.samples_per_s == pytest.approx(rate, rel=0.15) and r.samples_per_s < rate
    text = format_result(r)
    assert "input-bound" in text and "masked_tokens" in text and "num_workers 0" in text
    # Enough processes and the wafer paces the step again.
    fast = wss.simulate(_esm(**{"hardware.input_pipeline.num_workers": 64}))
    assert fast.bound_by != "input" and fast.samples_per_s > 2 * r.samples_per_s
    assert "input-bound" not in format_result(fast)


@pytest.mark.parametrize("micro_batch", [128, 256])
def test_the_analytic_level_prices_the_same_input_bound(micro_batch):
    """Within 3% of the simulator when input-bound, with two and four micro-batches per step; the later steps'
    first input starts as the wafer begins the last micro-batch, once that one's input is there."""
    s = _esm(**{"training.micro_batch": micro_batch})
    est, sim = estimate(s), wss.simulate(s)
    assert est.bound_by == sim.bound_by == "input"
    assert est.step_time_s == pytest.approx(sim.step_time_s, rel=0.01)  # the contract is 3%; it agrees closer
    assert est.breakdown_s["input"] == pytest.approx(sim.breakdown_s["input"], rel=0.05)


def test_the_verdict_names_the_input_workers_rate():
    from wss.studies.verdict import _attribute

    r = wss.simulate(_esm())
    parts, words = _attribute(r, "input")
    assert parts == ["inputs"] and "prepare" in words and "masked_tokens" in words


def test_tokenising_sst2_is_a_ceiling_bert_base_meets_at_large_batches_and_bert_large_never_does():
    """The SST-2 rows' tokenising pipeline (configs/input_pipeline/text-tokenise.yaml): one process at its cost
    caps BERT-base's rate at large batches, where the wafer alone would run faster, and never keeps BERT-large's
    slower wafer waiting; at a small batch BERT-base's wafer is the slower and the input waits for nothing."""
    base = REPO / "scenarios" / "validation" / "base"
    bert_base = wss.load_scenario(base / "bert_base_sst2_1xcs2.yaml", {"training.global_batch": 4096})
    bert_large = wss.load_scenario(base / "bert_large_sst2_1xcs2.yaml", {"training.global_batch": 1024})
    prep = preparation(bert_base)
    assert prep is not None and prep.kind == "text_tokenise" and prep.processes == 1
    assert bert_base.hardware.input_pipeline.prepare_s_per_sample > 0
    free = {"hardware.input_pipeline.prepare_s_per_sample": 0.0}
    paced, alone = estimate(bert_base), estimate(wss.load_scenario(bert_base.model_dump(mode="json"), free))
    assert paced.breakdown_s["input"] > 0.1 * paced.step_time_s
    assert paced.samples_per_s <= prep.samples_per_s < alone.samples_per_s
    large = estimate(bert_large)
    assert large.breakdown_s["input"] == 0.0 and large.samples_per_s < prep.samples_per_s
    small = estimate(wss.load_scenario(bert_base.model_dump(mode="json"), {"training.global_batch": 512}))
    assert small.breakdown_s["input"] == 0.0
