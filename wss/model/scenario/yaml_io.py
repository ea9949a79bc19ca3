"""YAML reading that keeps line numbers and reads ``4e10`` as a number.

PyYAML follows YAML 1.1, where ``4e10`` (no dot) is a string; people writing
bandwidths expect a float, so the loader adds a resolver for it.  Errors name
the file and line.  The parser is libyaml's (PyYAML's C binding) where PyYAML
was built with it: about 15 times faster on the presets a scenario reads,
which is most of ``wss validate``'s own time; the pure-Python one otherwise.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from wss.errors import FieldProblem, ScenarioError

__all__ = ["safe_load_text", "line_map"]


_Base: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):
    """SafeLoader (libyaml's parser when available) that also reads 1e10-style floats."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    """Build a mapping, refusing a key given twice (YAML would silently keep the last)."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` keys may be overridden; not duplicates
            continue
        key = loader.construct_object(key_node, deep=deep)
        line = key_node.start_mark.line + 1
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {seen[key]})", key_node.start_mark
            )
        seen[key] = line
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


def _construct_unique_mapping(loader: _Loader, node: yaml.MappingNode) -> dict:
    return _construct_mapping(loader, node, deep=True)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_unique_mapping)


def safe_load_text(text: str, source: str) -> Any:
    """Parse YAML text; a syntax error becomes a ScenarioError naming file and line."""
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        msg = f"malformed YAML: {exc.problem}" if exc.problem else "malformed YAML"
        raise ScenarioError(source, [FieldProblem("", msg, line)]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError(source, [FieldProblem("", f"malformed YAML: {exc}")]) from None


def line_map(text: str) -> dict[tuple[str, ...], int]:
    """Map each key path (as strings) in a YAML document to its 1-based line."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError:
        return {}
    out: dict[tuple[str, ...], int] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        out.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                sub = path + (str(key.value),)
                out[sub] = key.start_mark.line + 1
                walk(value, sub)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, path + (str(i),))

    if root is not None:
        walk(root, ())
    return out
