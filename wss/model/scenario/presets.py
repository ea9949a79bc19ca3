"""Shipped presets: hardware parts, clusters and models, as YAML under ``configs/``.

Layout::

    configs/wafer/<name>.yaml      one wafer model (WaferConfig fields)
    configs/memoryx/<name>.yaml    one MemoryX configuration
    configs/swarmx/<name>.yaml     one SwarmX configuration
    configs/hardware/<name>.yaml   a cluster: names a wafer, memoryx and swarmx preset, inputs, wafers
    configs/runtime/<name>.yaml    the runtime's fixed costs
    configs/activation_store/<name>.yaml  where offloaded block inputs wait
    configs/input_pipeline/<name>.yaml    what preparing an input sample costs, by kind
    configs/storage/<name>.yaml    checkpoint storage (faults.failures.storage)
    configs/job/<name>.yaml        a job's costs besides its steps (job: compile, programming, checkpoints, ...)
    configs/models/<family>.yaml   a mapping of model name -> ModelConfig fields

Every number in a preset carries its source and confidence in a comment
beside it.  The files ship inside the package (``wss/configs``) for wheel
installs and are read from the repository's ``configs/`` in a checkout.
"""

from __future__ import annotations

import copy
import difflib
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from wss.errors import quote

__all__ = ["config_root", "list_presets", "load_part_preset", "load_model_preset", "HARDWARE_PART_KINDS", "PART_KINDS",
           "PresetNotFound"]

#: The parts of ``hardware`` a preset can fill in (``hardware.<kind>.preset``; each a field of ``HardwareConfig``).
#: The one list: the loader resolves these, the JSON Schema allows a preset name for each, ``wss presets`` lists them.
HARDWARE_PART_KINDS = ("wafer", "memoryx", "swarmx", "runtime", "activation_store", "input_pipeline")
#: Every kind of part preset under ``configs/``: a whole cluster, its parts, checkpoint storage, a job's costs.
PART_KINDS = ("hardware", *HARDWARE_PART_KINDS, "storage", "job")


class PresetNotFound(KeyError):
    """A preset name that no file under configs/ defines."""

    def __init__(self, kind: str, name: str, known: list[str]):
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        super().__init__(f"unknown {kind} preset {quote(name)}{hint}; known: {', '.join(known) or '(none)'}")

    def __str__(self) -> str:  # KeyError quotes its message otherwise
        return self.args[0]


def config_root() -> Path:
    """Directory holding the preset YAML files."""
    package = Path(__file__).resolve().parents[2]  # wss/
    packaged = package / "configs"
    if packaged.is_dir():
        return packaged
    return package.parent / "configs"


def _read_yaml(path: Path) -> Any:
    """A shipped file's data, a fresh copy each call.  The file is read every time, so an edited preset counts at
    once; it is parsed again only when its text changed (a copy of the parsed data takes a tenth of a parse,
    and every scenario loaded reads about six presets)."""
    return copy.deepcopy(_parse_shipped(path.read_text(encoding="utf-8"), str(path)))


@lru_cache(maxsize=256)
def _parse_shipped(text: str, source: str) -> Any:
    """The data of a shipped file's text (never handed out: :func:`_read_yaml` hands out copies)."""
    from wss.model.scenario.yaml_io import load_trusted_text  # local: avoid an import cycle

    return load_trusted_text(text, source)  # a shipped file: the fast reader


@cache
def _part_files(kind: str) -> dict[str, Path]:
    folder = config_root() / kind
    if not folder.is_dir():
        return {}
    return {p.stem: p for p in sorted(folder.glob("*.yaml"))}


@cache
def _model_table() -> dict[str, tuple[str, dict[str, Any]]]:
    table: dict[str, tuple[str, dict[str, Any]]] = {}
    folder = config_root() / "models"
    for path in sorted(folder.glob("*.yaml")) if folder.is_dir() else []:
        data = _read_yaml(path) or {}
        for name, spec in data.items():
            table[str(name)] = (path.stem, spec)
    return table


def load_part_preset(kind: str, name: str) -> dict[str, Any]:
    """The raw mapping of a hardware-part or cluster preset (a fresh copy)."""
    files = _part_files(kind)
    if name not in files:
        raise PresetNotFound(kind, name, sorted(files))
    data = _read_yaml(files[name]) or {}
    return data


def load_model_preset(name: str) -> dict[str, Any]:
    """The raw mapping of a model preset, with its ``name`` filled in (a fresh copy)."""
    table = _model_table()
    if name not in table:
        raise PresetNotFound("model", name, sorted(table))
    spec = copy.deepcopy(table[name][1])
    spec.setdefault("name", name)
    return spec


def list_presets() -> dict[str, list[str]]:
    """Every shipped preset name, by kind (``hardware``, ``wafer``, ..., ``model``)."""
    out = {kind: sorted(_part_files(kind)) for kind in PART_KINDS}
    out["model"] = sorted(_model_table())
    return out
