"""The pytest plugin: the ``wss_timing`` fixture, ``--wss-baselines`` and ``--wss-update-baselines``.

Inner test sessions run in-process with pytester.  They load the plugin with ``-p wss.pytest_plugin``
(and ``-p no:wss``, so the ``pytest11`` entry point, once installed, does not register it twice).
Hypothesis' plugin is left out of the inner sessions: its terminal summary imports all of hypothesis
again in every in-process session, seconds each.
"""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import numpy  # noqa: F401  (see below)
import pytest
from check_helpers import FC_MNIST, edit_metrics

import wss.studies.check  # noqa: F401  (see below)

# numpy is imported here, before any inner session: `import wss` no longer loads it, and pytester drops
# the modules an in-process session imported, while numpy's C core cannot be loaded twice in one process.
# wss.studies.check too, which the plugin imports only when a check runs: else every inner session would
# import it (and the simulator) anew.

# Here, not in tests/check/conftest.py: pytest refuses pytest_plugins in a conftest below the top level.
pytest_plugins = ["pytester"]

NO_HYPOTHESIS = ("-p", "no:hypothesispytest")
PLUGIN = (*NO_HYPOTHESIS, "-p", "no:wss", "-p", "wss.pytest_plugin")

INNER = """
def test_fc_mnist(wss_timing):
    comparison = wss_timing.check("scenarios/fc_mnist.yaml", rtol=0.01)
    assert comparison.ok and comparison.rows  # a Comparison in both modes (docs/ci.md)
"""


def _entry_point_installed() -> bool:
    return any(ep.name == "wss" and ep.value == "wss.pytest_plugin"
               for ep in importlib.metadata.entry_points(group="pytest11"))


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    """An inner project: scenarios/fc_mnist.yaml and a test using wss_timing (no baseline yet)."""
    (pytester.path / "scenarios").mkdir()
    (pytester.path / "scenarios" / "fc_mnist.yaml").write_text(FC_MNIST.read_text(encoding="utf-8"), encoding="utf-8")
    pytester.makepyfile(test_inner_timing=INNER)
    return pytester


def _baseline(project: pytest.Pytester, folder: str = "baselines") -> Path:
    return project.path / folder / "fc_mnist.json"


def test_update_records_then_check_passes(project: pytest.Pytester):
    result = project.runpytest(*PLUGIN, "--wss-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*wss timing*", f"updated {_baseline(project)}"])
    recorded = _baseline(project).read_bytes()
    assert json.loads(recorded)["scenario_file"] == "fc_mnist.yaml"

    project.runpytest(*PLUGIN).assert_outcomes(passed=1)
    assert _baseline(project).read_bytes() == recorded  # checking never writes


def test_regression_fails_with_the_table(project: pytest.Pytester):
    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    edit_metrics(_baseline(project), step_time_s=0.5, samples_per_s=2.0)
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*wss timing of scenarios/fc_mnist.yaml regressed (2 of 38 metrics beyond tolerance):*",
        "*metric*baseline*now*change*tolerance*verdict*",
        "*samples_per_s *-50.00%*±1%*REGRESSED*",
        "*step_time_s *+100.00%*±1%*REGRESSED*",
    ])
    assert "Traceback" not in result.stdout.str()

    # Re-recording on purpose brings it back.
    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    project.runpytest(*PLUGIN).assert_outcomes(passed=1)


def test_update_returns_the_comparison_with_the_new_baseline_and_lists_what_moved(project: pytest.Pytester):
    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    edit_metrics(_baseline(project), step_time_s=0.5)
    project.makepyfile(test_inner_timing="""
def test_fc_mnist(wss_timing):
    comparison = wss_timing.check("scenarios/fc_mnist.yaml", rtol=0.01)
    assert comparison.ok and not comparison.notable and len(comparison.rows) == 38
    assert comparison.scenario.endswith("fc_mnist.yaml")
""")
    result = project.runpytest(*PLUGIN, "--wss-update-baselines")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*wss timing*",
        f"updated {_baseline(project)} (1 of 38 metrics moved beyond tolerance)",
        "*step_time_s *+100.00%*",
    ])
    project.runpytest(*PLUGIN).assert_outcomes(passed=1)


def test_improvement_passes_and_is_listed_in_the_summary(project: pytest.Pytester):
    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    edit_metrics(_baseline(project), step_time_s=2.0)
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*wss timing*",
        "scenarios/fc_mnist.yaml: better or changed beyond tolerance (not a failure); "
        "refresh with --wss-update-baselines",
        "*step_time_s *-50.00%*improved: refresh the baseline",
    ])


def test_missing_and_stale_baselines_fail_with_the_message(project: pytest.Pytester):
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*wss timing: no baseline for *fc_mnist.yaml: *fc_mnist.json does not exist*"])

    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    scenario = project.path / "scenarios" / "fc_mnist.yaml"
    scenario.write_text(scenario.read_text(encoding="utf-8").replace("steps: 3", "steps: 2"), encoding="utf-8")
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*wss timing: *fc_mnist.json is stale*training.steps: 3 -> 2*--update*"])


def test_baselines_folder_from_option_and_ini(project: pytest.Pytester):
    project.runpytest(*PLUGIN, "--wss-baselines", "from_option", "--wss-update-baselines").assert_outcomes(passed=1)
    assert _baseline(project, "from_option").is_file() and not _baseline(project, "baselines").exists()

    project.makeini("[pytest]\nwss_baselines = from_ini\n")
    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    assert _baseline(project, "from_ini").is_file()
    project.runpytest(*PLUGIN).assert_outcomes(passed=1)
    # The command line wins over the ini file.
    project.runpytest(*PLUGIN, "--wss-baselines", "nowhere").assert_outcomes(failed=1)


def test_misspelt_metric_tolerance_fails(project: pytest.Pytester):
    project.runpytest(*PLUGIN, "--wss-update-baselines").assert_outcomes(passed=1)
    project.makepyfile(test_inner_timing="""
def test_fc_mnist(wss_timing):
    wss_timing.check("scenarios/fc_mnist.yaml", metric_tolerances={"step_tme_s": 0.1})
""")
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*metric_tolerances key(s) step_tme_s match no metric*"])


def test_help_lists_the_options(pytester: pytest.Pytester):
    result = pytester.runpytest(*PLUGIN, "--help")
    result.stdout.fnmatch_lines(["*--wss-baselines=DIR*", "*--wss-update-baselines*", "*wss_baselines*"])


def test_entry_point_provides_the_fixture(project: pytest.Pytester):
    assert _entry_point_installed(), "the pytest11 entry point 'wss' is not installed (pip install -e .)"
    project.runpytest(*NO_HYPOTHESIS, "--wss-update-baselines").assert_outcomes(passed=1)
    project.runpytest(*NO_HYPOTHESIS).assert_outcomes(passed=1)


def test_two_scenarios_may_not_share_a_baseline_file(pytester: pytest.Pytester):
    for sub in ("a", "b"):
        (pytester.path / sub).mkdir()
        (pytester.path / sub / "small.yaml").write_text(FC_MNIST.read_text(encoding="utf-8"), encoding="utf-8")
    pytester.makepyfile(test_inner_shared="""
def test_a(wss_timing):
    wss_timing.check("a/small.yaml")

def test_b(wss_timing):
    wss_timing.check("b/small.yaml")
""")
    result = pytester.runpytest(*PLUGIN, "--wss-update-baselines")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*would share the baseline file*small.json*distinct file name*"])


def test_a_missing_baseline_fails_with_one_message(project: pytest.Pytester):
    result = project.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*wss timing:*--wss-update-baselines*"])
    assert "During handling of the above exception" not in result.stdout.str()
