"""Connect a Scenario to the real-training numerics (``wss.numerics``).

A scenario with ``numerics.enabled`` trains its dense-layer model for real in
the same run that times it.  This module translates the scenario into the
numerics' plain inputs, runs the training, and hands back the real non-zero
profiles of every kernel, so the timing's tail-worker effect comes from the
actual masks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from wss.model.kernels.cycles import NnzProfile
from wss.model.scenario import Scenario
from wss.model.scenario.shards import reachable_wafers, shard_samples
from wss.model.scenario.workload import DenseLayer
from wss.model.workload import StreamedKernel, expand_model, kernel_density

if TYPE_CHECKING:  # the numerics (and their start-up cost) load only when a scenario trains for real
    from wss.model.numerics import NumericsOutcome, NumericsSpec

__all__ = ["numerics_spec", "run_numerics"]

#: Scenario precision of the streamed weights -> numerics dtype.  Gradients and activations stay
#: float32 in the numerics: their scenario precisions set bytes and SRAM in the timing only.
_STREAM_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def numerics_spec(s: Scenario) -> NumericsSpec:
    """The :class:`wss.model.numerics.NumericsSpec` of a scenario (dense-layer models only)."""
    from wss.model.numerics import NumericsSpec

    sizes: list[int] = []
    densities: list[float] = []
    activations: set[str] = set()
    for layer in s.workload.model.layers:
        assert isinstance(layer, DenseLayer), "the loader only enables numerics for dense models"
        density = kernel_density(layer.sparsity, s.workload.sparsity, None)  # the timing's density, exactly
        for _ in range(layer.repeat):
            if not sizes:
                sizes.append(layer.in_features)
            sizes.append(layer.out_features)
            densities.append(density)
        if layer is not s.workload.model.layers[-1]:
            activations.add(layer.activation)
    # The loader allows one hidden activation the numerics run (relu or tanh) and none on the output.
    activation = activations.pop() if activations else "relu"
    n = s.numerics
    tr = s.training
    mb = tr.micro_batch if isinstance(tr.micro_batch, int) else None
    shard = max(shard_samples(s))  # the largest wafer's share of the batch (a wafer cut off has none)
    return NumericsSpec(
        layer_sizes=tuple(sizes),
        densities=tuple(densities),
        activation=activation,
        optimizer=tr.optimizer,
        learning_rate=n.learning_rate,
        momentum=n.momentum,
        weight_decay=n.weight_decay,
        max_gradient_norm=n.max_gradient_norm if tr.gradient_clipping == "global_norm" else None,
        global_batch=tr.global_batch,
        wafers=s.hardware.wafers,
        steps=tr.steps,
        micro_batches=1 if mb is None else -(-shard // mb),
        prune=n.prune,
        dataset=n.dataset,
        stream_dtype=_STREAM_DTYPE[tr.weight_precision],
        fan_out=s.hardware.swarmx.fan_out,
        seed=s.seed,
        cut_off=tuple(sorted(set(range(s.hardware.wafers)) - set(reachable_wafers(s)))),
    )


def run_numerics(s: Scenario) -> tuple[NumericsOutcome, dict[str, NnzProfile]]:
    """Train for real; return the outcome and the real non-zero profile of each kernel by name."""
    from wss.model.numerics import train

    # A diverging run (too high a learning rate) is a result, not a fault: its losses become None in
    # the Result and the summary says where it diverged, so numpy's overflow warnings are noise here.
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        outcome = train(numerics_spec(s))
    ops = expand_model(s.workload.model, s.workload.sparsity, s.seq_len)
    kernels = [op for op in ops if isinstance(op, StreamedKernel)]
    profiles: dict[str, NnzProfile] = {}
    for k, cols, rows in zip(kernels, outcome.col_nnz, outcome.row_nnz):
        cols = np.asarray(cols, dtype=np.int64)
        rows = np.asarray(rows, dtype=np.int64)
        profiles[k.name] = NnzProfile(k.out_features, k.in_features, int(cols.sum()), cols, rows)
    return outcome, profiles
