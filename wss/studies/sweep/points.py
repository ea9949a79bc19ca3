"""The grid of a sweep: the swept values as axes, and the points they span.

Each point is the base scenario with some dotted keys overridden.  Points are the Cartesian product of
the axes; a tuple of keys varies those keys together along one axis, and ``zip=True`` folds every list
into a single axis taken element by element.  Each point keeps the index of its value on every axis, so
the speed-up groups (every axis but the reference one) are found without comparing values.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from wss.studies.sweep.errors import SweepError

__all__ = ["Axis", "Point", "parse_axes", "grid", "expand_points", "varied_keys"]


@dataclass(frozen=True)
class Axis:
    """Keys varied together, and the tuple of their values at each position on the axis."""

    keys: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]


#: One point of a sweep: its overrides, and the index of its value on every axis.
Point = tuple[dict[str, Any], tuple[int, ...]]


def parse_axes(vary: Mapping[Any, Sequence[Any]] | None, zipped: bool) -> list[Axis]:
    """The axes of ``vary`` (one per key or tuple of keys, or one in all when ``zipped``); SweepError if malformed."""
    axes: list[Axis] = []
    seen: set[str] = set()
    for key, values in (vary or {}).items():
        keys = (key,) if isinstance(key, str) else tuple(key)
        if not keys or not all(isinstance(k, str) and k for k in keys):
            raise SweepError(f"vary: a key must be a dotted string or a tuple of them, got {key!r}")
        if dup := seen.intersection(keys):
            raise SweepError(f"vary: {', '.join(sorted(dup))} is varied twice")
        seen.update(keys)
        if isinstance(values, (str, bytes, Mapping)) or not isinstance(values, Iterable):
            raise SweepError(f"vary: {key!r} needs a list of values, got {values!r}")
        values = list(values)
        if not values:
            raise SweepError(f"vary: {key!r} has no values")
        if len(keys) == 1:
            rows = tuple((v,) for v in values)
        else:
            rows = tuple(tuple(v) for v in values)
            if any(len(r) != len(keys) for r in rows):
                raise SweepError(f"vary: every value of {keys!r} must be a tuple of {len(keys)} values")
        axes.append(Axis(keys, rows))
    if zipped and len(axes) > 1:
        lengths = {ax.keys: len(ax.values) for ax in axes}
        if len(set(lengths.values())) > 1:
            desc = ", ".join(f"{'+'.join(k)}: {n}" for k, n in lengths.items())
            raise SweepError(f"zip needs lists of equal length, got {desc}")
        keys = tuple(k for ax in axes for k in ax.keys)
        rows = tuple(tuple(v for ax in axes for v in ax.values[i]) for i in range(len(axes[0].values)))
        axes = [Axis(keys, rows)]
    return axes


def grid(axes: list[Axis]) -> list[Point]:
    """Each point's overrides and the index of its value on every axis, the first axis varying slowest."""
    out = []
    for idx in itertools.product(*(range(len(ax.values)) for ax in axes)):
        values: dict[str, Any] = {}
        for ax, i in zip(axes, idx):
            values.update(dict(zip(ax.keys, ax.values[i])))
        out.append((values, idx))
    return out


def expand_points(vary: Mapping[Any, Sequence[Any]] | None, zip: bool = False) -> list[dict[str, Any]]:
    """The overrides of every point, in sweep order (the first key varies slowest)."""
    return [p for p, _ in grid(parse_axes(vary, zip))]


def varied_keys(axes: list[Axis]) -> list[str]:
    """Every varied key, in axis order (the first columns of the sweep's frame)."""
    return [k for ax in axes for k in ax.keys]
