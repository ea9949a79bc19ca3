"""The DataFrame a sweep returns: one row per point, in point order, with the documented columns.

pandas is imported here, when the frame is built, so importing the sweep (and ``wss --help``) stays light.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from wss.studies.sweep.points import Axis, Point, varied_keys
from wss.studies.sweep.rows import METRIC_COLUMNS, RESOLVED
from wss.studies.sweep.scaling import SCALE_KEY, add_scaling, default_baseline, scaling_groups

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["frame"]


def frame(rows: list[dict[str, Any]], axes: list[Axis], points: list[Point], baseline: str | None) -> pd.DataFrame:
    """The sweep's DataFrame: one row per point, in point order, columns as documented, with scaling added."""
    import pandas as pd

    columns = [*varied_keys(axes), "status", "error", *RESOLVED, *METRIC_COLUMNS[:3], "speedup", "efficiency",
               *METRIC_COLUMNS[3:], "fidelity", "key", "cached"]
    df = pd.DataFrame(rows)
    df["speedup"] = math.nan
    df["efficiency"] = math.nan
    df = df.reindex(columns=columns)
    if not len(df):
        return df
    ref_key = baseline or default_baseline(axes)  # a given baseline was checked before any point ran
    df["_group"] = scaling_groups(axes, points, ref_key)
    ref_col = "wafers" if ref_key in (None, SCALE_KEY) else ref_key
    df = add_scaling(df, by="_group", baseline=ref_col)
    return df.drop(columns="_group")
