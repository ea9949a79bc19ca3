"""The one error of a sweep that cannot be run as specified.

In a module of its own because every step of a sweep raises it: expanding the grid, checking the
arguments, choosing the progress display and connecting to Dask.
"""

from __future__ import annotations

from wss.errors import WssError

__all__ = ["SweepError"]


class SweepError(WssError):
    """A sweep that cannot be run as specified (unequal zipped lists, unknown executor, ...)."""
