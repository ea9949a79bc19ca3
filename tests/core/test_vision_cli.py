"""``wss validate`` and ``wss simulate`` run the vision presets on a CS-2 and a CS-3 cluster."""

from __future__ import annotations

import json

import pytest

from wss.cli import main

CASES = [(model, cluster) for model in ("vit-base-16", "dit-2b") for cluster in ("cs2-cluster", "cs3-cluster")]


@pytest.mark.parametrize(("model", "cluster"), CASES, ids=[f"{m}-{c}" for m, c in CASES])
def test_validate_and_simulate_a_vision_preset(model, cluster, tmp_path, capsys):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: {model}-{cluster}\nhardware: {{preset: {cluster}, wafers: 1}}\n"
                    f"workload: {{model: {model}}}\ntraining: {{global_batch: 96, optimizer: adamw, steps: 2}}\n",
                    encoding="utf-8")
    tokens = 197 if model == "vit-base-16" else 256
    assert main(["validate", str(path)]) == 0
    assert f"batch 96 x {tokens} tokens" in capsys.readouterr().out
    out = tmp_path / "out"
    assert main(["simulate", str(path), "-o", str(out), "-q"]) == 0
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["samples_per_s"] > 0
    assert result["tokens_per_s"] == pytest.approx(result["samples_per_s"] * tokens, rel=1e-12)
    assert result["scenario"]["hardware"]["wafer"]["name"] == ("wse2" if cluster == "cs2-cluster" else "wse3")
