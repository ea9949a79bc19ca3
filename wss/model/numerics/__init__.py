"""Real training of the simulated model: the numerics of a weight-streaming run.

When a scenario turns numerics on, its network is trained for real, the way
the cluster does it: per-wafer forward/backward with the sparse kernels,
gradients summed in SwarmX tree order, fp32 masters updated by MemoryX's
optimizer under a fixed sparsity mask.  Entry point: :func:`train`.
"""

from wss.model.numerics.optimizers import SGD, Adam, Momentum, make_optimizer
from wss.model.numerics.spec import NumericsOutcome, NumericsSpec
from wss.model.numerics.swarmx import tree_reduce
from wss.model.numerics.train import evaluate, initial_weights, train

__all__ = [
    "NumericsSpec",
    "NumericsOutcome",
    "train",
    "evaluate",
    "initial_weights",
    "tree_reduce",
    "make_optimizer",
    "SGD",
    "Momentum",
    "Adam",
]
