"""Bad vision and diffusion settings through ``wss validate``: one ``error:`` line naming the file and the field,
exit code 2, no traceback; good ones validate."""

from __future__ import annotations

import textwrap

import pytest
from core_helpers import run_wss_here

from wss.cli import main

VIT = """
name: v
hardware: {preset: cs3-cluster, wafers: 1}
workload: {model: vit-base-16}
training: {global_batch: 64, optimizer: adamw}
"""
DIT = VIT.replace("vit-base-16", "dit-2b").replace("cs3-cluster", "cs2-cluster")
INLINE = """
name: m
hardware: {preset: cs2-cluster, wafers: 1}
workload:
  model:
    name: m
    input: %s
    layers:
%s
training: {global_batch: 8}
"""
PATCH = "      - {kind: patch_embedding, image_size: 32, patch_size: 8, d_model: 64}"
BLOCK = "      - {kind: %s, d_model: 64, n_heads: 4}"
DENSE = "      - {kind: dense, in_features: 64, out_features: 10}"

#: name -> (scenario text, --set overrides, the field the error names, words in its message)
BAD = {
    "patch-does-not-divide": (VIT, ["workload.model.layers.0.patch_size=15"], "workload.model.layers.0.patch_size",
                              "does not divide image_size 224"),
    "seq-len-on-an-image-model": (VIT, ["training.seq_len=197"], "training.seq_len", "197 tokens"),
    "model-seq-len-on-a-latent-model": (DIT, ["workload.model.seq_len=256"], "workload.model.seq_len",
                                        "follow its patch embedding"),
    "class-token-pool-without-one": (VIT, ["workload.model.layers.0.class_token=false"],
                                     "workload.model.layers.2.pool", "class_token: true"),
    "repeated-stem": (VIT, ["workload.model.layers.0.repeat=2"], "workload.model.layers.0.repeat", "not repeated"),
    "head-patch-differs": (DIT, ["workload.model.layers.4.patch_size=4"], "workload.model.layers.4.patch_size",
                           "(patch_size 2), got 4"),
    "odd-frequencies": (DIT, ["workload.model.layers.1.frequency_dim=255"], "workload.model.layers.1.frequency_dim",
                        "odd"),
    "parallel-dit-block": (DIT, ["workload.model.layers.3.parallel=true"], "workload.model.layers.3.parallel",
                           "sequential"),
    "unknown-modulation": (DIT, ["workload.model.layers.3.modulation=film"], "workload.model.layers.3.modulation",
                           "adaln_zero"),
    "unknown-input": (DIT, ["workload.model.input=video"], "workload.model.input", "latent"),
    "patches-in-a-token-model": (DIT, ["workload.model.input=tokens"], "workload.model.layers.0",
                                 "reads an image or a latent"),
    "image-model-without-patches": (INLINE % ("image", DENSE), [], "workload.model.layers.0",
                                    "starts with one patch_embedding"),
    "patches-not-first": (INLINE % ("image", "\n".join([BLOCK % "transformer_block", PATCH])), [],
                          "workload.model.layers.1", "not first"),
    "dit-block-without-conditioning": (INLINE % ("image", "\n".join([PATCH, BLOCK % "dit_block"])), [],
                                       "workload.model.layers.1", "timestep_embedding or label_embedding"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_vision_input_is_one_line_naming_the_field(name, tmp_path, capsys):
    text, overrides, field, words = BAD[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    argv = ["validate", str(path)] + [arg for o in overrides for arg in ("--set", o)]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert out == "" and len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: {field}"), lines[0]
    assert words in lines[0]


def test_the_command_exits_2_without_a_traceback(tmp_path):
    path = tmp_path / "vit.yaml"
    path.write_text(VIT, encoding="utf-8")
    run = run_wss_here(["validate", path, "--set", "workload.model.layers.0.patch_size=15"], cwd=tmp_path)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert run.stderr.startswith(f"error: {path}: workload.model.layers.0.patch_size")


@pytest.mark.parametrize("text", [VIT, DIT], ids=["vit", "dit"])
def test_the_presets_validate(text, tmp_path, capsys):
    path = tmp_path / "ok.yaml"
    path.write_text(text, encoding="utf-8")
    assert main(["validate", str(path)]) == 0
    assert "tokens" in capsys.readouterr().out
