"""The validation suite: every case passes, docs/validation.md is current, the format is checked."""

from __future__ import annotations

import importlib.util
import re
from collections import Counter

import pytest
from fidelity_helpers import REPO

from wss.errors import ScenarioError
from wss.studies.validation import METRICS, default_directory, judge, load_case, load_cases, reproduce


@pytest.fixture(scope="module")
def outcomes():
    return reproduce()


def test_cases_live_in_scenarios_validation():
    assert default_directory() == REPO / "scenarios" / "validation"
    assert len(load_cases()) >= 10


def test_every_case_passes_or_is_a_known_gap(outcomes):
    failed = [(o.case.name, o.simulated, o.case.spec.published) for o in outcomes if o.failed]
    assert not failed
    for o in outcomes:  # a gap is explained, and one that closed must lose its known_gap
        assert (o.status == "gap") == (bool(o.case.spec.known_gap) and not o.passed), o.case.name
        if o.case.spec.known_gap:
            assert not o.passed, f"{o.case.name} passes now: remove its known_gap"


#: Every published measured training run wss reproduces (ALCF AI Testbed and workshop logs, the DABench logs, the
#: HPEC 2024 benchmark's Table IV), by row; the BERT fine-tuning rows have a case per global batch.
MEASURED_ROWS = {**dict.fromkeys(range(1, 14), 1), 14: 7, 15: 7}


def test_every_published_measured_run_is_a_case(outcomes):
    """Every published measured training run is a case (one per batch where a row has several), each with its
    calibration role."""
    measured = [o for o in outcomes if o.case.name.startswith("measured_")]
    rows = Counter(int(re.match(r"measured_m(\d+)_", o.case.name).group(1)) for o in measured)
    assert rows == MEASURED_ROWS
    assert all(o.case.spec.metric == "samples_per_s" and o.case.spec.calibration for o in measured)
    fitted = [o for o in measured if o.case.spec.calibration == "calibrated on"]
    # A fit that misses its own rows by half is no fit (one calibration row is a known gap at about +33%).
    assert fitted and all(abs(o.error) < 0.5 for o in fitted)
    assert sum(o.passed for o in fitted) >= 2
    assert any(o.case.spec.calibration == "held out" for o in measured)


def test_every_case_is_sourced_and_explained(outcomes):
    for o in outcomes:
        s = o.case.spec
        assert s.source.strip() and s.figure.strip() and s.note.strip(), o.case.name
        assert s.metric in METRICS


def test_validation_doc_is_generated_from_the_cases(outcomes):
    spec = importlib.util.spec_from_file_location("gen_validation_doc", REPO / "tools" / "gen_validation_doc.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (REPO / "docs" / "validation.md").read_text(encoding="utf-8") == gen.render(outcomes), (
        "docs/validation.md is stale: run python tools/gen_validation_doc.py"
    )


def _write(tmp_path, text: str):
    p = tmp_path / "case.yaml"
    p.write_text(text, encoding="utf-8")
    return p


SCENARIO = """
scenario:
  name: tiny
  hardware: {preset: cs2-cluster, wafers: 1}
  workload: {model: fc-mnist}
  training: {global_batch: 4}
"""


@pytest.mark.parametrize(
    "head, problem",
    [
        ("figure: x\nsource: y\npublished: 1\nmetric: nope\ncompare: approx\ntolerance: 0.1\n", "unknown metric"),
        ("figure: x\nsource: y\npublished: 1\nmetric: params\n", "needs a tolerance"),
        ("figure: x\nsource: y\npublished: 1\nmetric: params\ncompare: '<'\ntolerance: 0.1\n", "takes no tolerance"),
        ("figure: x\nsource: y\npublished: 1\nmetric: params\ncompare: approx\ntolerance: 0.1\ncolour: red\n",
         "Extra inputs"),
        ("figure: x\nsource: y\npublished: 1\nmetric: params\ncompare: '<'\n"
         "other_side: {compare: '<=', value: 0, source: z}\n", "bound the other way"),
        ("figure: x\nsource: y\npublished: 1\nmetric: params\ncompare: approx\ntolerance: 0.1\n"
         "other_side: {compare: '>=', value: 0, source: z}\n", "takes no other_side"),
    ],
)
def test_bad_cases_name_the_problem(tmp_path, head, problem):
    with pytest.raises(ScenarioError, match=problem):
        load_case(_write(tmp_path, head + SCENARIO))


def test_scenario_errors_name_the_case_and_field(tmp_path):
    text = "figure: x\nsource: y\npublished: 1\nmetric: params\ncompare: approx\ntolerance: 0.1\n" + SCENARIO.replace(
        "wafers: 1", "wafers: -1"
    )
    with pytest.raises(ScenarioError, match=r"case\.yaml.*hardware\.wafers"):
        load_case(_write(tmp_path, text))


def test_like_references_and_paths(tmp_path):
    text = """
figure: x
source: y
published: 1
metric: scaling_efficiency
args: {base: a, scaled: b}
compare: '>='
scenarios:
  a: {path: %s, set: {hardware.wafers: 1, training.global_batch: 4}}
  b: {like: a, set: {hardware.wafers: 2, training.global_batch: 8}}
  c: {like: d}
  d: {like: c}
""" % (REPO / "scenarios" / "fc_mnist.yaml")
    with pytest.raises(ScenarioError, match="cycle"):
        load_case(_write(tmp_path, text))
    case = load_case(_write(tmp_path, text.split("  c:")[0]))
    assert case.scenarios["a"].hardware.wafers == 1
    assert case.scenarios["b"].hardware.wafers == 2 and case.scenarios["b"].training.global_batch == 8


def test_judging():
    from wss.studies.validation import CaseSpec

    base = {"figure": "x", "source": "y", "published": 2.0, "metric": "params", "scenario": {}}
    approx = CaseSpec(**base, compare="approx", tolerance=0.1)
    assert judge(approx, 2.1) == (pytest.approx(0.05), True)
    assert judge(approx, 2.3)[1] is False
    assert judge(CaseSpec(**base, compare="<"), 1.9)[1] is True
    assert judge(CaseSpec(**base, compare=">="), 1.9)[1] is False


def test_a_case_bounded_from_both_sides_fails_on_either():
    from wss.studies.validation import CaseSpec

    spec = CaseSpec(figure="x", source="y", published=10.0, metric="params", scenario={}, compare="<=",
                    other_side={"compare": ">=", "value": 2.0, "source": "z"})
    assert judge(spec, 5.0)[1] is True
    assert judge(spec, 11.0)[1] is False  # above the published figure
    assert judge(spec, 1.5)[1] is False  # below the other side's bound
    assert judge(spec, 2.0)[1] is True


def test_every_sparsity_case_is_bounded_from_both_sides():
    for case in load_cases():
        if case.name.startswith("sparsity_"):
            assert case.spec.other_side is not None, case.name
            assert case.spec.other_side.source.strip(), case.name
