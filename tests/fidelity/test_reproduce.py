"""The validation suite: every case passes, docs/validation.md is current, the format is checked."""

from __future__ import annotations

import re
from collections import Counter
from functools import cache

import pytest
from fidelity_helpers import REPO, load_tool

from wss.errors import ScenarioError
from wss.studies.validation import METRICS, Outcome, default_directory, judge, load_case, load_cases, run_case

#: Every shipped case, by name (its file's stem), in the order ``wss reproduce`` runs them.
CASES = sorted(p.stem for p in (REPO / "scenarios" / "validation").glob("*.yaml"))
#: The runs of the cases this worker has run, shared by identical scenarios as :func:`reproduce` shares them.
_RUNS: dict = {}


@cache
def _outcome(name: str) -> Outcome:
    return run_case(load_case(default_directory() / f"{name}.yaml"), _RUNS)


@pytest.fixture(scope="module", params=CASES)
def outcome(request: pytest.FixtureRequest) -> Outcome:
    """One case's outcome, as :func:`reproduce` gives it.  One case per parameter, so the test workers share
    the cases; module scope makes pytest run each case's tests together, on one worker."""
    return _outcome(request.param)


GEN = load_tool("gen_validation_doc")
TRUST = load_tool("trust_table")
DOC = (REPO / "docs" / "validation.md").read_text(encoding="utf-8")
STALE = "docs/validation.md is stale: run python tools/gen_validation_doc.py"


def test_cases_live_in_scenarios_validation():
    assert default_directory() == REPO / "scenarios" / "validation"
    assert [c.name for c in load_cases()] == CASES  # what the cases below run is what reproduce runs
    assert len(CASES) >= 10


def test_every_case_passes_or_is_a_known_gap(outcome):
    o = outcome
    assert not o.failed, (o.case.name, o.simulated, o.case.spec.published)
    # a gap is explained, and one that closed must lose its known_gap
    assert (o.status == "gap") == (bool(o.case.spec.known_gap) and not o.passed), o.case.name
    if o.case.spec.known_gap:
        assert not o.passed, f"{o.case.name} passes now: remove its known_gap"


#: Every published measured training run wss reproduces (ALCF AI Testbed and workshop logs, the DABench logs, the
#: HPEC 2024 benchmark's Table IV), by row; the BERT fine-tuning rows have a case per global batch.  The runs the
#: measurement table gives without a row number (the small-batch floor of the ALCF FC-MNIST logs) by name.
MEASURED_ROWS = {**dict.fromkeys(range(1, 14), 1), 14: 7, 15: 7, "fc_mnist_floor_cs2": 1}


def test_every_published_measured_run_is_a_case():
    """Every published measured training run is a case (one per batch where a row has several), each with its
    calibration role; of the fitted rows at least two pass (docs/validation.md's table, whose every row is
    checked against its case's outcome below)."""
    measured = [c for c in load_cases() if c.name.startswith("measured_")]
    numbered = [(re.match(r"measured_m(\d+)_", c.name), c.name) for c in measured]
    rows = Counter(int(m.group(1)) if m else name.removeprefix("measured_") for m, name in numbered)
    assert rows == MEASURED_ROWS
    assert all(c.spec.metric == "samples_per_s" and c.spec.calibration for c in measured)
    fitted = {c.name for c in measured if c.spec.calibration == "calibrated on"}
    assert fitted
    assert any(c.spec.calibration == "held out" for c in measured)
    _, _, statuses, _ = GEN.parts(DOC)
    assert sum(status == "pass" for name, status in zip(CASES, statuses, strict=True) if name in fitted) >= 2


def test_a_fitted_measured_run_is_within_half(outcome):
    """A fit that misses its own rows by half is no fit (one calibration row is a known gap at about +33%)."""
    if outcome.case.name.startswith("measured_") and outcome.case.spec.calibration == "calibrated on":
        assert abs(outcome.error) < 0.5


def test_every_case_is_sourced_and_explained(outcome):
    s = outcome.case.spec
    assert s.source.strip() and s.figure.strip() and s.note.strip(), outcome.case.name
    assert s.metric in METRICS


def test_validation_doc_is_made_of_the_cases_parts():
    """docs/validation.md is what the generator assembles from its rows, sections and statuses, one per case; the
    test below checks each case's against its outcome, so together they check the page is
    ``gen_validation_doc.render(reproduce())``."""
    rows, sections, statuses, trust = GEN.parts(DOC)
    assert len(rows) == len(sections) == len(statuses) == len(CASES)
    assert GEN.assemble(rows, sections, statuses, trust) == DOC, STALE


def _trust_rows() -> list[str]:
    """The measured rows' lines of the doc's "Where to trust wss" table."""
    lines = GEN.parts(DOC)[3].splitlines()
    start = lines.index(TRUST.TABLE_HEAD[1]) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


def test_the_trust_section_is_framed_by_the_cases_regimes():
    """Around its measured rows (each checked against its case's outcome below), the "Where to trust wss"
    section is what the measured cases' regimes give: the shipped scenarios set against them."""
    measured = sorted((c for c in load_cases() if c.name.startswith("measured_")), key=lambda c: TRUST._row_key(c.name))
    rows = _trust_rows()
    assert len(rows) == len(measured), STALE
    assert TRUST.frame(rows, [TRUST.case_regime(c) for c in measured]) == GEN.parts(DOC)[3], STALE


def test_validation_doc_is_generated_from_the_cases(outcome):
    rows, sections, statuses, _ = GEN.parts(DOC)
    i = CASES.index(outcome.case.name)
    assert rows[i] == GEN.table_row(outcome), STALE
    assert sections[i] == GEN.section(outcome), STALE
    assert statuses[i] == outcome.status, STALE
    if outcome.case.name.startswith("measured_"):
        assert TRUST.measured_row(outcome, TRUST.leave_one_out()) in _trust_rows(), STALE


def test_reproduce_runs_every_case_in_order_sharing_runs(monkeypatch):
    """``reproduce()`` runs every shipped case (the cases above, one by one), in order, with one cache of runs,
    and reports its progress from 0 to 1."""
    import wss.studies.validation as validation

    seen: list[tuple[str, int]] = []

    def run(case, cache):
        seen.append((case.name, id(cache)))
        return Outcome(case, 1.0, 0.0, True, 0.0)

    monkeypatch.setattr(validation, "run_case", run)
    progress: list[float] = []
    outcomes = validation.reproduce(progress=progress.append)
    assert [o.case.name for o in outcomes] == [name for name, _ in seen] == CASES
    assert len({cache for _, cache in seen}) == 1
    assert progress == [i / len(CASES) for i in range(len(CASES))] + [1.0]


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
