"""Shared base for scenario models: frozen, strict about unknown keys, types and ranges.

Strict types
    A number field takes a number and nothing else.  YAML reads ``yes``, ``on``
    and ``true`` as booleans and pydantic would turn them into 1; it would also
    turn the string ``"16"`` into 16.  Both are mistakes in a scenario, so a
    boolean or a string given for a number is an error (:func:`_real`), and a
    true/false field takes only true or false.

Ranges
    Every number has a range that any real machine or training run lies in,
    with room for idealised what-if studies (a link made free with 1e18 B/s).
    A value outside it is a typo or a unit slip, and letting it through gives
    overflowing or meaningless results (a 1e-300 Hz clock, a 1e308 s hop).
    :func:`bounded` declares a field's range and writes it into the field's
    description, so ``wss schema`` and the reference show the same limits the
    validator applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, Strict

from wss.errors import quote

__all__ = [
    "Frozen",
    "Real",
    "Integer",
    "Flag",
    "PosFloat",
    "NonNegFloat",
    "PosInt",
    "Fraction",
    "UnitFraction",
    "bounded",
    "Range",
    "format_bound",
    "MIN_EFFICIENCY",
    "BANDWIDTH",
    "LATENCY",
    "OVERHEAD",
    "BUFFER",
    "CAPACITY",
    "POWER",
    "IDLE_POWER",
    "EFFICIENCY",
    "WIDTH",
    "FAULT_FACTOR",
    "FAULT_FACTOR_WHY",
]


class Frozen(BaseModel):
    """Base of every scenario model: immutable, rejects unknown keys."""

    model_config = ConfigDict(frozen=True, extra="forbid", validate_default=True)


def _real(value: Any) -> Any:
    """Let numbers through unchanged; refuse booleans and strings, which pydantic would coerce."""
    if isinstance(value, (str, bytes)) or _is_bool(value):
        raise ValueError(f"must be a number, got {quote(value)}")
    return value


def _integer(value: Any) -> Any:
    """As :func:`_real`, for whole numbers."""
    if isinstance(value, (str, bytes)) or _is_bool(value):
        raise ValueError(f"must be an integer, got {quote(value)}")
    return value


def _is_bool(value: Any) -> bool:
    return isinstance(value, bool) or type(value).__name__ == "bool_"  # numpy.bool_ without importing numpy


#: A float that is never a boolean or a string, and never infinite or NaN.
Real = Annotated[float, BeforeValidator(_real), Field(allow_inf_nan=False)]
#: An integer that is never a boolean or a string (a float with no fractional part is accepted: 1e3).
Integer = Annotated[int, BeforeValidator(_integer)]
#: true or false, and nothing else (not 1, 0, "yes" or "off").
Flag = Annotated[bool, Strict()]

PosFloat = Annotated[float, BeforeValidator(_real), Field(gt=0, allow_inf_nan=False)]
NonNegFloat = Annotated[float, BeforeValidator(_real), Field(ge=0, allow_inf_nan=False)]
PosInt = Annotated[int, BeforeValidator(_integer), Field(gt=0)]
#: A fraction in [0, 1).
Fraction = Annotated[float, BeforeValidator(_real), Field(ge=0, lt=1)]
#: The smallest efficiency a scenario may give (0.1% of the ideal): below it a run's times overflow.
MIN_EFFICIENCY = 1e-3
#: A fraction in [0.001, 1]: an efficiency or a share of a resource that cannot be zero.
UnitFraction = Annotated[float, BeforeValidator(_real), Field(ge=MIN_EFFICIENCY, le=1)]


def format_bound(value: float, unit: str = "") -> str:
    """A bound as people write it: 1e11, 0.25, 1e-3, 100,000 or 1,048,576 (exact, never rounded)."""
    short = f"{value:.0e}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")
    if float(short) == value and (abs(value) >= 1e7 or 0 < abs(value) < 1e-2):
        text = short
    elif float(value).is_integer():
        text = f"{int(value):,}"
    else:
        text = repr(float(value))
    return f"{text} {unit}".strip()


@dataclass(frozen=True)
class Range:
    """The values a number field accepts: ``low`` (or above it, when ``open_low``) to ``high``, in ``unit``."""

    low: float
    high: float
    unit: str = ""
    open_low: bool = False


def bounded(default: Any = ..., *, description: str, within: Range, why: str = "") -> Any:
    """A pydantic ``Field`` that accepts ``within``, with the range stated at the end of its description.

    ``why`` says where the limit comes from when it is not obvious (a work bound, an overflow).
    """
    low = format_bound(within.low, within.unit)
    low = f"more than {low}" if within.open_low else low
    text = f"{description.rstrip()} Range: {low} to {format_bound(within.high, within.unit)}"
    text += f" ({why})." if why else "."
    if within.open_low:
        return Field(default, description=text, gt=within.low, le=within.high)
    return Field(default, description=text, ge=within.low, le=within.high)


# The ranges shared by many fields.  Wide on purpose: every shipped preset and scenario lies well inside,
# and so do idealised what-if studies (a link made free with 1e18 B/s, a latency of 0).

#: Bytes per second of any link, memory or input stream: 1 kB/s to 1e18 B/s (an idealised, free link).
BANDWIDTH = Range(1e3, 1e18, "B/s")
#: A latency of one hop or transfer, seconds: none to one second.
LATENCY = Range(0.0, 1.0, "s")
#: A fixed software cost, seconds: none to 1,000 s.
OVERHEAD = Range(0.0, 1e3, "s")
#: Bytes held by a buffer: one byte to 1e12 bytes.
BUFFER = Range(1, 1e12, "bytes")
#: Bytes of memory per MemoryX shard: none to 1e18 bytes.
CAPACITY = Range(0.0, 1e18, "bytes")
#: Electrical power of one system or node while busy: up to 10 MW.
POWER = Range(0.0, 1e7, "W", open_low=True)
#: Electrical power while idle: none to 10 MW.
IDLE_POWER = Range(0.0, 1e7, "W")
#: A model width (features, vocabulary, classes, positions, sequence length): one to ten million.
WIDTH = Range(1, 10_000_000)
#: An efficiency: 0.1% to 100% of the ideal (below 0.1% a run's times overflow).
EFFICIENCY = Range(MIN_EFFICIENCY, 1.0)
#: A fault's factor on one part's rate or time (faults.links, faults.shards, faults.stragglers): 1e-3 to 1,000.
FAULT_FACTOR = Range(MIN_EFFICIENCY, 1e3)
#: Why a fault factor stops at 1e-3.
FAULT_FACTOR_WHY = (
    "below 1e-3 the part is out of service rather than slow, which faults.nodes models; nearer 0 the run's "
    "times overflow and a factor of 5e-324 would make them infinite"
)
