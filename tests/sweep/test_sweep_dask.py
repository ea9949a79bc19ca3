"""The Dask path against a real in-process ``distributed.LocalCluster``."""

from __future__ import annotations

import distributed  # in the [test] extra: without it these tests fail, never skip
import pandas as pd
import pytest

from wss.studies.sweep import sweep

VARY = {"hardware.wafers": [1, 2, 4], "workload.sparsity": [0.0, 0.5]}


@pytest.fixture(scope="module")
def cluster():
    with distributed.LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as local:
        yield local


def test_client_executor_gives_the_serial_rows(base, cluster, tmp_path):
    serial = sweep(base, VARY, executor="serial")
    with distributed.Client(cluster) as client:
        dasked = sweep(base, VARY, executor=client, out=tmp_path)
        assert client.status == "running"  # a client passed in is not closed
    pd.testing.assert_frame_equal(serial, dasked)
    assert len(list(tmp_path.glob("*.json"))) == 6


def test_dask_by_scheduler_address(base, cluster):
    df = sweep(base, {"hardware.wafers": [1, 2]}, executor="dask", address=cluster.scheduler_address)
    assert (df["status"] == "ok").all()
