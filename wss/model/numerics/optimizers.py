"""MemoryX's optimizers: in-place fp32 updates of the non-zero master weights.

The optimizer runs next to the weights, not on the wafer, and only over the
stored non-zeros: its state (momentum, Adam moments) is one entry per non-zero,
so pruned weights have no state and can never become non-zero.  LAMB's trust
ratio is per layer: ``update`` is called once per layer.  All state and
arithmetic are float32, like the masters (16 bytes per parameter for Adam:
weight, gradient, two moments).

Each optimizer has ``init_state(n)`` and ``update(params, grad, state)``, which
changes ``params`` and ``state`` in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["SGD", "Momentum", "Adam", "Lamb", "make_optimizer"]

State = dict[str, Any]


def _check(params: np.ndarray, grad: np.ndarray) -> None:
    if params.dtype != np.float32 or grad.shape != params.shape:
        raise ValueError(
            f"params must be float32 and grad of the same shape, got {params.dtype} {params.shape} / {grad.shape}"
        )


@dataclass(frozen=True)
class SGD:
    """``w -= lr * (g + weight_decay * w)``."""

    learning_rate: float
    weight_decay: float = 0.0

    def init_state(self, n: int) -> State:
        return {}

    def update(self, params: np.ndarray, grad: np.ndarray, state: State) -> None:
        _check(params, grad)
        g = grad + self.weight_decay * params if self.weight_decay else grad
        params -= np.float32(self.learning_rate) * g.astype(np.float32, copy=False)


@dataclass(frozen=True)
class Momentum:
    """Heavy ball, PyTorch convention: ``v = mu v + g``; ``w -= lr v``."""

    learning_rate: float
    momentum: float = 0.9
    weight_decay: float = 0.0

    def init_state(self, n: int) -> State:
        return {"velocity": np.zeros(n, dtype=np.float32)}

    def update(self, params: np.ndarray, grad: np.ndarray, state: State) -> None:
        _check(params, grad)
        g = grad + self.weight_decay * params if self.weight_decay else grad
        v = state["velocity"]
        v *= np.float32(self.momentum)
        v += g
        params -= np.float32(self.learning_rate) * v


@dataclass(frozen=True)
class Adam:
    """Adam with bias correction; ``decoupled=True`` is AdamW.

    Adam adds ``weight_decay * w`` to the gradient (L2); AdamW instead shrinks
    the weights, ``w -= lr * weight_decay * w``, before the Adam step
    (Loshchilov & Hutter).
    """

    learning_rate: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0
    decoupled: bool = False

    def init_state(self, n: int) -> State:
        return {"step": 0, "m": np.zeros(n, dtype=np.float32), "v": np.zeros(n, dtype=np.float32)}

    def update(self, params: np.ndarray, grad: np.ndarray, state: State) -> None:
        _check(params, grad)
        lr = np.float32(self.learning_rate)
        if self.weight_decay and self.decoupled:
            params -= lr * np.float32(self.weight_decay) * params
            g = grad
        elif self.weight_decay:
            g = grad + np.float32(self.weight_decay) * params
        else:
            g = grad
        state["step"] += 1
        t = state["step"]
        m, v = state["m"], state["v"]
        m *= np.float32(self.beta1)
        m += np.float32(1 - self.beta1) * g
        v *= np.float32(self.beta2)
        v += np.float32(1 - self.beta2) * (g * g)
        m_hat_scale = np.float32(1 / (1 - self.beta1**t))
        v_hat_scale = np.float32(1 / (1 - self.beta2**t))
        params -= lr * (m * m_hat_scale) / (np.sqrt(v * v_hat_scale) + np.float32(self.eps))


@dataclass(frozen=True)
class Lamb:
    """LAMB (You et al. 2019, Algorithm 2): Adam's direction scaled per layer by a trust ratio.

    ``r = m_hat / (sqrt(v_hat) + eps)``, ``u = r + weight_decay * w`` and
    ``w -= lr * (||w|| / ||u||) * u``, the norms over the layer's stored (non-zero)
    weights, which is the whole layer since pruned weights are zero; the ratio is 1
    when either norm is 0 (a zero layer, or no update).  ``update`` is called once
    per layer, so its arrays are the layer.
    """

    learning_rate: float
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def init_state(self, n: int) -> State:
        return {"step": 0, "m": np.zeros(n, dtype=np.float32), "v": np.zeros(n, dtype=np.float32)}

    def update(self, params: np.ndarray, grad: np.ndarray, state: State) -> None:
        _check(params, grad)
        state["step"] += 1
        t = state["step"]
        m, v = state["m"], state["v"]
        m *= np.float32(self.beta1)
        m += np.float32(1 - self.beta1) * grad
        v *= np.float32(self.beta2)
        v += np.float32(1 - self.beta2) * (grad * grad)
        m_hat = m * np.float32(1 / (1 - self.beta1**t))
        v_hat = v * np.float32(1 / (1 - self.beta2**t))
        u = m_hat / (np.sqrt(v_hat) + np.float32(self.eps))
        if self.weight_decay:
            u += np.float32(self.weight_decay) * params
        w_norm, u_norm = float(np.linalg.norm(params)), float(np.linalg.norm(u))
        ratio = w_norm / u_norm if w_norm > 0 and u_norm > 0 else 1.0
        params -= np.float32(self.learning_rate * ratio) * u.astype(np.float32, copy=False)


def make_optimizer(
    name: str,
    learning_rate: float,
    momentum: float = 0.9,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
    weight_decay: float = 0.0,
) -> SGD | Momentum | Adam | Lamb:
    """The optimizer called ``name`` (``sgd``, ``momentum``, ``adam``, ``adamw``, ``lamb``)."""
    if name == "sgd":
        return SGD(learning_rate, weight_decay)
    if name == "momentum":
        return Momentum(learning_rate, momentum, weight_decay)
    if name in ("adam", "adamw"):
        return Adam(learning_rate, betas[0], betas[1], eps, weight_decay, decoupled=name == "adamw")
    if name == "lamb":
        return Lamb(learning_rate, betas[0], betas[1], eps, weight_decay)
    raise ValueError(f"optimizer: unknown name {name!r}")
