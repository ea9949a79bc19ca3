"""Figures of the machine that more than one part of wss needs: each is stated here once.

The SimPy parts take them through their settings, the planner prices its choices with them and the
analytic level predicts the step with them, so all three read one definition of each figure.
"""

from __future__ import annotations

import math

__all__ = ["TOKEN_ID_BYTES", "MIN_CHUNKS_BUFFERED", "chunks_buffered"]

#: Bytes of one token id on the input path: an int32.
TOKEN_ID_BYTES = 4

#: Chunks a buffer admits whatever their size.  A chunk is a unit of the simulation (as large as
#: an eighth of a kernel: ``simulation.max_chunks_per_kernel``), while the hardware moves packets,
#: so a port keeps receiving while it sends: two chunks in a buffer (one arriving, one leaving) is
#: that continuous flow at the chunk's grain.  Smaller chunks fill the buffer by its bytes.
MIN_CHUNKS_BUFFERED = 2


def chunks_buffered(capacity_bytes: int, chunk_bytes: float) -> int:
    """Chunks of ``chunk_bytes`` a buffer of ``capacity_bytes`` (a link's :class:`ByteStore`) holds."""
    return max(MIN_CHUNKS_BUFFERED, capacity_bytes // max(1, math.ceil(chunk_bytes)))
