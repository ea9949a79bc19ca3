"""``wss simulate --set ...`` writes to its own default folder and its summary names the overrides (through
:func:`wss.cli.main`).
"""

from __future__ import annotations

import json
from pathlib import Path

from core_helpers import SCENARIOS

from wss.cli import main
from wss.cli.simulate import default_outdir

FC_MNIST = SCENARIOS / "fc_mnist.yaml"



def test_an_overridden_run_gets_its_own_default_folder_and_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", str(FC_MNIST), "--quiet"]) == 0
    assert main(["simulate", str(FC_MNIST), "--set", "hardware.wafers=2"]) == 0
    out = capsys.readouterr().out
    plain, overridden = tmp_path / "out" / "fc-mnist", tmp_path / "out" / "fc-mnist+hardware.wafers=2"
    assert json.loads((plain / "result.json").read_text())["scenario"]["hardware"]["wafers"] == 4
    assert json.loads((overridden / "result.json").read_text())["scenario"]["hardware"]["wafers"] == 2
    head = out.splitlines()
    assert head[0].startswith("fc-mnist: 2 x wse2, ")
    assert head[1].startswith("  overrides    hardware.wafers=2 ")
    assert f"wrote        {overridden.relative_to(tmp_path)}/result.json" in out


def test_the_default_folder_is_stable_sanitised_and_short():
    assert default_outdir("gpt3-175b-192", []) == Path("out/gpt3-175b-192")
    assert default_outdir("gpt3-175b-192", ["hardware.wafers=16"]) == Path("out/gpt3-175b-192+hardware.wafers=16")
    assert default_outdir("x", [" training.steps = 2"]) == default_outdir("x", ["training.steps=2"])
    assert default_outdir("x", ["workload.model=a/b c"]) == Path("out/x+workload.model=a_b_c")
    many = [f"workload.model.layers.{i}.sparsity=0.{i}" for i in range(5)]
    long = default_outdir("x", many)
    assert long == default_outdir("x", list(many)) and long.name.startswith("x+set-") and len(long.name) == 14
    assert long != default_outdir("x", many[:4])


def test_no_overrides_line_without_overrides(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["simulate", str(FC_MNIST)]) == 0
    assert "overrides" not in capsys.readouterr().out
