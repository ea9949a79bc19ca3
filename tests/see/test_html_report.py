"""``wss report --html`` and ``wss check --html`` without a browser: what the page holds, that it is the same
bytes every time, that user strings are escaped, and that a bad path fails cleanly.

tests/see/test_html_browser.py opens the same pages in a real headless Chromium.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

import wss
from wss.cli import main
from wss.views.html_report import CheckedScenario, check_page, figure_svg, result_page
from wss.views.report import format_totals
from wss.views.summary import fmt_time, format_result

ROOT = Path(__file__).resolve().parents[2]
FC_MNIST = ROOT / "scenarios" / "fc_mnist.yaml"
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def result_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("run") / "result.json"
    wss.simulate(FC_MNIST).save(path)
    return path


@pytest.fixture(scope="module")
def page(result_file: Path) -> str:
    return result_page(wss.Result.load(result_file), source=str(result_file))


def test_page_holds_every_section(result_file: Path, page: str):
    result = wss.Result.load(result_file)
    assert page.startswith("<!DOCTYPE html>") and page.endswith("</html>\n")
    step_line = next(line for line in format_result(result).splitlines() if "step time" in line)
    assert step_line in page  # the summary as `wss simulate` prints it
    assert f"<strong>{fmt_time(result.step_time_s)}</strong>" in page
    assert result.plan_choice is not None and result.plan_choice.line() in page
    assert page.count("alternative ") == len(result.plan_choice.alternatives)
    for name in {r.name for r in result.records}:  # the per-kernel table
        assert f"<td>{name}</td>" in page
    assert f"<pre>{html.escape(format_totals(result))}</pre>" in page  # and its totals
    for category, seconds in result.breakdown_s.items():
        if seconds > 0:
            assert f"<td>{category}</td><td class=\"num\">{fmt_time(seconds)}</td>" in page
    assert page.count("<svg") == 4  # timeline, kernels, utilisation, memory
    assert "wss simulate SCENARIO.yaml -o OUTDIR --trace" in page and "ui.perfetto.dev" in page


def test_page_loads_nothing(page: str):
    # No script, no external reference: a CSP forbids any fetch, SVG text is drawn as paths (no font),
    # and the only URLs are the XML namespaces of the inline SVGs, which are names, not fetches.
    assert "<script" not in page.lower()
    assert "default-src 'none'" in page
    urls = set(re.findall(r"""(?:src|href)\s*=\s*["']([^"']*)""", page))
    assert all(u.startswith("#") for u in urls), urls
    assert not re.search(r"@import|@font-face|url\((?!#)", page)
    assert "<text" not in page  # fonts as paths


def test_svg_ids_are_unique_across_figures(page: str):
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    for ref in set(re.findall(r'(?:href="#|url\(#)([^")]+)', page)):
        assert ref in ids, ref


def test_same_result_gives_the_same_bytes(result_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    a, b = tmp_path / "a.html", tmp_path / "b.html"
    assert main(["report", str(result_file), "--html", str(a)]) == 0
    assert main(["report", str(result_file), "--html", str(b), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert f"wrote {a}" in out and str(b) not in out
    assert a.read_bytes() == b.read_bytes()


def test_figure_svg_is_deterministic(result_file: Path):
    from wss.views.plots import memory_figure

    result = wss.Result.load(result_file)
    one, two = figure_svg(memory_figure(result), "m"), figure_svg(memory_figure(result), "m")
    assert one == two and one.startswith("<svg") and "<metadata>" not in one and "<!--" not in one


def test_hostile_scenario_name_is_escaped(tmp_path: Path):
    scenario = wss.load_scenario(FC_MNIST, overrides={"name": HOSTILE})
    text = result_page(wss.simulate(scenario), verdict=f"verdict about {HOSTILE}", source=f"{HOSTILE}.json")
    assert HOSTILE not in text and "<script" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    checked = CheckedScenario(f"{HOSTILE}.yaml", "b.json", "error", error=f"bad {HOSTILE}", note=HOSTILE)
    cells = ((HOSTILE, "1", "2", "+1%", "±1%", "REGRESSED"),)
    text = check_page([checked, CheckedScenario("s.yaml", "s.json", "regressed", ("m",) * 6, cells)], HOSTILE, 1)
    assert HOSTILE not in text and "<script" not in text


@pytest.mark.parametrize("bad", ["folder", "under_a_file"])
def test_bad_html_path_is_one_line_and_leaves_nothing(bad: str, result_file: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture):
    work = tmp_path / "work"
    work.mkdir()
    (work / "a file").write_text("x", encoding="utf-8")
    (work / "page.html").mkdir()
    target = work / "page.html" if bad == "folder" else work / "a file" / "sub" / "page.html"
    before = sorted(p.relative_to(work) for p in work.rglob("*"))
    assert main(["report", str(result_file), "--html", str(target), "--verdict"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # refused before the table or the verdict
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: cannot write ")
    assert sorted(p.relative_to(work) for p in work.rglob("*")) == before


def test_html_folder_is_made(result_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    target = tmp_path / "new" / "deeper" / "report.html"
    assert main(["report", str(result_file), "--html", str(target), "-q"]) == 0
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in target.parent.iterdir()] == ["report.html"]  # no temporary file left


def test_verdict_goes_into_the_page(result_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    target = tmp_path / "report.html"
    assert main(["report", str(result_file), "--verdict", "--html", str(target)]) == 0
    printed = capsys.readouterr().out
    verdict = printed[printed.index("verdict: bound by"):printed.index(f"wrote {target}")].rstrip("\n")
    page = target.read_text(encoding="utf-8")
    assert f"<pre>{html.escape(verdict)}</pre>" in page
    without = result_page(wss.Result.load(result_file))
    assert "verdict: bound by" not in without and "Not asked for" in without


def _baseline(tmp_path: Path, capsys: pytest.CaptureFixture, slower: float = 1.0) -> tuple[Path, Path]:
    scenario = tmp_path / "fc_mnist.yaml"
    shutil.copyfile(FC_MNIST, scenario)
    assert main(["baseline", str(scenario), "-o", str(tmp_path / "baselines")]) == 0
    path = tmp_path / "baselines" / "fc_mnist.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["metrics"]["step_time_s"] *= 1 / slower  # the baseline claims a faster run than now
    path.write_text(json.dumps(data, sort_keys=True, indent=1) + "\n", encoding="utf-8")
    capsys.readouterr()
    return scenario, path.parent


def test_check_html_shows_every_metric_and_the_regression(tmp_path: Path, capsys: pytest.CaptureFixture):
    scenario, baselines = _baseline(tmp_path, capsys, slower=1.25)
    missing = tmp_path / "other.yaml"
    shutil.copyfile(FC_MNIST, missing)  # no baseline: an error row
    target = tmp_path / "ci" / "check.html"
    code = main(["check", str(scenario), str(missing), "--baselines", str(baselines), "--html", str(target)])
    assert code == 2  # the worst seen: a missing baseline
    assert f"wrote {target}" in capsys.readouterr().out
    page = target.read_text(encoding="utf-8")
    metrics = json.loads((baselines / "fc_mnist.json").read_text(encoding="utf-8"))["metrics"]
    for name in metrics:
        assert f"<td>{html.escape(name)}</td>" in page
    assert '<tr class="regressed"><td>step_time_s</td>' in page
    assert "wss check: 0 ok, 1 regressed, 1 errors" in page and "exit code 2" in page
    assert "other.yaml" in page and "no baseline" in page.lower()


def test_check_html_is_written_with_json_and_stdout_stays_json(tmp_path: Path, capsys: pytest.CaptureFixture):
    scenario, baselines = _baseline(tmp_path, capsys)
    target = tmp_path / "check.html"
    assert main(["check", str(scenario), "--baselines", str(baselines), "--json", "--html", str(target)]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["ok"] == 1  # no "wrote" line on stdout
    n = len(json.loads((baselines / "fc_mnist.json").read_text(encoding="utf-8"))["metrics"])
    assert f"{n} metrics: {n} ok" in target.read_text(encoding="utf-8")


def test_check_bad_html_path_refused_before_simulating(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                       monkeypatch: pytest.MonkeyPatch):
    scenario, baselines = _baseline(tmp_path, capsys)
    import wss.studies.check as check

    def no_run(*args: object, **kwargs: object) -> None:
        raise AssertionError("simulated before refusing the --html path")

    monkeypatch.setattr(check, "check_scenario", no_run)
    (tmp_path / "taken").mkdir()
    before = sorted(tmp_path.rglob("*"))
    assert main(["check", str(scenario), "--baselines", str(baselines), "--html", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: cannot write ") and "it is a folder" in err
    assert sorted(tmp_path.rglob("*")) == before
