"""``wss validate`` and ``wss simulate`` run the grouped-query, sliding-window and mixture-of-experts presets on a
CS-2 and a CS-3 cluster, and refuse a window longer than the sequence with the usual one-line error."""

from __future__ import annotations

import json

import pytest

from wss.cli import main

#: Each preset at a sequence it trains at (Mistral's window is 4096 tokens: a shorter sequence is refused).
SEQ = {"llama-3-8b": 2048, "llama-3-70b": 2048, "llama-3.2-1b": 2048, "mistral-7b": 4096, "mixtral-8x7b": 2048}
CASES = [(model, cluster) for model in SEQ for cluster in ("cs2-cluster", "cs3-cluster")]


def _scenario(tmp_path, model: str, cluster: str, seq: int):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: {model}-{cluster}\nhardware: {{preset: {cluster}, wafers: 2}}\n"
                    f"workload: {{model: {model}}}\n"
                    f"training: {{global_batch: 16, seq_len: {seq}, optimizer: adamw, steps: 2}}\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(("model", "cluster"), CASES, ids=[f"{m}-{c}" for m, c in CASES])
def test_validate_and_simulate_a_language_preset(model, cluster, tmp_path, capsys):
    path = _scenario(tmp_path, model, cluster, SEQ[model])
    assert main(["validate", str(path)]) == 0
    assert f"batch 16 x {SEQ[model]} tokens" in capsys.readouterr().out
    out = tmp_path / "out"
    assert main(["simulate", str(path), "-o", str(out), "-q"]) == 0
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    assert result["samples_per_s"] > 0
    assert result["tokens_per_s"] == pytest.approx(result["samples_per_s"] * SEQ[model], rel=1e-12)
    assert result["scenario"]["hardware"]["wafer"]["name"] == ("wse2" if cluster == "cs2-cluster" else "wse3")


def test_mistral_at_a_sequence_shorter_than_its_window_is_one_line(tmp_path, capsys):
    path = _scenario(tmp_path, "mistral-7b", "cs3-cluster", 2048)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert str(path) in err and "window" in err
