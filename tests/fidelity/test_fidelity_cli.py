"""``wss estimate`` and ``wss reproduce`` through the real entry point (wss.cli.main)."""

from __future__ import annotations

import json
import re

import pytest
from fidelity_helpers import REPO, SCENARIOS

from wss.cli import main


def _run(argv: list[str]) -> int:
    return main([str(a) for a in argv])


def test_estimate_prints_a_summary(capsys):
    assert _run(["estimate", str(SCENARIOS / "gpt3_175b.yaml")]) == 0
    out = capsys.readouterr().out
    assert "closed-form estimate" in out and "step time" in out and re.search(r"bound by\s+(compute|stream)\b", out)


def test_estimate_json_and_overrides(capsys):
    assert _run(["estimate", str(SCENARIOS / "fc_mnist.yaml"), "--set", "hardware.wafers=2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["step_time_s"] > 0 and set(data["breakdown_s"]) >= {"compute", "stream", "bubble"}


def test_estimate_compare_simulates(capsys):
    assert _run(["estimate", str(SCENARIOS / "fc_mnist.yaml"), "--compare"]) == 0
    assert "simulated" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [["estimate", "missing.yaml"], ["estimate", str(SCENARIOS / "fc_mnist.yaml"),
                                                                   "--set", "hardware.wafers=-3"]])
def test_bad_input_exits_2(argv, capsys):
    assert _run(argv) == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_reproduce_one_case_passes(capsys):
    assert _run(["reproduce", str(REPO / "scenarios" / "validation" / "weight_crossings.yaml")]) == 0
    out = capsys.readouterr().out
    header = out.splitlines()[0].split()
    assert header == ["case", "published", "simulated", "error", "criterion", "pass"]
    assert "1 passed, 0 failed" in out
    assert max(len(line) for line in out.splitlines()) <= 120  # a terminal table: the sources are in --markdown


def test_reproduce_shows_no_error_for_a_bound():
    """A bound ("<= published") passes or fails on its side; its distance from the figure is not an error."""
    from wss.studies.validation import reproduce, rows

    (row,) = rows(reproduce([REPO / "scenarios" / "validation" / "memoryx_120t_fits.yaml"]))
    assert row["criterion"] == "<= published" and row["error"] == "-" and row["pass"] == "pass"


def test_reproduce_failing_case_exits_1(tmp_path, capsys):
    text = (REPO / "scenarios" / "validation" / "weight_crossings.yaml").read_text(encoding="utf-8")
    case = tmp_path / "wrong.yaml"
    case.write_text(text.replace("published: 2\n", "published: 3\n"), encoding="utf-8")
    assert "published: 3" in case.read_text(encoding="utf-8")
    assert _run(["reproduce", "--quiet", str(case)]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_reproduce_bad_case_exits_2(tmp_path, capsys):
    case = tmp_path / "bad.yaml"
    case.write_text("figure: [unclosed\n", encoding="utf-8")
    assert _run(["reproduce", str(case)]) == 2
    assert "bad.yaml" in capsys.readouterr().err


def test_markdown_table(capsys):
    assert _run(["reproduce", "--markdown", str(REPO / "scenarios" / "validation" / "gpt3_175b_params.yaml")]) == 0
    assert capsys.readouterr().out.startswith("| figure | source | published | simulated | error |")
