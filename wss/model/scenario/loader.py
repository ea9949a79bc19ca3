"""Turn a YAML file or a dict into a validated :class:`Scenario`.

Steps, in order:

1. read the YAML (keeping line numbers for error messages);
2. apply ``--set dotted.key=value`` overrides to the raw mapping;
3. resolve presets: ``hardware.preset`` names a cluster under
   ``configs/hardware``; ``hardware.wafer.preset`` (and ``memoryx``,
   ``swarmx``) name part presets; ``workload.model`` may be a model preset
   name.  Fields given beside a preset override the preset's;
4. validate with the frozen pydantic models;
5. check what the models alone cannot (cross-field consistency).

Every problem becomes a :class:`~wss.errors.ScenarioError` naming the file,
the dotted field path and, where YAML gives it, the line.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from wss.errors import FieldProblem, ScenarioError, quote, shorten
from wss.files import InputError, read_input
from wss.model.scenario.faults import DEFAULT_STORAGE, StorageConfig, fault_problems
from wss.model.scenario.hardware import INPUT_KINDS
from wss.model.scenario.job import JobConfig, default_job_preset
from wss.model.scenario.limits import work_checks
from wss.model.scenario.presets import HARDWARE_PART_KINDS, PresetNotFound, load_model_preset, load_part_preset
from wss.model.scenario.scenario import Scenario
from wss.model.scenario.validation_errors import closest, field_paths, key_types, problems_from_errors
from wss.model.scenario.yaml_io import LIMITS, check_shape, line_map, safe_load_text

__all__ = [
    "load_scenario",
    "apply_overrides",
    "parse_override",
    "key_problem",
    "ClusterLimit",
    "published_cluster_limit",
    "job_of",
    "checkpoint_storage",
]

_PART_KINDS = HARDWARE_PART_KINDS

#: Keys of a wafer preset that are not WaferConfig fields: the largest published cluster and its source.
_LIMIT_KEYS = ("max_cluster_wafers", "max_cluster_wafers_source")


@dataclass(frozen=True)
class ClusterLimit:
    """The largest published cluster of a wafer's system, and where that is published."""

    wafers: int
    source: str


def published_cluster_limit(wafer_name: str) -> ClusterLimit | None:
    """The published cluster limit of the wafer preset named ``wafer_name``.

    The limit lives in the wafer's preset file (``max_cluster_wafers`` with ``max_cluster_wafers_source``),
    not in the scenario: it changes no result, so it leaves the resolved scenario and its hash alone.  A
    wafer whose name is no preset, or a preset without the key, has no published limit (None).
    """
    try:
        preset = load_part_preset("wafer", wafer_name)
    except PresetNotFound:
        return None
    limit = preset.get("max_cluster_wafers")
    if limit is None:
        return None
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"wafer preset {wafer_name!r}: max_cluster_wafers must be a positive integer, got {limit!r}")
    return ClusterLimit(limit, str(preset.get("max_cluster_wafers_source") or "source not given"))


def load_scenario(
    source: str | Path | Mapping[str, Any] | Scenario,
    overrides: Sequence[str] | Mapping[str, Any] | None = None,
) -> Scenario:
    """Load and validate a scenario.

    Parameters
    ----------
    source
        Path to a YAML file, a mapping with the same structure, or an existing
        Scenario (returned unchanged unless overrides are given).
    overrides
        ``["hardware.wafers=16", ...]`` strings as on the command line, or a
        mapping ``{"hardware.wafers": 16}``.  Applied before presets resolve,
        so an override of a preset field wins over the preset.

    Raises
    ------
    ScenarioError
        Naming the file, the field path and line, and what is wrong.
    """
    label, raw, lines = _read_source(source, bool(overrides))
    if isinstance(raw, Scenario):
        return raw
    if not isinstance(raw, dict):
        raise ScenarioError(label, [FieldProblem("", f"a scenario is a mapping, got {type(raw).__name__}")])
    pairs = _override_pairs(overrides, label)
    # Overrides that choose a preset apply first; the rest apply to the resolved mapping, so they can
    # reach into a preset (e.g. workload.model.layers.2.sparsity on a preset model).
    selectors = [(k, v) for k, v in pairs if _selects_preset(k, v)]
    fields = [(k, v) for k, v in pairs if not _selects_preset(k, v)]
    overridden = [k for k, _ in pairs]
    if isinstance(source, Scenario):
        # A resolved scenario has every field of its presets spelled out: choosing another preset
        # replaces the whole part rather than sitting under fields that would win over it.
        selectors = [(_preset_owner(k), {"preset": v}) for k, v in selectors]
    raw = apply_overrides(raw, selectors, label)
    # The job given whole resolves as in a file (fields without a preset go over the system's preset); a field
    # of the job set on a scenario without one lands on its system's preset.
    whole_job = [(k, v) for k, v in fields if k == "job"]
    fields = [(k, v) for k, v in fields if k != "job"]
    raw = apply_overrides(raw, whole_job, label)
    if any(k.startswith("job.") for k, _ in fields) and raw.get("job") is None:
        raw = {**raw, "job": {}}
    raw = _resolve_presets(raw, label, lines, overridden)
    raw = apply_overrides(raw, fields, label)
    raw = _store_moved(raw, dict(fields))
    raw = _resolve_storage(raw, label, lines, overridden)  # again: an override may give faults.failures whole
    raw = _resolve_job(raw, label, lines, overridden, first=False)  # again: an override may name a preset
    text_problems = _unencodable_text(raw)
    if text_problems:
        raise ScenarioError(label, [_with_line(p, lines, overridden) for p in text_problems])
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ScenarioError(label, _problems_from(exc, lines, overridden)) from None
    problems = _cross_checks(scenario)
    if problems:
        raise ScenarioError(label, [_with_line(p, lines, overridden) for p in problems])
    return scenario


def _read_source(source: Any, overridden: bool) -> tuple[str, Any, dict[tuple[str, ...], int]]:
    """The label, raw mapping and line map of a scenario source (the Scenario itself when nothing overrides it)."""
    if isinstance(source, Scenario):
        if not overridden:
            return "", source, {}
        return f"<scenario {source.name}>", source.model_dump(mode="json"), {}
    if isinstance(source, Mapping):
        check_shape(source, "<dict>")
        return "<dict>", copy.deepcopy(dict(source)), {}
    if not isinstance(source, (str, os.PathLike)):
        problem = f"a scenario is a YAML file path, a mapping or a Scenario, got {type(source).__name__}"
        raise ScenarioError("<scenario>", [FieldProblem("", problem)])
    path = Path(source)
    label = str(path)
    try:
        # At most 8 MB is read, whatever the path is: /dev/zero or an endless pipe is refused, not read whole.
        text = read_input(path, LIMITS.text_bytes).decode("utf-8")
    except FileNotFoundError:
        raise ScenarioError(label, [FieldProblem("", "no such file")]) from None
    except InputError as exc:
        raise ScenarioError(label, [FieldProblem("", f"refused: {exc}; a scenario is a small text file")]) from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a path with a NUL byte
        raise ScenarioError(label, [FieldProblem("", f"cannot read: {shorten(str(exc))}")]) from None
    return label, safe_load_text(text, label), line_map(text)


def _override_pairs(overrides: Any, label: str) -> list[tuple[str, Any]]:
    """``(dotted key, value)`` pairs of the overrides; a key that is not a dotted name is a ScenarioError."""
    if not overrides:
        return []
    if isinstance(overrides, Mapping):
        pairs = list(overrides.items())
    elif isinstance(overrides, (str, bytes)) or not isinstance(overrides, (list, tuple)):
        problem = f"overrides are a list of 'dotted.key=value' strings or a mapping, got {type(overrides).__name__}"
        raise ScenarioError(label, [FieldProblem("", problem)])
    else:
        for item in overrides:
            if not isinstance(item, str):
                problem = f"an override is a 'dotted.key=value' string, got {quote(item)}"
                raise ScenarioError(label, [FieldProblem("", problem)])
        pairs = [parse_override(o, label) for o in overrides]
    for key, value in pairs:
        if not isinstance(key, str) or not key or any(not part for part in key.split(".")):
            problem = f"an override key is a dotted field name such as 'hardware.wafers', got {quote(key)}"
            raise ScenarioError(label, [FieldProblem("", problem)])
        check_shape(value, f"{label} (--set {shorten(key)})")
    return pairs


def _preset_owner(key: str) -> str:
    """The mapping a preset selector chooses: 'hardware.memoryx.preset' -> 'hardware.memoryx'."""
    return key[: -len(".preset")] if key.endswith(".preset") else key


def _selects_preset(key: str, value: Any) -> bool:
    """Does this override choose a preset (rather than set a field)?"""
    parts = key.split(".")
    if parts[-1] == "preset":
        return True
    if isinstance(value, str) and key in {"hardware", "workload.model", "job"}:
        return True
    return isinstance(value, str) and len(parts) == 2 and parts[0] == "hardware" and parts[1] in _PART_KINDS


def parse_override(text: str, label: str = "--set") -> tuple[str, Any]:
    """Split ``dotted.key=value``; the value is read as a YAML scalar or flow collection."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ScenarioError(label, [FieldProblem(shorten(text), "an override must look like dotted.key=value")])
    return key.strip(), safe_load_text(value, f"{label} (--set {shorten(key.strip())})")


def key_problem(key: str, values: Sequence[Any] = ()) -> str | None:
    """Why the dotted ``key`` cannot be set to ``values`` in any scenario, or None if it can.

    For ``--vary`` keys, checked before a sweep runs: ``key`` must name a field (or a list item,
    mapping entry or preset selector below one), and a key naming a group of fields (``hardware.wafer``)
    takes mappings or preset names only.  The message suggests the closest valid key.
    """
    parts = key.split(".")
    for n in range(1, len(parts) + 1):
        if key_types(Scenario, ".".join(parts[:n])) is None and not _preset_key(parts[:n]):
            parents = (key_types(Scenario, ".".join(parts[: n - 1])) or []) if n > 1 else [Scenario]
            names = [f for tp in parents if isinstance(tp, type) for f in getattr(tp, "model_fields", {})]
            close = closest(parts[n - 1], names)
            hint = f"; did you mean {'.'.join([*parts[: n - 1], close, *parts[n:]])!r}?" if close else ""
            return f"{key}: no such field{hint}"
    types = key_types(Scenario, key) or []
    group = types and all(isinstance(tp, type) and hasattr(tp, "model_fields") for tp in types)
    if group and any(not isinstance(v, (dict, str)) or (isinstance(v, str) and not _selects_preset(key, v))
                     for v in values):
        leaves = [p for p in field_paths(Scenario) if p != key]
        close = closest(key, leaves)
        hint = f"; did you mean {close!r}?" if close else ""
        return f"{key} is a group of fields, not one field{hint}"
    return None


def _preset_key(parts: list[str]) -> bool:
    """``hardware.preset``, ``hardware.<part>.preset``, ``workload.model.preset``: chosen before validation."""
    return parts[-1:] == ["preset"] and (
        parts[:-1] in (["hardware"], ["workload", "model"], ["job"]) or (len(parts) == 3 and parts[0] == "hardware"
                                                                and parts[1] in _PART_KINDS)
    )


def apply_overrides(raw: dict[str, Any], pairs: Any, label: str = "<overrides>") -> dict[str, Any]:
    """Set each dotted key in a deep copy of ``raw``; list items are addressed by index."""
    out = copy.deepcopy(raw)
    for key, value in pairs:
        parts = key.split(".")
        node: Any = out
        for depth, part in enumerate(parts[:-1]):
            where = ".".join(parts[: depth + 1])
            if isinstance(node, list):
                node = node[_index(part, len(node), where, label)]
                continue
            if not isinstance(node, dict):
                raise ScenarioError(label, [FieldProblem(key, f"{'.'.join(parts[:depth])} is not a mapping")])
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif isinstance(child, str):
                # A bare preset name (hardware: cs2-cluster) becomes a mapping when a sub-field is set.
                child = node[part] = {"preset": child}
            elif part == "sparsity" and isinstance(child, (int, float)) and not isinstance(child, bool):
                # One sparsity for every role becomes the default of a mapping by role when a role is set.
                child = node[part] = {"default": child}
            node = child
        last = parts[-1]
        if isinstance(node, list):
            node[_index(last, len(node), key, label)] = value
        elif isinstance(node, dict):
            node[last] = value
        else:
            raise ScenarioError(label, [FieldProblem(key, "cannot set a field inside a scalar")])
    return out


def _index(part: str, n: int, where: str, label: str) -> int:
    try:
        i = int(part)
    except ValueError:
        raise ScenarioError(label, [FieldProblem(where, f"expected a list index, got {part!r}")]) from None
    if not -n <= i < n:
        raise ScenarioError(label, [FieldProblem(where, f"index {i} out of range (list has {n} items)")])
    return i


#: The activation store's fields that apply to a store on the wafer's hosts only (``ActivationStoreConfig``).
_HOST_STORE_FIELDS = ("bandwidth_Bps", "capacity_bytes")


def _on_memoryx(store: dict[str, Any], given: Any) -> dict[str, Any]:
    """A store moved to MemoryX keeps only what applies there: the host-only fields and the label it had (a cluster
    preset's activation servers: their rate, their name) go, but for those in ``given`` (set where the move is;
    host-only ones are then refused by the store's own check)."""
    return {k: v for k, v in store.items() if k not in (*_HOST_STORE_FIELDS, "name") or k in given}


def _store_moved(raw: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """An override that moves the activation store to MemoryX (``hardware.activation_store.location=memoryx``)
    drops what it would otherwise sit beside (:func:`_on_memoryx`): on MemoryX the rate and the room are MemoryX's."""
    prefix = "hardware.activation_store."
    if fields.get(prefix + "location") != "memoryx":
        return raw
    store = raw.get("hardware", {}).get("activation_store")
    if not isinstance(store, dict):
        return raw
    given = {k[len(prefix):] for k in fields if k.startswith(prefix)}
    return {**raw, "hardware": {**raw["hardware"], "activation_store": _on_memoryx(store, given)}}


def _deep_merge(base: Any, over: Any) -> Any:
    """Merge ``over`` onto ``base``: mappings merge key by key, anything else replaces."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for k, v in over.items():
            out[k] = _deep_merge(base[k], v) if k in base else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def _resolve_presets(raw: dict[str, Any], label: str, lines: dict, overridden: list[str]) -> dict[str, Any]:
    raw = copy.deepcopy(raw)
    hw = raw.get("hardware")
    if isinstance(hw, str):
        hw = {"preset": hw}
    if isinstance(hw, dict):
        name = hw.get("preset")
        if name is not None:
            base = _preset("hardware", name, ("hardware", "preset"), label, lines, overridden)
            hw = _deep_merge(base, hw)
        for kind in _PART_KINDS:
            part = hw.get(kind)
            if isinstance(part, str):
                part = {"preset": part}
            if isinstance(part, dict) and "preset" in part:
                part = dict(part)
                pname = part.pop("preset")
                base = _preset(kind, pname, ("hardware", kind, "preset"), label, lines, overridden)
                base.setdefault("name", pname)
                if kind == "wafer":
                    for key in _LIMIT_KEYS:  # read by published_cluster_limit, not scenario fields
                        base.pop(key, None)
                if kind == "activation_store" and part.get("location") == "memoryx":
                    base = _on_memoryx(base, part)
                hw[kind] = _deep_merge(base, part)
        raw["hardware"] = hw

    wl = raw.get("workload")
    if isinstance(wl, dict):
        model = wl.get("model")
        if isinstance(model, str):
            model = {"preset": model}
        if isinstance(model, dict) and "preset" in model:
            model = dict(model)
            mname = model.pop("preset")
            try:
                base = load_model_preset(str(mname))
            except PresetNotFound as exc:
                problem = FieldProblem("workload.model", str(exc))
                raise ScenarioError(label, [_with_line(problem, lines, overridden)]) from None
            model = _deep_merge(base, model)
        wl = dict(wl)
        if model is not None:
            wl["model"] = model
        raw["workload"] = wl
    raw = _resolve_job(raw, label, lines, overridden, first=True)
    return _resolve_storage(raw, label, lines, overridden)


def _resolve_job(raw: dict[str, Any], label: str, lines: dict, overridden: list[str], first: bool) -> dict[str, Any]:
    """``job``: a preset name under configs/job, or fields beside a ``preset``; on the ``first`` pass (before
    field overrides) fields without a preset go over the preset of the wafer's system
    (:func:`~wss.model.scenario.job.default_job_preset`).  On the last pass, a scenario that reports a time
    to train (``faults.failures``) and gives no ``job`` gets its system's preset; any other leaves it out, and
    its hash unchanged."""
    job = raw.get("job")
    if job is None:
        faults = raw.get("faults")
        if first or not (isinstance(faults, dict) and isinstance(faults.get("failures"), dict)):
            return raw
        job = default_job_preset(_wafer_name(raw))
    if isinstance(job, str):
        job = {"preset": job}
    if not isinstance(job, dict) or ("preset" not in job and not first):
        return raw  # resolved already (or not a mapping: validation names the field)
    if "preset" not in job:
        job = {"preset": default_job_preset(_wafer_name(raw)), **job}
    raw = copy.deepcopy(raw)
    job = dict(job)
    name = job.pop("preset")
    base = _preset("job", name, ("job", "preset"), label, lines, overridden)
    base.setdefault("name", name)
    raw["job"] = _deep_merge(base, job)
    return raw


def _wafer_name(raw: dict[str, Any]) -> str:
    """The resolved wafer's name in a raw scenario mapping ('' where it has none)."""
    hw = raw.get("hardware")
    wafer = hw.get("wafer") if isinstance(hw, dict) else None
    return str(wafer.get("name", "")) if isinstance(wafer, dict) else ""


def job_of(scenario: Scenario) -> JobConfig:
    """The job costs of a scenario: its ``job``, or the preset of its wafer's system when it gives none."""
    if scenario.job is not None:
        return scenario.job
    name = default_job_preset(scenario.hardware.wafer.name)
    return JobConfig.model_validate({"name": name, **load_part_preset("job", name)})


def checkpoint_storage(scenario: Scenario) -> StorageConfig:
    """Where a scenario's checkpoints go: ``faults.failures.storage``, or the default storage preset."""
    if scenario.faults.failures is not None:
        return scenario.faults.failures.storage
    return StorageConfig.model_validate({"name": DEFAULT_STORAGE, **load_part_preset("storage", DEFAULT_STORAGE)})


def _resolve_storage(raw: dict[str, Any], label: str, lines: dict, overridden: list[str]) -> dict[str, Any]:
    """``faults.failures.storage``: a preset name under configs/storage (default: DEFAULT_STORAGE) or fields."""
    faults = raw.get("faults")
    failures = faults.get("failures") if isinstance(faults, dict) else None
    if not isinstance(failures, dict):
        return raw
    raw = copy.deepcopy(raw)
    failures = raw["faults"]["failures"]
    storage = failures.get("storage", DEFAULT_STORAGE)
    if isinstance(storage, str):
        storage = {"preset": storage}
    if isinstance(storage, dict) and "preset" in storage:
        storage = dict(storage)
        name = storage.pop("preset")
        base = _preset("storage", name, ("faults", "failures", "storage", "preset"), label, lines, overridden)
        base.setdefault("name", name)
        failures["storage"] = _deep_merge(base, storage)
    return raw


def _preset(
    kind: str, name: Any, path: tuple[str, ...], label: str, lines: dict, overridden: list[str]
) -> dict[str, Any]:
    try:
        return load_part_preset(kind, str(name))
    except PresetNotFound as exc:
        problem = FieldProblem(".".join(path), str(exc))
        raise ScenarioError(label, [_with_line(problem, lines, overridden)]) from None


def _with_line(
    problem: FieldProblem, lines: dict[tuple[str, ...], int], overridden: list[str] | tuple[str, ...] = ()
) -> FieldProblem:
    """Attach the YAML line of the field, or say it came from an override."""
    for key in overridden:
        if problem.path == key or problem.path.startswith(key + "."):
            return FieldProblem(problem.path, f"{problem.message} [from --set {shorten(key)}]")
    parts = tuple(problem.path.split(".")) if problem.path else ()
    while parts and parts not in lines:
        parts = parts[:-1]
    line = lines.get(parts) if parts else None
    return FieldProblem(problem.path, problem.message, line)


def _problems_from(exc: ValidationError, lines: dict, overridden: list[str]) -> list[FieldProblem]:
    problems = problems_from_errors(exc.errors(include_url=False), Scenario)
    return [_with_line(p, lines, overridden) for p in problems]


def _unencodable_text(node: Any, path: tuple[str, ...] = ()) -> list[FieldProblem]:
    """Strings that are not Unicode text (a lone surrogate, as YAML's ``"\\ud800"`` escape makes): a name
    holding one could not be printed, written to JSON as UTF-8, or used as a file name, so it is refused."""
    def bad(text: str) -> bool:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    here = ".".join(path)
    if isinstance(node, str):
        return [FieldProblem(here, f"is not valid Unicode text (it holds a lone surrogate): {quote(node)}")] \
            if bad(node) else []
    out: list[FieldProblem] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and bad(key):
                out.append(FieldProblem(here, f"a key is not valid Unicode text: {quote(key)}"))
                continue
            out += _unencodable_text(value, (*path, str(key)))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _unencodable_text(value, (*path, str(i)))
    return out


def _cross_checks(s: Scenario) -> list[FieldProblem]:
    problems = _cluster_limit_checks(s)
    hw = s.hardware
    problems += fault_problems(s.faults, hw.wafers, hw.swarmx.edge_names(hw.wafers), s.simulation.fold_wafers,
                               s.training.steps, hw.memoryx.shards, hw.swarmx)
    model = s.workload.model
    problems += _seq_len_checks(s) or _window_checks(s)
    problems += _input_kind_checks(s)
    if s.training.global_batch < s.hardware.wafers:
        problems.append(
            FieldProblem(
                "training.global_batch",
                f"{s.training.global_batch} samples cannot feed {s.hardware.wafers} wafers (hardware.wafers)",
            )
        )
    elif s.training.micro_batch != "auto":
        from wss.model.scenario.shards import shard_samples  # lazy: it imports the scenario package

        # Samples of the busiest wafer: the global batch splits as evenly as it can over the wafers that train.
        trained = [n for n in shard_samples(s) if n]
        per_wafer = max(trained, default=s.training.micro_batch)
        if s.training.micro_batch > per_wafer:
            even = len(set(trained)) == 1
            over = (f"hardware.wafers {s.hardware.wafers}" if len(trained) == s.hardware.wafers else
                    f"the {len(trained)} wafers no SwarmX node that is down cuts off")
            problems.append(
                FieldProblem(
                    "training.micro_batch",
                    f"{s.training.micro_batch} exceeds the per-wafer batch of {'' if even else 'at most '}{per_wafer} "
                    f"(training.global_batch {s.training.global_batch} / {over}{'' if even else ', rounded up'})",
                )
            )
    if s.numerics.enabled and any(layer.kind != "dense" for layer in model.layers):
        problems.append(FieldProblem("numerics.enabled", "real numerics support models of dense layers only"))
    elif s.numerics.enabled:
        problems += _numerics_activation_checks(model.layers)
    # The work bounds weigh what a valid scenario would cost: a scenario already refused is not weighed.
    return problems or work_checks(s)


def _input_kind_checks(s: Scenario) -> list[FieldProblem]:
    """An input pipeline prepares the model's kind of input: token kinds feed token models, images image models."""
    kind, model = s.hardware.input_pipeline.kind, s.workload.model
    if kind is None or model.input in INPUT_KINDS[kind]:
        return []
    return [FieldProblem("hardware.input_pipeline.kind",
                         f"{kind!r} prepares {' or '.join(INPUT_KINDS[kind])} inputs; model {model.name!r} reads "
                         f"{model.input}")]


def _cluster_limit_checks(s: Scenario) -> list[FieldProblem]:
    """No more wafers than the largest published cluster of this wafer's system, unless overridden."""
    hw = s.hardware
    limit = published_cluster_limit(hw.wafer.name)
    if limit is None or hw.wafers <= limit.wafers or hw.allow_beyond_published_limits:
        return []
    return [
        FieldProblem(
            "hardware.wafers",
            f"{hw.wafers} wafers exceed the largest published {hw.wafer.name} cluster, {limit.wafers:,} wafers "
            f"({limit.source}; max_cluster_wafers of configs/wafer/{hw.wafer.name}.yaml); for a what-if study "
            "beyond it set hardware.allow_beyond_published_limits: true",
        )
    ]


#: Hidden activations the real numerics run (wss.model.numerics.spec.ACTIVATIONS).
_NUMERICS_ACTIVATIONS = ("relu", "tanh")


def _numerics_activation_checks(layers: Sequence[Any]) -> list[FieldProblem]:
    """Real numerics run one hidden activation (relu or tanh) and a linear output into softmax."""
    problems = []
    last = len(layers) - 1
    hidden = [(i, layer.activation) for i, layer in enumerate(layers) if i < last or layer.repeat > 1]
    for i, act in hidden:
        if act not in _NUMERICS_ACTIVATIONS:
            problems.append(FieldProblem(
                f"workload.model.layers.{i}.activation",
                f"real numerics run hidden layers with relu or tanh, got {act!r}",
            ))
    used = sorted({act for _, act in hidden if act in _NUMERICS_ACTIVATIONS})
    if len(used) > 1:
        problems.append(FieldProblem(
            "workload.model.layers",
            f"real numerics run one hidden activation for every layer; these layers use {' and '.join(used)}",
        ))
    if layers[last].repeat > 1:
        problems.append(FieldProblem(
            f"workload.model.layers.{last}.repeat",
            "real numerics need a single output layer last (it feeds softmax cross-entropy); "
            f"got repeat {layers[last].repeat}",
        ))
    elif layers[last].activation != "none":
        problems.append(FieldProblem(
            f"workload.model.layers.{last}.activation",
            "the output layer feeds softmax cross-entropy in real numerics: its activation must be 'none', "
            f"got {layers[last].activation!r}",
        ))
    return problems


def _seq_len_checks(s: Scenario) -> list[FieldProblem]:
    """seq_len: only for token models, required there, and within the model's learned position table."""
    model, given = s.workload.model, s.training.seq_len
    if model.patch_tokens is not None and given is not None:
        return [FieldProblem("training.seq_len", f"seq_len applies only to token models; model {model.name!r} reads "
                             f"{model.input}s cut into {model.patch_tokens} tokens by its patch embedding "
                             f"(workload.model.layers.0), got {given}")]
    if model.patch_tokens is not None:
        return []
    if model.input == "features":
        # A feature model's sample is one feature vector: there is no sequence to set.
        problems = []
        if given is not None:
            problems.append(FieldProblem("training.seq_len", _features_only(model, given)))
        if model.seq_len is not None:
            problems.append(FieldProblem("workload.model.seq_len", _features_only(model, model.seq_len)))
        return problems
    if given is None and model.seq_len is None:
        return [FieldProblem("training.seq_len", "required for a token model without a default seq_len")]
    seq, path = (given, "training.seq_len") if given is not None else (model.seq_len, "workload.model.seq_len")
    # The context a model declares is the size of its learned position table (embedding max_positions);
    # a model without one (no learned positions) has no limit here.
    tables = [(i, layer) for i, layer in enumerate(model.layers) if layer.kind == "embedding" and layer.max_positions]
    if not tables:
        return []
    i, table = min(tables, key=lambda t: t[1].max_positions or 0)  # every table here has max_positions
    assert seq is not None and table.max_positions is not None
    if seq <= table.max_positions:
        return []
    return [
        FieldProblem(
            path,
            f"{seq} exceeds the context of model {model.name!r}, {table.max_positions} tokens "
            f"(the size of its learned position table, workload.model.layers.{i}.max_positions)",
        )
    ]


def _window_checks(s: Scenario) -> list[FieldProblem]:
    """A sliding window no longer than the sequence: a longer one would change nothing, a sign of a mistake."""
    model = s.workload.model
    seq = s.training.seq_len if s.training.seq_len is not None else model.seq_len
    if model.input != "tokens" or seq is None:
        return []
    where = "training.seq_len" if s.training.seq_len is not None else "workload.model.seq_len"
    return [
        FieldProblem(
            f"workload.model.layers.{i}.window",
            f"a window of {layer.window} tokens is longer than the sequence, {seq} tokens ({where}): every query "
            f"would see all the keys causal attention gives it; drop the window (--set "
            f"workload.model.layers.{i}.window=null) or lengthen the sequence",
        )
        for i, layer in enumerate(model.layers)
        if layer.kind == "transformer_block" and layer.window is not None and layer.window > seq
    ]


def _features_only(model: Any, value: int) -> str:
    return (
        f"seq_len applies only to token models; model {model.name!r} takes feature vectors "
        f"(workload.model.input: features), got {value}"
    )
