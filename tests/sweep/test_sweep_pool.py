"""The local pool's workers end with the sweep: at once when it stops early, not after the point they run."""

from __future__ import annotations

import os
import time

import pytest

from wss.studies.sweep.local_pool import local_pool

#: What a worker would spend on the point it runs if nothing stopped it.
POINT_S = 60.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_an_interrupted_pool_ends_its_workers_mid_point():
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt), local_pool(1) as pool:
        pid = pool.submit(os.getpid).result(timeout=POINT_S)  # the worker is up
        pool.submit(time.sleep, POINT_S)  # and busy with a long point
        time.sleep(0.5)
        raise KeyboardInterrupt
    assert time.monotonic() - started < POINT_S / 2  # not waited for
    assert not _alive(pid)  # ended and reaped


def test_a_pool_left_normally_finishes_its_points():
    with local_pool(1) as pool:
        fut = pool.submit(sum, [1, 2, 3])
    assert fut.result(timeout=0) == 6
