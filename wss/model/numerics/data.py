"""Learnable synthetic classification tasks, generated from the seed.

No downloads: the task is built from the spec's seed and every batch is drawn
from a generator keyed by (seed, stream, step), so any step's batch can be
regenerated on its own and the same spec always sees the same data.

Inputs have ``layer_sizes[0]`` features (784 for the FC-MNIST shape) and come
out in the wafer layout, ``features x samples``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from wss.model.numerics.spec import NumericsSpec

__all__ = ["Task", "make_task", "stream_rng", "STREAM_INIT", "STREAM_TASK", "STREAM_TRAIN", "STREAM_EVAL"]

# Independent random streams spawned from the one seed.
STREAM_INIT, STREAM_TASK, STREAM_TRAIN, STREAM_EVAL = range(4)

#: Intrinsic dimension of the teacher task's inputs (MNIST-like: far below 784).
LATENT_DIM = 32
#: Standard deviation of the isotropic noise added to every input feature.
INPUT_NOISE = 0.5
#: Hidden width of the teacher network.
TEACHER_HIDDEN = 64
#: Gain of the teacher's hidden pre-activations: tanh is mildly non-linear at 1.
TEACHER_GAIN = 1.0
#: Distance of each mixture mean from the origin, in noise standard deviations.
MIXTURE_RADIUS = 3.0


def stream_rng(seed: int, stream: int, *key: int) -> np.random.Generator:
    """Generator for one named stream (and optional step) spawned from ``seed``.

    ``SeedSequence(seed, spawn_key=k)`` is what ``SeedSequence(seed).spawn``
    would hand out as child ``k``; building it directly lets any step's data
    be drawn without replaying earlier steps.
    """
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(stream, *key)))


@dataclass(frozen=True, eq=False)
class Task:
    """A fixed labelling rule over Gaussian-distributed inputs.

    ``kind == "teacher"``: like images, the inputs have a low intrinsic
    dimension: a latent ``z ~ N(0, I_k)`` (``k = LATENT_DIM``) is embedded by a
    fixed Gaussian ``E`` (``d x k``, unit-variance features) plus isotropic
    noise, ``x = E z + INPUT_NOISE * n``; the label is
    ``argmax B tanh(g A z / sqrt(k))`` with fixed Gaussian ``A``
    (``TEACHER_HIDDEN x k``) and ``B``.  tanh is odd, so no class is favoured
    on average.  ``kind == "gaussian_mixture"``: label
    uniform, ``x = mu_label + N(0, I)`` with means of equal norm
    ``MIXTURE_RADIUS`` in random directions (so a bias-free linear read-out is
    Bayes-optimal and the Bayes accuracy is high but below 1).
    """

    kind: str
    n_features: int
    n_classes: int
    params: tuple[np.ndarray, ...]

    def sample(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``n`` samples: ``(x, labels)`` with ``x`` float32 ``features x n``."""
        if self.kind == "teacher":
            E, A, B = self.params
            z = rng.standard_normal((n, E.shape[1]))
            x = z @ E.T + INPUT_NOISE * rng.standard_normal((n, self.n_features))
            hidden = np.tanh(z @ A.T * (TEACHER_GAIN / np.sqrt(E.shape[1])))
            labels = np.argmax(hidden @ B.T, axis=1)
        else:
            (means,) = self.params
            labels = rng.integers(0, self.n_classes, size=n)
            x = means[labels] + rng.standard_normal((n, self.n_features))
        return np.ascontiguousarray(x.T, dtype=np.float32), labels.astype(np.int64)

    def batch(self, seed: int, stream: int, step: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """The batch of ``n`` samples of one step of one stream."""
        return self.sample(stream_rng(seed, stream, step), n)


def make_task(spec: NumericsSpec) -> Task:
    """The task of ``spec`` (same seed, same task)."""
    rng = stream_rng(spec.seed, STREAM_TASK)
    d, c = spec.layer_sizes[0], spec.n_classes
    params: tuple[np.ndarray, ...]
    if spec.dataset == "teacher":
        k = min(LATENT_DIM, d)
        embed = rng.standard_normal((d, k)) / np.sqrt(k)
        params = (embed, rng.standard_normal((TEACHER_HIDDEN, k)), rng.standard_normal((c, TEACHER_HIDDEN)))
    else:
        directions = rng.standard_normal((c, d))
        directions /= np.linalg.norm(directions, axis=1, keepdims=True)
        params = (MIXTURE_RADIUS * directions,)
    return Task(spec.dataset, d, c, params)
