"""pytest plugin: the ``wss_timing`` fixture checks scenarios against their timing baselines.

::

    def test_gpt3(wss_timing):
        wss_timing.check("scenarios/gpt3_175b.yaml", rtol=0.01)

Scenario paths and the ini option are relative to the rootdir; the baselines
folder comes from ``--wss-baselines DIR`` (relative to the invocation folder),
else the ``wss_baselines`` ini option, else ``baselines/``.  A regression fails
the test with the same table as ``wss check``; a missing or stale baseline
fails it with the message of ``wss check``.  Improvements pass and are listed
in the terminal summary.  ``pytest --wss-update-baselines`` re-records the
baselines instead of comparing; ``check`` then returns the run compared with its
new baseline (every metric ok), and the summary says what moved from the old one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from wss.studies.check import Comparison

# wss.studies.check (and the simulator behind it, numpy and pydantic) is imported where a check runs, not here:
# pytest loads this module through its entry point in every session wherever wss is installed, and marks the
# whole wss package for assertion rewriting, so an import here costs every session over half a second.

__all__ = ["WssTiming", "wss_timing"]

_NOTES = pytest.StashKey[list[str]]()
#: Baseline file -> the scenario that uses it, over the whole session.
_OWNERS = pytest.StashKey[dict[Path, Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("wss", "wss timing-regression checks")
    group.addoption("--wss-baselines", dest="wss_baselines", default=None, metavar="DIR",
                    help="folder of wss baseline files (default: the wss_baselines ini option, else baselines/)")
    group.addoption("--wss-update-baselines", dest="wss_update_baselines", action="store_true", default=False,
                    help="re-record the wss baselines the wss_timing fixture checks instead of comparing")
    parser.addini("wss_baselines", "folder of wss baseline files, relative to the rootdir", default="baselines")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_NOTES] = []
    config.stash[_OWNERS] = {}


class WssTiming:
    """What the ``wss_timing`` fixture returns."""

    def __init__(self, baselines_dir: Path, rootdir: Path, update: bool, notes: list[str],
                 owners: dict[Path, Path] | None = None):
        self.baselines_dir = baselines_dir
        self.rootdir = rootdir
        self.update = update
        self._notes = notes
        self._owners = owners if owners is not None else {}

    def check(
        self,
        scenario: str | Path,
        rtol: float = 0.01,
        metric_tolerances: Mapping[str, float] | None = None,
        metrics: Sequence[str] | None = None,
    ) -> Comparison:
        """Simulate ``scenario`` and fail the test if a gating metric regressed beyond tolerance.

        ``metrics`` are the names or globs of the metrics that gate (default: those of
        ``wss check``, :data:`~wss.studies.check.DEFAULT_GATES`; ``["*"]`` for all).

        Returns the :class:`~wss.studies.check.Comparison` with the baseline.  With
        ``--wss-update-baselines`` the baseline is re-recorded first, so the comparison is
        with the new baseline (every metric ok) and never fails the test; what moved from
        the old baseline is listed in the terminal summary.
        """
        from wss.errors import WssError
        from wss.studies.check import MissingBaseline, StaleBaseline, baseline_path, check_scenario, format_table

        path = Path(scenario)
        if not path.is_absolute():
            path = self.rootdir / path
        path = path.resolve()
        dest = baseline_path(self.baselines_dir, path).resolve()
        owner = self._owners.setdefault(dest, path)
        if owner != path:
            pytest.fail(f"wss timing: {scenario} and {owner} would share the baseline file {dest}; "
                        "give each scenario a distinct file name", pytrace=False)
        failure = None
        try:
            if self.update:
                return self._update(path, dest, rtol, metric_tolerances)
            comparison = check_scenario(path, self.baselines_dir, rtol, metric_tolerances, metrics)
        except (MissingBaseline, StaleBaseline) as exc:
            failure = f"wss timing: {exc}; from pytest: --wss-update-baselines"
        except WssError as exc:
            failure = f"wss timing: {exc}"
        if failure is not None:  # outside the except block: no "during handling of the above exception"
            pytest.fail(failure, pytrace=False)
        if comparison.unmatched_tolerances:
            pytest.fail(f"wss timing: metric_tolerances key(s) {', '.join(comparison.unmatched_tolerances)} "
                        f"match no metric of {scenario}", pytrace=False)
        if not comparison.ok:
            pytest.fail(
                f"wss timing of {scenario} regressed ({len(comparison.regressed)} of {len(comparison.rows)} metrics "
                f"beyond tolerance):\n{format_table(comparison)}",
                pytrace=False,
            )
        if comparison.notable:
            self._notes.append(
                f"{scenario}: better or changed beyond tolerance (not a failure); "
                f"refresh with --wss-update-baselines\n{format_table(comparison)}"
            )
        return comparison

    def _update(self, path: Path, dest: Path, rtol: float, tolerances: Mapping[str, float] | None) -> Comparison:
        """Re-record ``path``'s baseline; return the run compared with it, and note what moved from the old one."""
        from wss.model.scenario import load_scenario
        from wss.model.simulate import simulate
        from wss.studies.check import (
            CheckError,
            baseline_from_result,
            compare,
            format_table,
            load_baseline,
            save_baseline,
        )

        result = simulate(load_scenario(path))
        new = baseline_from_result(result, path)
        try:
            old = load_baseline(dest, path)
        except CheckError:  # missing or unreadable: nothing to compare with
            old = None
        dest = save_baseline(new, dest)
        note = f"updated {dest}"
        if old is not None and old.scenario_sha256 == new.scenario_sha256:
            moved = compare(old, result, rtol, tolerances)
            if moved.notable:
                note += f" ({len(moved.notable)} of {len(moved.rows)} metrics moved beyond tolerance)\n"
                note += format_table(moved)
        self._notes.append(note)
        return compare(new, result, rtol, tolerances)


def _baselines_dir(config: pytest.Config) -> Path:
    option = config.getoption("wss_baselines")
    if option:
        return Path(config.invocation_params.dir) / option
    return config.rootpath / str(config.getini("wss_baselines"))


@pytest.fixture
def wss_timing(request: pytest.FixtureRequest) -> WssTiming:
    """Check wss scenarios against their committed timing baselines: ``wss_timing.check(path, rtol=0.01)``."""
    config = request.config
    return WssTiming(_baselines_dir(config), config.rootpath, bool(config.getoption("wss_update_baselines")),
                     config.stash[_NOTES], config.stash[_OWNERS])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    notes = config.stash.get(_NOTES, [])
    if notes:
        terminalreporter.section("wss timing")
        for note in notes:
            terminalreporter.write_line(note)
