"""The Dask client of ``executor="dask"``: on a scheduler's address, or on a local cluster of its own.

``distributed`` is an optional dependency (``wss[dask]``), imported only here and only when asked for.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from wss.studies.sweep.errors import SweepError

__all__ = ["dask_client"]


def dask_client(
    address: str | None, workers: int | None, connect_timeout_s: float = 10.0
) -> tuple[Any, Callable[[], None]]:
    """A Dask client on ``address`` (or on a new local cluster) and the function that closes it.

    An unreachable scheduler (after ``connect_timeout_s``) or a malformed address is a :class:`SweepError`.
    """
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("executor='dask' needs the 'distributed' package: pip install 'wss[dask]'") from None
    if address:
        try:
            client = Client(address, timeout=connect_timeout_s)
        except (OSError, ValueError) as exc:  # unreachable (OSError, incl. timeouts) or malformed (ValueError)
            raise SweepError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
        return client, client.close
    cluster = LocalCluster(
        n_workers=workers or os.cpu_count() or 1, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = Client(cluster)

    def close() -> None:
        client.close()
        cluster.close()

    return client, close
