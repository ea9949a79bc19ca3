"""FLOPs per element of the non-weight work: counting conventions (declared assumptions), each stated once.

The transformer's ops (``builder``) and the vision and diffusion layers' (``vision``) both count with these.
"""

from __future__ import annotations

__all__ = ["ACT_FLOPS", "LN_FLOPS", "SILU_FLOPS", "SWIGLU_FLOPS"]

#: An activation per element: GELU (tanh form) 8, ReLU and tanh 1.
ACT_FLOPS = {"relu": 1.0, "tanh": 1.0, "gelu": 8.0, "none": 0.0}
#: A layer norm per element (mean, variance, normalise, scale and shift).
LN_FLOPS = 8.0
#: SiLU ``x / (1 + e^-x)`` per element: negate, exp, add, divide.
SILU_FLOPS = 4.0
#: SiLU(gate) * up per element: SiLU is 4, the product 1.
SWIGLU_FLOPS = SILU_FLOPS + 1.0
