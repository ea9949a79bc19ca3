"""The JSON Schema of a scenario file, for editors, and the rows of the field reference built from it.

``Scenario.model_json_schema()`` describes a *resolved* scenario: every part of the hardware spelled
out, the model as its list of layers.  A scenario file is shorter: it names presets
(``hardware: {preset: cs2-cluster}``, ``workload: {model: gpt3-175b}``) and overrides a few
fields beside them.  :func:`scenario_schema` adapts the pydantic schema to that:

* ``hardware``, ``hardware.wafer`` (``memoryx``, ``swarmx``, ``runtime``, ``activation_store``) and ``workload.model``
  take a preset name (an enum of the shipped ones, so editors complete them) or a mapping with an
  optional ``preset`` key; a field of a part that a preset can give is not required there, and
  ``hardware`` or ``workload.model`` without a preset must list its parts (layers);
* every field's title is its name in words with its unit (from the name's suffix, see
  :func:`unit_of`), and a group of fields carries its model's docstring as description.

Defaults, enums (``Literal`` fields) and bounds come from the pydantic models unchanged.
:func:`case_schema` is the schema of a validation case file (``scenarios/validation/``), whose
scenarios follow the scenario schema.  :func:`field_rows` flattens a schema into one
:class:`FieldRow` per field (dotted path, type, unit, default, description) for
``docs/reference.md``.  Both schemas are plain data: :func:`schema_text` gives their canonical
JSON, the same bytes for the same models and presets.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["SCHEMA_DIALECT", "FieldRow", "scenario_schema", "case_schema", "schema_text", "unit_of", "field_rows",
           "type_text", "one_line"]

#: The JSON Schema dialect pydantic writes (``$defs``, ``exclusiveMinimum`` as a number).
SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"

#: Unit of a field from the end of its name, first match wins (so ``samples_per_s`` is a rate, not seconds).
_SUFFIX_UNITS: tuple[tuple[str, str], ...] = (
    ("_per_s", "{}/s"),
    ("_per_cycle", "{}/cycle"),
    ("_Bps", "bytes/s"),
    ("_bytes", "bytes"),
    ("_Hz", "Hz"),
    ("_W", "W"),
    ("_J", "J"),
    ("_cycles", "cycles"),
    ("_fraction", "fraction"),
    ("_efficiency", "fraction"),
    ("_s", "s"),
)

#: Units of fields whose name has no unit suffix; the description states each.
_NAMED_UNITS = {
    "optimizer_flops": "FLOP/s",
    "global_batch": "samples",
    "micro_batch": "samples",
    "seq_len": "tokens",
    "max_positions": "tokens",
    "sparsity": "fraction",
    "kernel_efficiency": "fraction",
    "nonweight_efficiency": "fraction",
    "sram_reserved_fraction": "fraction",
    "simd_width": "lanes",
    "wafers": "wafers",
    "shards": "nodes",
    "learning_rate": "",
    "max_gradient_norm": "",
}

#: Words written in capitals in titles.
_ACRONYMS = {"dram": "DRAM", "sram": "SRAM", "io": "I/O", "simd": "SIMD", "ffn": "FFN", "qkv": "QKV",
             "swarmx": "SwarmX", "memoryx": "MemoryX"}


def unit_of(name: str) -> str:
    """The unit of a scenario field from its name: ``clock_Hz`` -> ``Hz``, ``samples_per_s`` -> ``samples/s``.

    Units live in field names (``_Bps`` bytes per second, ``_s`` seconds, ``_bytes``, ``_Hz``, ``_W``,
    ``_cycles``); the few fields without a suffix have their unit listed here from their description.
    ``""``: a count or a label.
    """
    if name in _NAMED_UNITS:
        return _NAMED_UNITS[name]
    for suffix, unit in _SUFFIX_UNITS:
        if name.endswith(suffix) and len(name) > len(suffix):
            stem = name[: -len(suffix)].rsplit("_", 1)[-1]
            return unit.format(stem)
    return ""


def _title(name: str) -> str:
    """``dram_bandwidth_Bps`` -> ``DRAM bandwidth [bytes/s]``: the name in words, then its unit."""
    unit = unit_of(name)
    stem = name
    for suffix, _ in _SUFFIX_UNITS:
        if name.endswith(suffix) and suffix not in ("_per_s", "_per_cycle", "_fraction", "_efficiency"):
            stem = name[: -len(suffix)]
            break
    words = [_ACRONYMS.get(w.lower(), w) for w in stem.split("_") if w]
    text = " ".join(words)
    text = text[:1].upper() + text[1:]
    return f"{text} [{unit}]" if unit else text


#: JSON Schema's names of the bounds pydantic leaves under their Python names where a field's number type has
#: a validator before it (wss's strict numbers): without this an editor would check no range at all.
_BOUND_KEYWORDS = {"ge": "minimum", "gt": "exclusiveMinimum", "le": "maximum", "lt": "exclusiveMaximum"}


def _pydantic_schema(model: type) -> dict[str, Any]:
    schema = copy.deepcopy(model.model_json_schema())  # type: ignore[attr-defined]
    _json_bounds(schema)
    return schema


def _json_bounds(node: Any) -> None:
    """Rename ``ge``/``gt``/``le``/``lt`` to JSON Schema's keywords wherever a number schema carries them."""
    if isinstance(node, dict):
        if node.get("type") in ("number", "integer"):
            for key, keyword in _BOUND_KEYWORDS.items():
                if key in node:
                    node.setdefault(keyword, node.pop(key))
        for value in node.values():
            _json_bounds(value)
    elif isinstance(node, list):
        for value in node:
            _json_bounds(value)


def _retitle(schema: dict[str, Any]) -> None:
    """Title every property by its name and unit; give group properties their model's description."""
    defs = schema.get("$defs", {})
    for obj in [schema, *defs.values()]:
        for name, prop in obj.get("properties", {}).items():
            prop["title"] = _title(name)
            ref = prop.get("$ref")
            if ref and "description" not in prop:
                target = defs[ref.rsplit("/", 1)[-1]]
                prop["description"] = target.get("description", "")


def _part_defs() -> dict[str, str]:
    """Defs a preset can fill in (def name -> preset kind): their fields are optional in a file, and each takes a
    ``preset`` key.  One per kind of ``HARDWARE_PART_KINDS``, named after its field's class in ``HardwareConfig``."""
    from wss.model.scenario.hardware import HardwareConfig
    from wss.model.scenario.presets import HARDWARE_PART_KINDS

    fields = HardwareConfig.model_fields
    return {getattr(fields[kind].annotation, "__name__", kind): kind for kind in HARDWARE_PART_KINDS}


def _preset_name(kind: str, names: list[str]) -> dict[str, Any]:
    return {"title": f"{kind.replace('_', ' ').capitalize()} preset", "type": "string", "enum": names,
            "description": f"Name of a shipped {kind} preset (wss presets lists them); fields given beside it "
                           "override the preset's."}


def _allow_presets(schema: dict[str, Any], presets: dict[str, list[str]]) -> None:
    """Let hardware, its parts and the model be a preset name, or a mapping with a ``preset`` key."""
    defs = schema["$defs"]
    part_defs = _part_defs()
    for def_name, kind in (*part_defs.items(), ("HardwareConfig", "hardware"), ("ModelConfig", "model")):
        d = defs[def_name]
        name_schema = _preset_name(kind, presets.get(kind, []))
        d["properties"] = {"preset": name_schema, **{k: v for k, v in d["properties"].items() if k != "preset"}}
        required = d.pop("required", [])
        if def_name in ("HardwareConfig", "ModelConfig") and required:
            # Without a preset, the mapping must give what the preset would have.
            d["if"] = {"not": {"required": ["preset"]}}
            d["then"] = {"required": required}
    for def_name in ("InputsConfig",):  # the cluster preset gives them
        defs[def_name].pop("required", None)
    hardware = defs["HardwareConfig"]["properties"]
    for kind in part_defs.values():
        prop = hardware[kind]
        ref = {"$ref": prop.pop("$ref")}
        prop["anyOf"] = [_preset_name(kind, presets.get(kind, [])), ref]
    model = defs["WorkloadConfig"]["properties"]["model"]
    model["anyOf"] = [_preset_name("model", presets["model"]), {"$ref": model.pop("$ref")}]
    top = schema["properties"]["hardware"]
    top["anyOf"] = [_preset_name("hardware", presets["hardware"]), {"$ref": top.pop("$ref")}]
    _allow_storage_preset(defs, presets.get("storage", []))
    _allow_job_preset(schema, presets.get("job", []))


def _allow_job_preset(schema: dict[str, Any], names: list[str]) -> None:
    """``job``: a job preset name or a mapping (fields without a preset go over the system's preset)."""
    defs = schema["$defs"]
    if "JobConfig" not in defs:
        return
    d = defs["JobConfig"]
    d["properties"] = {"preset": _preset_name("job", names), **d["properties"]}
    prop = schema["properties"]["job"]
    prop["anyOf"] = [_preset_name("job", names), *prop["anyOf"]]


def _allow_storage_preset(defs: dict[str, Any], names: list[str]) -> None:
    """``faults.failures.storage``: a storage preset name or a mapping; the loader fills in the default."""
    if "StorageConfig" not in defs:
        return
    d = defs["StorageConfig"]
    d["properties"] = {"preset": _preset_name("storage", names), **d["properties"]}
    d.pop("required", None)
    failures = defs["FailuresConfig"]
    failures["required"] = [r for r in failures.get("required", []) if r != "storage"]
    prop = failures["properties"]["storage"]
    prop["anyOf"] = [_preset_name("storage", names), {"$ref": prop.pop("$ref")}]


def scenario_schema(presets: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario YAML file.

    ``presets`` maps each preset kind (hardware, wafer, memoryx, swarmx, runtime, model) to the
    names editors may complete; default: the shipped ones
    (:func:`wss.model.scenario.presets.list_presets`).
    """
    from wss.model.scenario import Scenario
    from wss.model.scenario.presets import list_presets

    presets = presets if presets is not None else list_presets()
    body = _pydantic_schema(Scenario)
    _retitle(body)
    _allow_presets(body, presets)
    body["title"] = "wss scenario"
    body["description"] = (
        "A wss scenario file: the hardware (usually a preset with a few fields overridden), the workload (a model "
        "preset or its layers), the training and the simulation settings. Units are in the field names. "
        "Reference: docs/reference.md; check a file with `wss validate FILE`."
    )
    return _ordered(body)


def _ordered(body: dict[str, Any]) -> dict[str, Any]:
    """The dialect, title and description first and the definitions last, so the file reads from the top."""
    first: dict[str, Any] = {"$schema": SCHEMA_DIALECT, **{k: body[k] for k in ("title", "description") if k in body}}
    return {**first, **{k: v for k, v in body.items() if k not in first and k != "$defs"}, "$defs": body["$defs"]}


def case_schema(case_model: type, presets: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """The JSON Schema of a validation case file (``wss reproduce``): a published figure and its scenarios.

    ``case_model`` is the pydantic model of a case (:class:`wss.studies.validation.CaseSpec`, passed
    in: a view does not import the studies).  A case's ``scenario`` (or each of its ``scenarios``)
    is an inline scenario (the scenario schema, plus ``set``: overrides by dotted key), a path to a
    scenario file, or ``{path, set}``; in ``scenarios``, also ``{like, set}`` (another of the
    case's scenarios with overrides).
    """
    scenario = scenario_schema(presets)
    body = _pydantic_schema(case_model)
    _retitle(body)
    defs = {**scenario.pop("$defs"), **body.pop("$defs", {})}
    scenario.pop("$schema")
    scenario["properties"]["set"] = _SET
    defs["Scenario"] = scenario
    props = body["properties"]
    props["scenario"] = {"title": "Scenario", "description": props["scenario"]["description"],
                         "anyOf": _case_scenario(like=False)}
    props["scenarios"] = {"title": "Scenarios", "description": props["scenarios"]["description"], "type": "object",
                          "additionalProperties": {"anyOf": _case_scenario(like=True)}}
    body["title"] = "wss validation case"
    body["$defs"] = defs
    return _ordered(body)


_SET = {"title": "Overrides", "type": "object",
        "description": "Overrides by dotted key, as --set takes them (e.g. hardware.wafers: 16), applied after the "
                       "scenario's own fields."}


def _case_scenario(like: bool) -> list[dict[str, Any]]:
    """The forms a case's scenario takes: inline, a path, ``{path, set}`` and (in ``scenarios``) ``{like, set}``."""
    path = {"type": "string", "title": "Path", "description": "A scenario file, relative to the case file."}
    forms: list[dict[str, Any]] = [
        {"$ref": "#/$defs/Scenario"},
        path,
        {"type": "object", "properties": {"path": path, "set": _SET}, "required": ["path"],
         "additionalProperties": False},
    ]
    if like:
        forms.append({"type": "object", "required": ["like"], "additionalProperties": False, "properties": {
            "like": {"type": "string", "title": "Like", "description": "Another scenario of this case to start from."},
            "set": _SET}})
    return forms


def schema_text(schema: dict[str, Any]) -> str:
    """Canonical JSON of a schema: indented, keys in the models' order, one newline at the end."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


# ------------------------------------------------------------------------------------------ reference


@dataclass(frozen=True)
class FieldRow:
    """One field of the reference: where it is, what it takes, in what unit, and what it defaults to."""

    path: str
    type: str
    unit: str
    default: str
    description: str
    group: bool = False


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref")
    return schema["$defs"][ref.rsplit("/", 1)[-1]] if ref else node


def _branches(node: dict[str, Any]) -> list[dict[str, Any]]:
    return list(node.get("anyOf") or node.get("oneOf") or [node])


def _number_text(node: dict[str, Any]) -> str:
    base = {"integer": "integer", "number": "number", "string": "string", "boolean": "boolean", "null": "null",
            "array": "list", "object": "mapping"}.get(node.get("type", ""), node.get("type", "?"))
    lo = ("> {}", node["exclusiveMinimum"]) if "exclusiveMinimum" in node else \
        (">= {}", node["minimum"]) if "minimum" in node else None
    hi = ("< {}", node["exclusiveMaximum"]) if "exclusiveMaximum" in node else \
        ("<= {}", node["maximum"]) if "maximum" in node else None
    if lo and hi:
        left = "(" if lo[0].startswith(">") and "=" not in lo[0] else "["
        right = ")" if "=" not in hi[0] else "]"
        return f"{base} in {left}{lo[1]}, {hi[1]}{right}"
    bounds = [b[0].format(b[1]) for b in (lo, hi) if b is not None]
    return " ".join([base, *bounds])


def type_text(schema: dict[str, Any], node: dict[str, Any]) -> str:
    """A short text of what a property takes: ``number > 0``, ``'auto' or integer > 0``, ``one of: a, b``."""
    parts = []
    for b in _branches(node):
        if "$ref" in b:
            parts.append("mapping")
        elif "enum" in b:
            parts.append("preset name" if b.get("title", "").endswith("preset") else "one of: "
                          + ", ".join(map(str, b["enum"])))
        elif "const" in b:
            parts.append(repr(b["const"]))
        elif b.get("type") == "null":
            parts.append("null")
        else:
            parts.append(_number_text(b))
    return " or ".join(dict.fromkeys(parts))


def _default_text(name: str, node: dict[str, Any], required: bool) -> str:
    if name == "preset":
        return "optional"
    if "default" in node:
        return json.dumps(node["default"])
    return "required" if required else "required, or from a preset"


def _object_branch(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any] | None:
    """The object (a group of fields) a property may be, if any."""
    for b in _branches(node):
        target = _resolve(schema, b)
        if "properties" in target:
            return target
    return None


def field_rows(schema: dict[str, Any], node: dict[str, Any] | None = None, prefix: str = "") -> list[FieldRow]:
    """One :class:`FieldRow` per field of ``schema`` (a :func:`scenario_schema`), groups before their fields.

    Paths are dotted as ``--set`` takes them; a list of layers is ``workload.model.layers.N`` with
    one group per layer kind (``workload.model.layers.N (kind: dense)``).
    """
    node = schema if node is None else node
    rows: list[FieldRow] = []
    required = set(node.get("required", []))
    nested: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    for name, prop in node.get("properties", {}).items():
        path = f"{prefix}{name}"
        unit = "fraction" if prefix.endswith(".sparsity.") else unit_of(name)  # sparsity by role
        group = _object_branch(schema, prop)
        items = [_resolve(schema, b) for b in _branches(prop["items"])] if prop.get("type") == "array" and \
            "items" in prop else []
        if any("properties" in item for item in items):
            # A model's layers, told apart by kind; other lists (faults) may have a kind field but one item type.
            layers = name == "layers" and all("kind" in item.get("properties", {}) for item in items)
            # A list of other mappings (faults) defaults to empty; pydantic writes no default for a default factory.
            default = _default_text(name, prop, name in required) if layers or name in required else "[]"
            rows.append(FieldRow(path, "list of layers" if layers else "list of mappings", "", default,
                                 prop.get("description", "")))
            for item in items:
                kind = item["properties"]["kind"].get("const") if layers else None
                nested.append((f"{path}.N", item, {"kind": kind} if kind else {}))
            continue
        rows.append(FieldRow(path, type_text(schema, prop), unit,
                             "" if group is not None and "default" not in prop else
                             _default_text(name, prop, name in required), prop.get("description", "")))
        if group is not None:
            nested.append((path, group, {}))
    for path, group, extra in nested:
        label = f"{path} (kind: {extra['kind']})" if extra else path
        rows.append(FieldRow(label, "mapping", "", "", group.get("description", ""), group=True))
        rows += field_rows(schema, group, f"{path}.")
    return rows


_SPACES = re.compile(r"\s+")


def one_line(text: str) -> str:
    """Collapse whitespace: descriptions are written across lines in the models."""
    return _SPACES.sub(" ", text).strip()
