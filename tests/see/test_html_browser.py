"""The HTML pages of ``wss report --html`` and ``wss check --html`` in a real headless Chromium.

Chromium comes from the distribution's packages (``apt-get install chromium``, done by .ci/run) and
is driven by Playwright, started with ``executable_path`` so that Playwright downloads no browser of
its own.  Each page is opened from a file:// URL with every request routed through a check: any
request that is not file:// (or data:) is recorded and aborted, so the test sends nothing out.
Console messages, page errors and failed requests are collected and must be none.

Without Chromium or Playwright the tests fail under CI (``CI`` set) and skip elsewhere, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

import wss
from wss.cli import main
from wss.views.summary import fmt_time, format_result

ROOT = Path(__file__).resolve().parents[2]
FC_MNIST = ROOT / "scenarios" / "fc_mnist.yaml"
CHROMIUM = "/usr/bin/chromium"
#: Headless, and no background traffic: Chromium here fails on network look-ups without these.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _unavailable(reason: str) -> NoReturn:
    """Fail under CI, where the browser test must run; skip on a developer's machine."""
    if os.environ.get("CI", "").lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI must run the browser tests: .ci/run installs chromium)", pytrace=False)
    pytest.skip(f"{reason}; install it with `apt-get install -y chromium` and `pip install -e '.[test]'`")


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Chromium context with a fresh profile, shared by this module's tests."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("Playwright for Python is not installed")
    if not (os.path.exists(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        _unavailable(f"Chromium is not installed at {CHROMIUM}")
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=CHROMIUM_ARGS,
        )
        try:
            yield context
        finally:
            context.close()


@dataclass
class Visit:
    """What a page did while it loaded: its console messages, errors, failed and off-file requests."""

    page: Any
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    offsite: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    @property
    def problems(self) -> list[str]:
        return self.console + self.errors + self.failed + [f"left file://: {u}" for u in self.offsite]


def _visit(browser: Any, path: Path) -> Visit:
    """Open ``path`` as a file:// URL and wait until it and everything it asks for has loaded."""
    page = browser.new_page()
    visit = Visit(page)

    def route(r: Any) -> None:
        url = r.request.url
        if url.startswith(("file:", "data:")):
            r.continue_()
        else:  # never sent: aborted here, before any look-up
            visit.offsite.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("console", lambda m: visit.console.append(f"console {m.type}: {m.text}"))
    page.on("pageerror", lambda e: visit.errors.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: visit.failed.append(f"failed: {r.url} {r.failure}"))
    page.on("request", lambda r: visit.requests.append(r.url))
    page.goto(path.resolve().as_uri(), wait_until="load")
    page.wait_for_load_state("networkidle")
    return visit


def test_the_harness_sees_what_it_must_refuse(browser: Any, tmp_path: Path):
    # A page that asks the network for an image and logs an error: the checks below must catch both
    # (the request is aborted by the route, so nothing is sent).
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><img src="http://127.0.0.1:9/x.png">'
                   '<script>console.error("boom")</script></body></html>', encoding="utf-8")
    visit = _visit(browser, bad)
    visit.page.close()
    assert visit.offsite == ["http://127.0.0.1:9/x.png"]
    assert any("boom" in c for c in visit.console)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, wss.Result]:
    """A result of FC-MNIST and its page, written by ``wss report --html``."""
    folder = tmp_path_factory.mktemp("report")
    result = wss.simulate(FC_MNIST)
    result.save(folder / "result.json")
    assert main(["report", str(folder / "result.json"), "--html", str(folder / "report.html"), "-q"]) == 0
    return folder / "report.html", result


def test_report_page_loads_cleanly_and_shows_the_step(browser: Any, report: tuple[Path, wss.Result]):
    path, result = report
    visit = _visit(browser, path)
    page = visit.page
    try:
        assert visit.problems == []
        assert visit.requests == [path.resolve().as_uri()]  # the page itself and nothing else
        text = page.locator("body").inner_text()
        step_line = next(line for line in format_result(result).splitlines() if "step time" in line)
        assert step_line.strip() in text  # the summary line `wss simulate` prints
        headline = page.locator("p.headline strong")
        assert headline.inner_text() == fmt_time(result.step_time_s) and headline.is_visible()
        figures = page.locator("figure svg")
        assert figures.count() == 4
        for i in range(4):
            box = figures.nth(i).bounding_box()
            assert box is not None and box["width"] > 300 and box["height"] > 100  # drawn, not collapsed
        duplicate_ids = page.evaluate("() => { const ids = [...document.querySelectorAll('[id]')].map(e => e.id);"
                                      " return ids.length - new Set(ids).size; }")
        assert duplicate_ids == 0
        assert page.locator("#kernels + p + table tbody tr").count() == len(
            {(r.where, r.name) for r in result.records})
    finally:
        page.close()


def test_check_page_loads_cleanly_and_shows_the_regression(browser: Any, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture):
    scenario = tmp_path / "fc_mnist.yaml"
    shutil.copyfile(FC_MNIST, scenario)
    assert main(["baseline", str(scenario), "-o", str(tmp_path / "baselines")]) == 0
    baseline = tmp_path / "baselines" / "fc_mnist.json"
    data = json.loads(baseline.read_text(encoding="utf-8"))
    data["metrics"]["step_time_s"] *= 0.8  # the baseline claims a faster run than now
    baseline.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    target = tmp_path / "artifacts" / "check.html"
    assert main(["check", str(scenario), "--baselines", str(tmp_path / "baselines"), "--html", str(target)]) == 1
    capsys.readouterr()
    visit = _visit(browser, target)
    page = visit.page
    try:
        assert visit.problems == []
        assert page.locator("h1").inner_text() == "wss check: 0 ok, 1 regressed, 0 errors"
        rows = page.locator("h2 ~ table tbody tr")
        assert rows.count() == len(data["metrics"])
        regressed = page.locator("tr.regressed")
        assert regressed.count() == 1 and regressed.locator("td").first.inner_text() == "step_time_s"
        assert regressed.locator("td").last.inner_text() == "REGRESSED" and regressed.is_visible()
    finally:
        page.close()
