"""YAML reading that keeps line numbers and reads ``4e10`` as a number.

PyYAML follows YAML 1.1, where ``4e10`` (no dot) is a string; people writing
bandwidths expect a float, so the loader adds a resolver for it.  Errors name
the file and line.

A scenario is a small document, so the reader refuses what no scenario needs
and what would cost minutes or gigabytes to read (:data:`LIMITS`): a text of
more than 8 MB, nesting deeper than 32 levels (PyYAML composes recursively,
so a document nested 500 deep would otherwise end in a RecursionError),
aliases whose expansion holds more than 200,000 values (a "billion laughs"
document of a few hundred bytes expands to 10^9 values, and a merge-key bomb
does the same through ``<<``), and integers of more than 400 digits.  The
same limits apply to a mapping handed to the Python API (:func:`check_shape`).

The shipped presets are read by :func:`load_trusted_text` instead: libyaml's
parser (PyYAML's C binding) where PyYAML was built with it, about 15 times
faster on the presets a scenario reads, which is most of ``wss validate``'s
own time.  It has the same resolvers and constructors but not the limits,
whose checks hook the pure-Python composer, so it reads only files wss ships.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from wss.errors import FieldProblem, ScenarioError, shorten

__all__ = ["safe_load_text", "line_map", "check_shape", "Limits", "LIMITS"]


@dataclass(frozen=True)
class Limits:
    """What a scenario document may hold."""

    text_bytes: int = 8 * 2**20
    depth: int = 32
    values: int = 200_000
    digits: int = 400


LIMITS = Limits()


class _TooLarge(yaml.MarkedYAMLError):
    """A well-formed document past :data:`LIMITS`."""


class _Loader(yaml.SafeLoader):
    """SafeLoader that also reads 1e10-style floats and refuses documents too deep or too large."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        mark = self.peek_event().start_mark
        self._depth += 1
        try:
            if self._depth > LIMITS.depth:
                raise _TooLarge(
                    None, None, f"the document is nested deeper than {LIMITS.depth} levels", mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self) -> Any:
        node = super().compose_document()
        if node is not None and _expanded_size(node, LIMITS.values) > LIMITS.values:
            raise _TooLarge(
                None, None, f"aliases and merges expand the document to more than {LIMITS.values:,} values",
                node.start_mark,
            )
        return node


def _expanded_size(root: yaml.Node, limit: int) -> int:
    """Values in the document with every alias written out, counted up to just past ``limit``.

    Aliases share composed nodes, so sizes are memoised per node: linear in the document however
    far its aliases would expand.
    """
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        total = 1
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                total += size(key) + size(value)
                if total > limit:
                    break
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                total += size(item)
                if total > limit:
                    break
        sizes[id(node)] = total = min(total, limit + 1)
        return total

    return size(root)  # recursion depth is bounded by Limits.depth


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> Any:
    digits = sum(c.isdigit() for c in str(node.value))
    if digits > LIMITS.digits:
        raise _TooLarge(
            None, None, f"an integer of {digits:,} digits; a scenario's numbers have at most {LIMITS.digits}",
            node.start_mark,
        )
    return yaml.SafeLoader.construct_yaml_int(loader, node)


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


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
    """Build a mapping, refusing a key given twice (YAML would silently keep the last) and a key that is a
    list or a mapping (``? [1, 2]``): no scenario field is named by one, and Python cannot hash it."""
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *anchor` keys may be overridden; not duplicates
            continue
        if not isinstance(key_node, yaml.ScalarNode):
            what = "a list" if isinstance(key_node, yaml.SequenceNode) else "a mapping"
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a name or a number, not {what}", key_node.start_mark
            )
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
    """Parse YAML text; a syntax error or a document past :data:`LIMITS` is a ScenarioError naming file and line."""
    if len(text) > LIMITS.text_bytes:
        size = f"{len(text) / 2**20:.1f} MB"
        raise ScenarioError(source, [FieldProblem("", f"{size} of text; a scenario has at most 8 MB")])
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark is not None else None
        msg = f"malformed YAML: {shorten(exc.problem)}" if exc.problem else "malformed YAML"
        if isinstance(exc, _TooLarge):
            msg = f"refused: {exc.problem}"
        raise ScenarioError(source, [FieldProblem("", msg, line)]) from None
    except (yaml.YAMLError, ValueError, RecursionError) as exc:  # ValueError: e.g. a float too long to read
        raise ScenarioError(source, [FieldProblem("", f"malformed YAML: {shorten(str(exc))}")]) from None


_Trusted: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _TrustedLoader(_Trusted):
    """The reader of files wss ships: libyaml's parser where available, the same resolvers and constructors."""


_TrustedLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers
_TrustedLoader.yaml_constructors = dict(_Loader.yaml_constructors)


def load_trusted_text(text: str, source: str) -> Any:
    """Parse a file wss ships (a preset): fast, with the same meaning as :func:`safe_load_text`.

    Not for user input: the size, depth and alias limits are not checked.
    """
    try:
        return yaml.load(text, Loader=_TrustedLoader)
    except yaml.YAMLError as exc:
        raise ScenarioError(source, [FieldProblem("", f"malformed YAML: {shorten(str(exc))}")]) from None


def check_shape(data: Any, source: str) -> None:
    """Refuse a mapping (from the Python API) nested deeper or holding more values than a YAML file may.

    Walks iteratively, counting a shared or repeated object each time it is reached, so a structure
    that contains itself is refused too rather than recursed into.
    """
    stack: list[tuple[Any, int]] = [(data, 1)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        seen += 1
        if depth > LIMITS.depth:
            raise ScenarioError(source, [FieldProblem("", f"nested deeper than {LIMITS.depth} levels")])
        if seen > LIMITS.values:
            raise ScenarioError(source, [FieldProblem("", f"holds more than {LIMITS.values:,} values")])
        if isinstance(value, Mapping):
            stack.extend((v, depth + 1) for v in value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, depth + 1) for v in value)


def line_map(text: str) -> dict[tuple[str, ...], int]:
    """Map each key path (as strings) in a YAML document to its 1-based line."""
    try:
        root = yaml.compose(text, Loader=_Loader)
    except (yaml.YAMLError, ValueError, RecursionError):
        return {}
    out: dict[tuple[str, ...], int] = {}
    visited: set[int] = set()

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        out.setdefault(path, node.start_mark.line + 1)
        if id(node) in visited:  # an alias: its lines are those of its anchor, mapped once
            return
        visited.add(id(node))
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
