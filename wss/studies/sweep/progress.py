"""How a sweep reports progress: a :class:`SweepProgress` at the start and after each point, to a bar or a callable.

The bar (:class:`wss.views.progress.SweepBar`, tqdm with an ETA) is imported only when one is drawn.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from wss.studies.sweep.errors import SweepError

__all__ = ["SweepProgress", "progress_bar"]


class SweepProgress(NamedTuple):
    """What a progress callback is told at the start (nothing done) and after each point."""

    done: int
    total: int
    cached: int
    errors: int
    elapsed_s: float


def progress_bar(progress: Any) -> Any:
    """The bar ``sweep`` draws itself for ``progress="auto"`` or True (None for a callable, False or None)."""
    if progress is True or progress == "auto":
        from wss.views.progress import SweepBar

        return SweepBar(enabled=True if progress is True else None)
    if progress not in (None, False) and not callable(progress):
        raise SweepError(f"progress must be 'auto', True, False, None or a callable, got {progress!r}")
    return None
