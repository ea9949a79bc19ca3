"""SwarmX's reduction: gradients summed up a fan-out tree, in a fixed order.

Floating-point addition is not associative, so the order in which wafer
gradients are added decides the last bits of the update.  SwarmX is a tree:
the wafers are its leaves in order, each node adds the streams of up to
``fan_out`` children, and levels repeat until one stream reaches MemoryX.
:func:`tree_reduce` adds in exactly that order, so a run is bit-reproducible
and the difference from a one-wafer run is only this reordering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

__all__ = ["tree_reduce", "DEFAULT_FAN_OUT"]

DEFAULT_FAN_OUT = 4



class _Addable(Protocol):
    def __add__(self, other: Any, /) -> Any: ...


T = TypeVar("T", bound=_Addable)


def tree_reduce(items: Sequence[T | None], fan_out: int = DEFAULT_FAN_OUT) -> T:
    """Sum ``items`` (leaves in wafer order) up a tree of the given fan-out.

    Level by level, consecutive groups of ``fan_out`` values are summed left
    to right (``((a + b) + c) + d``); a short last group is summed the same
    way.  With 8 wafers and fan-out 4 that is
    ``(((g0+g1)+g2)+g3) + (((g4+g5)+g6)+g7)``.  A ``None`` leaf is a wafer
    cut off by a node that is down: its node sums the children it has, and a
    node with none passes ``None`` up.

    Parameters
    ----------
    items
        Addable values: numpy arrays (summed into new arrays; inputs are not
        modified) or Python/numpy scalars.
    fan_out
        Children per tree node, >= 2.

    Returns
    -------
    The sum.  A single item is returned as is.
    """
    if fan_out < 2:
        raise ValueError(f"fan_out must be >= 2, got {fan_out}")
    level = list(items)
    if not level:
        raise ValueError("tree_reduce needs at least one item")
    while len(level) > 1:
        nxt: list[T | None] = []
        for start in range(0, len(level), fan_out):
            group = [child for child in level[start : start + fan_out] if child is not None]
            total = group[0] if group else None
            for child in group[1:]:
                total = total + child  # type: ignore[operator]
            nxt.append(total)
        level = nxt
    if level[0] is None:
        raise ValueError("tree_reduce needs at least one item that is not None")
    return level[0]
