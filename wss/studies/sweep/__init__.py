"""Design-space sweeps: many scenarios in parallel, one row each in a DataFrame.

>>> from wss.studies.sweep import sweep
>>> df = sweep("scenarios/gpt3_175b.yaml",
...            {"hardware.wafers": [1, 2, 4, 8], "workload.model": ["gpt3-1.3b", "gpt3-175b"]})

Each point is the base scenario with some dotted keys overridden (as
``wss simulate --set`` does).  Points are the Cartesian product of the varied
keys, or, with ``zip=True``, the lists taken element by element; a tuple of
keys (``{("hardware.wafers", "training.global_batch"): [(1, 8), (2, 16)]}``)
varies those keys together inside a Cartesian product.

The parent process loads and validates every point (so a bad point costs
nothing), then runs the valid ones on an executor: a local process pool,
in-process, or Dask.  With ``out=DIR`` every finished point is written to
``DIR/<key>.json`` as soon as it completes, where ``key`` hashes the resolved
scenario, the fidelity and the wss version; running the same sweep again
reads those files instead of simulating, so an interrupted sweep resumes.

A point whose scenario is invalid or infeasible (:class:`~wss.errors.WssError`)
becomes a row with ``status == "error"`` and the message; an unexpected
exception in the model becomes ``status == "failed"`` and is *not* cached, so
the next run tries it again.  Bad sweep specifications raise
:class:`SweepError`.

The package is one module per step: :mod:`~wss.studies.sweep.points` (the grid of swept values),
:mod:`~wss.studies.sweep.checks` (arguments checked before any point runs),
:mod:`~wss.studies.sweep.runs` (each point loaded, looked up in the cache, run once, reported),
:mod:`~wss.studies.sweep.executors` with :mod:`~wss.studies.sweep.local_pool`,
:mod:`~wss.studies.sweep.submit` and :mod:`~wss.studies.sweep.dask_client` (where points run),
:mod:`~wss.studies.sweep.worker` (what runs one point), :mod:`~wss.studies.sweep.rows` (its fields),
:mod:`~wss.studies.sweep.cache` (the cache folder and its keys), :mod:`~wss.studies.sweep.progress`,
:mod:`~wss.studies.sweep.frame` and :mod:`~wss.studies.sweep.scaling` (the DataFrame and its speed-ups),
and :mod:`~wss.studies.sweep.run` (:func:`sweep`, which strings them together).  Import from here:
the modules are how the code is organised, not an interface.
"""

from __future__ import annotations

from wss.studies.sweep.cache import model_fingerprint as model_fingerprint
from wss.studies.sweep.cache import scenario_key
from wss.studies.sweep.checks import EXECUTORS, FIDELITIES
from wss.studies.sweep.errors import SweepError
from wss.studies.sweep.local_pool import PARENT_POLL_S as PARENT_POLL_S
from wss.studies.sweep.points import expand_points
from wss.studies.sweep.progress import SweepProgress
from wss.studies.sweep.rows import METRIC_COLUMNS
from wss.studies.sweep.run import sweep
from wss.studies.sweep.runs import log as log
from wss.studies.sweep.scaling import SCALE_KEY as SCALE_KEY
from wss.studies.sweep.scaling import add_scaling
from wss.studies.sweep.worker import run_point

__all__ = [
    "sweep",
    "expand_points",
    "add_scaling",
    "run_point",
    "scenario_key",
    "SweepError",
    "SweepProgress",
    "FIDELITIES",
    "EXECUTORS",
    "METRIC_COLUMNS",
]
