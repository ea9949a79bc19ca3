"""Streamed weight precision in the numerics: float16 stored, bfloat16 emulated; scenario checks."""

from __future__ import annotations

import numpy as np
import pytest

import wss
from wss.model.numerics import NumericsSpec, train
from wss.model.numerics.bridge import numerics_spec
from wss.model.numerics.precision import round_to_bfloat16


def test_bfloat16_rounding_matches_the_format():
    x = np.array([1.0, 1.0 + 2**-8, 1.0 + 3 * 2**-9, 3.0e38, -2.5e-30, np.inf, -np.inf], dtype=np.float32)
    r = round_to_bfloat16(x)
    assert r.dtype == np.float32
    assert (r.view(np.uint32) & 0xFFFF).max() == 0  # only bfloat16's 16 high bits survive
    assert r[0] == 1.0
    assert r[1] == 1.0  # 1 + 2^-8 is halfway: ties to even (1.0)
    assert r[2] == 1.0 + 2**-7  # above halfway: rounds up
    assert np.isfinite(r[3]) and r[3] == pytest.approx(3.0e38, rel=2**-8)  # float32's range, not float16's
    assert r[4] == pytest.approx(-2.5e-30, rel=2**-8)
    assert r[5] == np.inf and r[6] == -np.inf
    assert np.isnan(round_to_bfloat16(np.array([np.nan], dtype=np.float32))[0])
    rng = np.random.default_rng(0)
    y = rng.standard_normal(10_000).astype(np.float32)
    assert np.abs(round_to_bfloat16(y) - y).max() <= np.abs(y).max() * 2**-8


def test_weight_precisions_train_differently_and_bfloat16_is_coarser():
    spec = NumericsSpec(layer_sizes=(32, 32, 4), densities=(0.5, 1.0), global_batch=32, wafers=2, steps=20,
                        optimizer="adam", learning_rate=1e-2, seed=4)
    runs = {d: train(NumericsSpec(**{**spec.__dict__, "stream_dtype": d})) for d in ("float32", "float16", "bfloat16")}
    ref = np.concatenate([w.values for w in runs["float32"].final_weights])

    def drift(d):
        return float(np.abs(np.concatenate([w.values for w in runs[d].final_weights]) - ref).max())

    assert 0 < drift("float16") < drift("bfloat16")


def base(**layers_over):
    layers = [
        {"kind": "dense", "in_features": 16, "out_features": 16, "activation": "relu"},
        {"kind": "dense", "in_features": 16, "out_features": 4, "activation": "none"},
    ]
    for i, over in layers_over.items():
        layers[int(i[1:])].update(over)
    return {
        "hardware": {"preset": "cs2-cluster", "wafers": 2},
        "workload": {"model": {"name": "m", "input": "features", "layers": layers}},
        "training": {"global_batch": 8, "optimizer": "sgd", "steps": 1},
        "numerics": {"enabled": True},
    }


def test_the_bridge_maps_precision_and_fan_out():
    s = wss.load_scenario(base(), overrides={"training.weight_precision": "bf16", "hardware.swarmx.fan_out": 2})
    spec = numerics_spec(s)
    assert spec.stream_dtype == "bfloat16" and spec.fan_out == 2


@pytest.mark.parametrize(
    "over, field, text",
    [
        ({"l0": {"activation": "gelu"}}, "workload.model.layers.0.activation", "relu or tanh"),
        ({"l1": {"activation": "relu"}}, "workload.model.layers.1.activation", "must be 'none'"),
        (
            {"l1": {"repeat": 2, "in_features": 16, "out_features": 16}},
            "workload.model.layers.1.repeat",
            "single output",
        ),
    ],
)
def test_activations_the_numerics_cannot_run_are_errors(over, field, text):
    with pytest.raises(wss.ScenarioError) as info:
        wss.load_scenario(base(**over))
    assert any(p.path == field and text in p.message for p in info.value.problems), info.value


def test_mixed_hidden_activations_are_an_error():
    s = base()
    s["workload"]["model"]["layers"].insert(
        1, {"kind": "dense", "in_features": 16, "out_features": 16, "activation": "tanh"}
    )
    with pytest.raises(wss.ScenarioError, match="one hidden activation"):
        wss.load_scenario(s)
