"""``wss simulate --trace SCENARIO.yaml``: a bare ``--trace`` before the scenario gives it back and takes the
default trace path (through :func:`wss.cli.main`).
"""

from __future__ import annotations

from core_helpers import SCENARIOS

from wss.cli import main

FC_MNIST = SCENARIOS / "fc_mnist.yaml"


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]



def test_a_bare_trace_before_the_scenario_takes_the_default_path(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--trace", str(FC_MNIST)]) == 0
    out = capsys.readouterr().out
    assert (tmp_path / "out" / "fc-mnist" / "result.json").is_file()
    assert (tmp_path / "out" / "fc-mnist" / "trace.json").is_file()
    assert "out/fc-mnist/trace.json" in out


def test_trace_with_a_file_and_the_scenario_first_still_writes_there(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", str(FC_MNIST), "--trace", "t.json", "--quiet"]) == 0
    assert (tmp_path / "t.json").is_file() and not (tmp_path / "out" / "fc-mnist" / "trace.json").exists()


def test_no_scenario_is_one_error_line(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", "--trace", "t.json"]) == 2
    assert "no scenario given" in _one_error_line(capsys.readouterr().err)
    assert not (tmp_path / "out").exists()
