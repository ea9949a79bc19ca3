"""What a numerics run trains, and what it hands back.

Plain frozen dataclasses, independent of the scenario models: the scenario
layer builds a :class:`NumericsSpec` from its own fields.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from wss.model.kernels.sparse_format import SparseWeights

__all__ = ["NumericsSpec", "NumericsOutcome", "ACTIVATIONS", "OPTIMIZERS", "PRUNERS", "DATASETS", "STREAM_DTYPES"]

ACTIVATIONS = ("relu", "tanh")
OPTIMIZERS = ("sgd", "momentum", "adam", "adamw", "lamb")
PRUNERS = ("random", "magnitude")
DATASETS = ("teacher", "gaussian_mixture")
STREAM_DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class NumericsSpec:
    """A model, its data, its optimizer and the data-parallel layout.

    Parameters
    ----------
    layer_sizes
        Feature counts from input to output, e.g. ``(784, 256, 256, 10)`` for
        the FC-MNIST-shaped network; weight layer ``l`` is
        ``layer_sizes[l + 1] x layer_sizes[l]``.  The last entry is the number
        of classes; the first is the input dimension of the dataset.
    densities
        Fraction of weights kept in each weight layer (``1.0`` = dense).
        Empty means every layer dense.
    activation
        Hidden non-linearity, ``"relu"`` or ``"tanh"`` (none after the last
        layer, which feeds softmax cross-entropy).
    optimizer
        ``"sgd"``, ``"momentum"``, ``"adam"``, ``"adamw"`` or ``"lamb"``, run by
        MemoryX on the fp32 master weights.
    learning_rate, momentum, betas, eps
        Optimizer hyper-parameters (``momentum`` for ``"momentum"``; ``betas``
        and ``eps`` for Adam/AdamW/LAMB).
    max_gradient_norm
        Clip the step's summed gradients to this global L2 norm before the
        optimizer uses them (PyTorch's ``clip_grad_norm_``); ``None``: no
        clipping.
    weight_decay
        Decoupled decay for AdamW and LAMB; coupled L2 (added to the gradient) for the
        others, as in PyTorch.
    global_batch
        Samples per step over the whole cluster.
    wafers
        Data-parallel replicas; the global batch is split in consecutive shards that
        may differ by one sample, the larger ones spread over the tree as the timing
        places them (:func:`wss.model.scenario.shards.placed_split`).
    steps
        Optimizer steps.
    micro_batches
        Gradient-accumulation micro-batches per wafer shard.
    prune
        Unstructured mask at initialisation: ``"random"`` positions, or the
        largest-``"magnitude"`` initial weights.  The mask then stays fixed.
    dataset
        ``"teacher"`` (labels of a fixed random teacher network on Gaussian
        inputs) or ``"gaussian_mixture"`` (class-conditional Gaussians).
    stream_dtype
        Precision of the weights as streamed to the wafers; masters stay fp32.
        ``"float16"`` stores them as numpy float16; ``"bfloat16"`` (which numpy
        lacks) rounds them to bfloat16's 8-bit mantissa, to nearest even, and
        keeps them in float32.  The arithmetic is float32 either way.
    seed
        The only source of randomness.
    fan_out
        SwarmX tree fan-out; fixes the order in which wafer gradients are
        summed (see :func:`wss.model.numerics.swarmx.tree_reduce`).
    cut_off
        Wafers a SwarmX node that is down cuts off: they train nothing, the
        batch is split over the others, and the tree sums only theirs.
    """

    layer_sizes: tuple[int, ...] = (784, 256, 256, 10)
    densities: tuple[float, ...] = ()
    activation: str = "relu"
    optimizer: str = "adam"
    learning_rate: float = 1e-3
    momentum: float = 0.9
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8
    weight_decay: float = 0.0
    max_gradient_norm: float | None = None
    global_batch: int = 128
    wafers: int = 1
    steps: int = 100
    micro_batches: int = 1
    prune: str = "random"
    dataset: str = "teacher"
    stream_dtype: str = "float32"
    seed: int = 0
    fan_out: int = 4
    cut_off: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        sizes = tuple(int(s) for s in self.layer_sizes)
        object.__setattr__(self, "layer_sizes", sizes)
        if len(sizes) < 2 or min(sizes) < 1:
            raise ValueError(f"layer_sizes: need at least two sizes >= 1, got {sizes}")
        if sizes[-1] < 2:
            raise ValueError(f"layer_sizes: the last size is the class count and must be >= 2, got {sizes[-1]}")
        densities = tuple(float(d) for d in self.densities) or (1.0,) * (len(sizes) - 1)
        object.__setattr__(self, "densities", densities)
        if len(densities) != len(sizes) - 1:
            raise ValueError(f"densities: need one per weight layer ({len(sizes) - 1}), got {len(densities)}")
        if not all(0.0 < d <= 1.0 for d in densities):
            raise ValueError(f"densities: each must be in (0, 1], got {densities}")
        object.__setattr__(self, "betas", tuple(float(b) for b in self.betas))
        for name, value, allowed in (
            ("activation", self.activation, ACTIVATIONS),
            ("optimizer", self.optimizer, OPTIMIZERS),
            ("prune", self.prune, PRUNERS),
            ("dataset", self.dataset, DATASETS),
            ("stream_dtype", self.stream_dtype, STREAM_DTYPES),
        ):
            if value not in allowed:
                raise ValueError(f"{name}: must be one of {allowed}, got {value!r}")
        checks = (
            ("learning_rate", self.learning_rate > 0),
            ("momentum", 0.0 <= self.momentum < 1.0),
            ("betas", len(self.betas) == 2 and all(0.0 <= b < 1.0 for b in self.betas)),
            ("eps", self.eps > 0),
            ("weight_decay", self.weight_decay >= 0),
            ("max_gradient_norm", self.max_gradient_norm is None or self.max_gradient_norm > 0),
            ("global_batch", self.global_batch >= 1),
            ("wafers", self.wafers >= 1),
            ("steps", self.steps >= 0),
            ("micro_batches", self.micro_batches >= 1),
            ("seed", self.seed >= 0),
            ("fan_out", self.fan_out >= 2),
            ("cut_off", all(0 <= w < self.wafers for w in self.cut_off) and len(set(self.cut_off)) < self.wafers),
        )
        for name, ok in checks:
            if not ok:
                raise ValueError(f"{name}: invalid value {getattr(self, name)!r}")

    @property
    def n_classes(self) -> int:
        """Number of classes: the size of the last layer."""
        return self.layer_sizes[-1]

    @property
    def n_layers(self) -> int:
        """Number of weight layers."""
        return len(self.layer_sizes) - 1


@dataclass(frozen=True, eq=False)
class NumericsOutcome:
    """What a numerics run reports.

    Attributes
    ----------
    spec
        The resolved spec that produced this outcome.
    losses
        Mean softmax cross-entropy over each step's global batch, as it
        reaches the user node (computed before that step's update).
    accuracies
        Fraction of each step's global batch classified correctly, before the
        update.  Every step draws fresh samples, so this is held-out accuracy.
    final_weights
        fp32 master weights after the last step, one per layer.
    masks
        The fixed sparsity mask of each layer (``out x in``, bool).
    col_nnz, row_nnz
        Non-zeros per input feature and per output feature of each layer: the
        per-row loads that drive the wafer's tail-worker effect.
    """

    spec: NumericsSpec
    losses: tuple[float, ...]
    accuracies: tuple[float, ...]
    final_weights: tuple[SparseWeights, ...]
    masks: tuple[np.ndarray, ...] = field(repr=False)
    col_nnz: tuple[np.ndarray, ...] = field(repr=False)
    row_nnz: tuple[np.ndarray, ...] = field(repr=False)
