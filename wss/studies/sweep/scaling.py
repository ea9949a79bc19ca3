"""Speed-up and efficiency of a sweep's points against the smallest point of their group.

Used by :func:`wss.studies.sweep.sweep` on its own frame, and public (:func:`add_scaling`) for frames
put together by hand, e.g. from several sweeps.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from wss.studies.sweep.points import Axis, Point

if TYPE_CHECKING:  # pandas is imported only when a frame is built
    import pandas as pd

__all__ = ["SCALE_KEY", "add_scaling", "default_baseline", "scaling_groups"]

#: Default key whose smallest value is the reference of speed-up and efficiency.
SCALE_KEY = "hardware.wafers"


def scaling_groups(axes: list[Axis], points: list[Point], ref_key: str | None) -> list[str]:
    """Each point's speed-up group: its value indices on every axis but the one holding ``ref_key``."""
    ref_axis = next((n for n, ax in enumerate(axes) if ref_key in ax.keys), None)
    group = [tuple(i for n, i in enumerate(idx) if n != ref_axis) for _, idx in points]
    return ["/".join(map(str, g)) for g in group]


def default_baseline(axes: list[Axis]) -> str | None:
    """The key speed-ups are measured along: the cluster size if varied, else the first numeric key.

    A categorical key (a model name) has no "smallest" value that means anything: measuring a
    sparsity sweep of two models against the alphabetically first model would be wrong.  With no
    numeric key, the first varied key is used and each group's first point that ran is the reference.
    """
    keys = [(k, [v[i] for v in ax.values]) for ax in axes for i, k in enumerate(ax.keys)]
    if any(k == SCALE_KEY for k, _ in keys):
        return SCALE_KEY
    for k, values in keys:
        if all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in values):
            return k
    return keys[0][0] if keys else None


def add_scaling(
    df: pd.DataFrame,
    by: str | Sequence[str] | None = None,
    baseline: str = "wafers",
    throughput: str = "tokens_per_s",
) -> pd.DataFrame:
    """Add ``speedup`` and ``efficiency`` against the smallest ``baseline`` row that ran in each group.

    ``speedup = throughput / reference throughput``;
    ``efficiency = speedup / (wafers / reference wafers)``, only in groups
    where the number of wafers varies (elsewhere it would just repeat the
    speed-up, e.g. in a sparsity sweep, so it is NaN).  Rows whose status
    is not ``"ok"`` get NaN; if the smallest point failed, the smallest one that
    ran is the reference.  Values of ``baseline`` that cannot be ordered fall
    back to the first row that ran.
    """
    df = df.copy()
    speedup = [math.nan] * len(df)
    efficiency = [math.nan] * len(df)
    keys = [by] if isinstance(by, str) else list(by or [])
    groups = df.groupby(keys, sort=False, dropna=False).indices.values() if keys else [range(len(df))]
    status = df["status"].tolist() if "status" in df else ["ok"] * len(df)
    thr = df[throughput].tolist()
    wafers = df["wafers"].tolist()
    base = df[baseline].tolist()
    for members in groups:
        ok = [int(i) for i in members if status[i] == "ok" and _finite(thr[i]) and thr[i] > 0]
        if not ok:
            continue
        try:
            ref = min(ok, key=lambda i: base[i])
        except TypeError:
            ref = ok[0]
        scales = len({wafers[i] for i in ok}) > 1 and all(_finite(wafers[i]) for i in ok)
        for i in ok:
            speedup[i] = thr[i] / thr[ref]
            if scales:
                efficiency[i] = speedup[i] / (wafers[i] / wafers[ref])
    df["speedup"] = speedup
    df["efficiency"] = efficiency
    return df


def _finite(x: Any) -> bool:
    """Whether ``x`` is a finite number (None and text are not)."""
    try:
        return x is not None and math.isfinite(float(x))
    except (TypeError, ValueError):
        return False
