"""The cache folder of a sweep: one JSON file per finished point, keyed by what determines its result.

The key hashes the resolved scenario, the fidelity, the wss version and wss's own source and presets,
so a re-run of an interrupted sweep reads the points it already has, and a cache made by another
version of the model is never taken for this one.  Files are written atomically: a sweep killed while
writing leaves the previous file or none, never half a file.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import wss
from wss.files import atomic_write_text
from wss.model.scenario import Scenario
from wss.model.scenario.presets import config_root

__all__ = ["model_fingerprint", "scenario_key", "read_cached", "write_cached"]


@functools.lru_cache(maxsize=1)
def model_fingerprint() -> str:
    """sha256 of wss's own source and presets: a cached point is reused only by the same model.

    The version number alone would let a cache made before a change to the
    model answer for the model after it.
    """
    digest = hashlib.sha256()
    for root, pattern in ((Path(wss.__file__).resolve().parent, "*.py"), (config_root(), "*.yaml")):
        for path in sorted(root.rglob(pattern)):
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def scenario_key(scenario: Scenario, fidelity: str = "simulate") -> str:
    """sha256 of the canonical JSON of the resolved scenario, the fidelity, the wss version and source."""
    import wss.studies.sweep as package
    from wss._version import __version__

    doc = {
        "fidelity": fidelity,
        "scenario": scenario.model_dump(mode="json"),
        "wss_version": __version__,
        # looked up on the package, where users import it from: replacing wss.studies.sweep.model_fingerprint
        # (as a test does to stand for another model) changes every key, as when the sweep was one module
        "model": package.model_fingerprint(),
    }
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _cache_file(out: Path, key: str) -> Path:
    """The file of the point ``key`` in the cache folder ``out``."""
    return out / f"{key}.json"


def read_cached(out: Path | None, key: str) -> dict[str, Any] | None:
    """The row fields cached for ``key`` in ``out``; None without a folder, a file, or with a file that does not fit."""
    if out is None:
        return None
    path = _cache_file(out, key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("key") != key or not isinstance(doc.get("row"), dict):
        return None
    return doc["row"]


def write_cached(out: Path, key: str, fidelity: str, values: dict[str, Any], row: dict[str, Any]) -> None:
    """Write a finished point's row fields (with its varied values, for people reading the folder) atomically."""
    from wss._version import __version__

    doc = {"key": key, "wss_version": __version__, "fidelity": fidelity, "values": values, "row": row}
    atomic_write_text(_cache_file(out, key), json.dumps(doc, indent=1, default=repr, allow_nan=True))
