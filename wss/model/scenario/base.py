"""Shared base for scenario models: frozen, strict about unknown keys."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Frozen", "PosFloat", "NonNegFloat", "PosInt", "Fraction", "UnitFraction"]


class Frozen(BaseModel):
    """Base of every scenario model: immutable, rejects unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


PosFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
PosInt = Annotated[int, Field(gt=0)]
#: A fraction in [0, 1).
Fraction = Annotated[float, Field(ge=0, lt=1)]
#: A fraction in (0, 1].
UnitFraction = Annotated[float, Field(gt=0, le=1)]
