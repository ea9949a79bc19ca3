"""Turn pydantic validation errors into one clear :class:`FieldProblem` per field.

Pydantic reports what it tried, not what the user got wrong:

* a plain union (``micro_batch: PosInt | Literal["auto"]``) fails with one
  error per branch, each under a path segment naming the branch
  (``training.micro_batch.constrained-int``, ``...literal['auto']``);
* a discriminated union (the layer list) puts the tag in the path
  (``layers.0.dense.in_features``) and words a bad tag as "Input tag 'denze'
  found using 'kind' does not match any of the expected tags";
* a length-constrained list whose items all failed adds "Tuple should have
  at least 1 item after validation, not 0" on top of the items' errors;
* ``model_validator`` errors start with "Value error, ".

This module walks each error location through the scenario's types to tell
field names from branch labels and tags, and reports: for a plain union,
the branch the input went into (a mapping validated against a model
branch), else one line listing what the field accepts; a bad or missing
tag at the tag field; nothing for a length error the item errors explain.
An unknown field gets a "did you mean" with the closest field of its model
(:func:`did_you_mean`); :func:`field_paths` and :func:`key_types` let the
loader and the sweep check a dotted key against the same types.
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Annotated, Any, Literal, Union

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from wss.errors import FieldProblem, quote
from wss.model.scenario.base import format_bound
from wss.model.scenario.presets import PART_KINDS

__all__ = ["problems_from_errors", "closest", "did_you_mean", "field_paths", "key_types"]

_MESSAGES = {"extra_forbidden": "unknown field", "missing": "required field is missing"}
#: Prefixes pydantic puts before the message of a ValueError / AssertionError raised in a validator.
_VALIDATOR_PREFIXES = ("Value error, ", "Assertion failed, ")
#: "layers.2: ..." - a validator naming the sub-field it is about.
_RELATIVE_PATH = re.compile(r"^([A-Za-z_]\w*(?:\.\w+)*): (.+)$", re.DOTALL)
_BOUNDS = (
    (annotated_types.Gt, "gt"),
    (annotated_types.Ge, "ge"),
    (annotated_types.Lt, "lt"),
    (annotated_types.Le, "le"),
)


@dataclass(frozen=True)
class _Branch:
    """One plain union an error went through, and the branch it is about."""

    path: tuple[str, ...]  # the union field
    label: str  # pydantic's name of the branch
    inside: bool  # the error is about a field inside the branch, not the branch's own type
    members: tuple[Any, ...]  # the union's types (None excluded)


@dataclass(frozen=True)
class _Located:
    err: ErrorDetails
    path: tuple[str, ...]  # field path without branch labels and tags
    branches: tuple[_Branch, ...]  # outermost first
    node: Any  # the type at the end of the path (None when unknown)
    parent: Any = None  # the type holding the last field of the path (None when unknown)


def problems_from_errors(errors: list[ErrorDetails], root: type[BaseModel]) -> list[FieldProblem]:
    """The problems of a pydantic ``ValidationError.errors()`` list raised validating ``root``."""
    located = [_locate(err, root) for err in errors]
    located = [item for item in located if not _explained_length_error(item, located)]
    return _merge(located)


# ---------------------------------------------------------------------------- types


def _unwrap(tp: Any, discriminator: str | None = None) -> tuple[Any, str | None]:
    """Strip Annotated and Optional, keeping a discriminator declared on the way."""
    while True:
        if typing.get_origin(tp) is Annotated:
            base, *meta = typing.get_args(tp)
            for m in meta:
                if isinstance(m, FieldInfo) and isinstance(m.discriminator, str):
                    discriminator = m.discriminator
            tp = base
            continue
        members = _members(tp)
        if members is not None and len(members) == 1:  # X | None: pydantic adds no branch label
            tp = members[0]
            continue
        return tp, discriminator


def _members(tp: Any) -> tuple[Any, ...] | None:
    """The non-None members of a union, or None if ``tp`` is not a union."""
    if typing.get_origin(tp) not in (Union, types.UnionType):
        return None
    return tuple(m for m in typing.get_args(tp) if m is not type(None))


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _child(tp: Any, seg: str) -> tuple[Any, str | None]:
    """The type (and discriminator) of field or item ``seg`` of ``tp``."""
    if _is_model(tp):
        info = tp.model_fields.get(seg)
        if info is None:
            return None, None
        return info.annotation, info.discriminator if isinstance(info.discriminator, str) else None
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is tuple and args:
        if len(args) == 2 and args[1] is Ellipsis:
            return args[0], None
        return (args[int(seg)], None) if seg.isdigit() and int(seg) < len(args) else (None, None)
    if origin in (list, set, frozenset) and args:
        return args[0], None
    if origin is dict and len(args) == 2:
        return args[1], None
    return None, None


def _tagged_member(members: tuple[Any, ...], discriminator: str, tag: str) -> Any:
    for m in members:
        m, _ = _unwrap(m)
        if _is_model(m) and tag in _literal_values(m, discriminator):
            return m
    return None


def _literal_values(model: type[BaseModel], field: str) -> tuple[str, ...]:
    info = model.model_fields.get(field)
    if info is None or typing.get_origin(info.annotation) is not Literal:
        return ()
    return tuple(str(v) for v in typing.get_args(info.annotation))


def _locate(err: ErrorDetails, root: type[BaseModel]) -> _Located:
    loc = [str(p) for p in err["loc"]]
    path: list[str] = []
    branches: list[_Branch] = []
    tp: Any = root
    parent: Any = None
    disc: str | None = None
    for i, seg in enumerate(loc):
        if tp is None:
            path.append(seg)
            continue
        tp, disc = _unwrap(tp, disc)
        members = _members(tp)
        if members is not None:
            if disc is not None:  # a discriminated union: the segment is the tag, not a field
                tp, disc = _tagged_member(members, disc, seg), None
                continue
            inside = i + 1 < len(loc)
            branches.append(_Branch(tuple(path), seg, inside, members))
            tp = next((m for m in (_unwrap(m)[0] for m in members) if _is_model(m) and m.__name__ == seg), None)
            disc = None
            continue
        path.append(seg)
        parent = tp
        tp, disc = _child(tp, seg)
    if tp is not None:
        tp, _ = _unwrap(tp, disc)
    return _Located(err, tuple(path), tuple(branches), tp, parent)


def _describe(tp: Any) -> str:
    """What a value of type ``tp`` is, for 'must be ...' messages."""
    meta: list[Any] = []
    while typing.get_origin(tp) is Annotated:
        tp, *more = typing.get_args(tp)
        for m in more:
            meta.extend(m.metadata if isinstance(m, FieldInfo) else [m])
    if typing.get_origin(tp) is Literal:
        return " or ".join(repr(v) for v in typing.get_args(tp))
    if _is_model(tp):
        return "a mapping"
    nouns = {bool: "true or false", str: "a string", int: "integer", float: "number"}
    noun = nouns.get(tp, getattr(tp, "__name__", str(tp)))
    if tp not in (int, float):
        return noun
    bounds = {}
    for m in meta:
        for cls, name in _BOUNDS:
            if isinstance(m, cls):
                bounds[name] = getattr(m, name)
    article = "an" if noun == "integer" else "a"
    if bounds == {"gt": 0} or (tp is int and bounds == {"ge": 1}):
        return f"a positive {noun}"
    if bounds == {"ge": 0}:
        return f"a non-negative {noun}"
    if set(bounds) == {"ge", "le"}:
        return f"{article} {noun} from {format_bound(bounds['ge'])} to {format_bound(bounds['le'])}"
    words = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    limits = " and ".join(f"{words[k]} {v}" for k, v in bounds.items())
    return f"{article} {noun}" + (f" {limits}" if limits else "")


# ---------------------------------------------------------------------------- errors


def _explained_length_error(item: _Located, everything: list[_Located]) -> bool:
    """A 'too short after validation' error whose input was long enough: its failing items say why."""
    err = item.err
    if err["type"] != "too_short" or not isinstance(err.get("input"), (list, tuple)):
        return False
    if len(err["input"]) < err.get("ctx", {}).get("min_length", 0):
        return False
    n = len(item.path)
    return any(len(o.path) > n and o.path[:n] == item.path for o in everything if o is not item)


def _merge(located: list[_Located]) -> list[FieldProblem]:
    """One problem per error, except the branches of one plain union, which become one problem."""
    out: list[FieldProblem] = []
    groups: dict[tuple[str, ...], list[_Located]] = {}
    order: list[tuple[str, ...] | int] = []
    for i, item in enumerate(located):
        if not item.branches:
            order.append(i)
            continue
        key = item.branches[0].path
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(item)
    for entry in order:
        if isinstance(entry, int):
            out.append(_problem(located[entry]))
            continue
        items = groups[entry]
        inside = [it for it in items if it.branches[0].inside]
        if inside:
            # The input went into a branch (a mapping checked against a model): report that branch's errors.
            label = inside[0].branches[0].label
            chosen = [replace(it, branches=it.branches[1:]) for it in inside if it.branches[0].label == label]
            out.extend(_merge(chosen))
            continue
        first = items[0]
        accepted = " or ".join(_describe(m) for m in first.branches[0].members)
        out.append(FieldProblem(".".join(entry), f"must be {accepted}, got {_shown(first.err.get('input'))}"))
    return out


def _shown(value: Any) -> str:
    return quote(value)


#: Pydantic's range errors, reworded: "must be at most 1e11, got 1e+300".
_RANGE_WORDS = {
    "greater_than_equal": ("at least", "ge"),
    "greater_than": ("more than", "gt"),
    "less_than_equal": ("at most", "le"),
    "less_than": ("less than", "lt"),
}


def _range_message(kind: str, ctx: dict[str, Any], value: Any) -> str | None:
    """The message of a value out of its range, or None if ``kind`` is not a range error."""
    if kind not in _RANGE_WORDS:
        return None
    words, key = _RANGE_WORDS[kind]
    bound = ctx.get(key)
    if not isinstance(bound, (int, float)) or isinstance(bound, bool):
        return None
    return f"must be {words} {format_bound(bound)}, got {quote(value)}"


def _problem(item: _Located) -> FieldProblem:
    err, path = item.err, list(item.path)
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        field = str(ctx.get("discriminator", "")).strip("'\"") or "kind"
        expected = ctx.get("expected_tags") or _expected_tags(item, field)
        path.append(field)
        if kind == "union_tag_invalid":
            message = f"unknown {field} {quote(ctx.get('tag'))}; expected one of {expected}"
        else:
            message = "required field is missing" + (f"; one of {expected}" if expected else "")
        return FieldProblem(".".join(path), message)
    if kind in _SECTION_TYPES and _is_model(item.node):
        return FieldProblem(".".join(path), _section_message(item.node, err.get("input"), path[-1] if path else ""))
    message = _MESSAGES.get(kind, err["msg"])
    ranged = _range_message(kind, ctx, err.get("input"))
    if ranged is not None:
        return FieldProblem(".".join(path), ranged)
    if kind == "extra_forbidden" and path and _is_model(item.parent):
        message += did_you_mean(path[-1], item.parent.model_fields)
    if kind.startswith(("value_error", "assertion_error")):
        for prefix in _VALIDATOR_PREFIXES:
            message = message.removeprefix(prefix)
        match = _RELATIVE_PATH.match(message)
        if match and _is_model(item.node) and match.group(1).split(".")[0] in item.node.model_fields:
            path += match.group(1).split(".")
            message = match.group(2)
    elif "input" in err and kind not in _MESSAGES and not isinstance(err["input"], (dict, list)):
        message = f"{message} (got {quote(err['input'])})"
    return FieldProblem(".".join(path), message)


#: Pydantic's "not a mapping" errors for a field that is a section of fields (they name the model's class).
_SECTION_TYPES = ("model_type", "dict_type", "model_attributes_type")


def _section_message(model: type[BaseModel], value: Any, key: str) -> str:
    """'must be a section of fields (preset, name, core_rows, ...), got 4': the user's words, not the class name.
    A section that can name a shipped preset (``wafer: {preset: wse3}``) lists ``preset`` first."""
    fields = list(model.model_fields)
    if key in PART_KINDS and "preset" not in fields:
        fields.insert(0, "preset")
    shown = ", ".join(fields[:4]) + (", ..." if len(fields) > 4 else "")
    return f"must be a section of fields ({shown}), got {quote(value)}"


def _expected_tags(item: _Located, field: str) -> str:
    """The tags a discriminated union at the error's location accepts, quoted and comma-separated."""
    members = _members(item.node) or ()
    tags = [t for m in members for t in _literal_values(_unwrap(m)[0], field) if _is_model(_unwrap(m)[0])]
    return ", ".join(repr(t) for t in tags)


# ---------------------------------------------------------------------------- keys


def closest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word`` (difflib), or None if none is close."""
    close = difflib.get_close_matches(word, sorted(set(candidates)), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, candidates: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` naming the candidate closest to ``word``, or ``""`` if none is close."""
    close = closest(word, candidates)
    return f"; did you mean {close!r}?" if close else ""


def _branches(tp: Any) -> list[Any]:
    """``tp`` unwrapped, or each member of it if it is a union."""
    tp, _ = _unwrap(tp)
    members = _members(tp)
    return [_unwrap(m)[0] for m in members] if members is not None else [tp]


def field_paths(root: type[BaseModel]) -> list[str]:
    """The dotted path of every field of ``root`` and of the models inside it (list items are not entered)."""
    out: list[str] = []

    def walk(model: type[BaseModel], prefix: str) -> None:
        for name, info in model.model_fields.items():
            out.append(prefix + name)
            for tp in _branches(info.annotation):
                if _is_model(tp):
                    walk(tp, f"{prefix}{name}.")

    walk(root, "")
    return out


def key_types(root: type[BaseModel], key: str) -> list[Any] | None:
    """The types a dotted ``key`` can reach from ``root``, or None if it names no field.

    The key goes through model fields, list and tuple indices, mapping entries and
    every member of a union; a segment under a type this cannot see into is accepted.
    """
    current: list[Any] = [root]
    for seg in key.split("."):
        following: list[Any] = []
        for tp in (b for t in current for b in _branches(t)):
            origin = typing.get_origin(tp)
            if _is_model(tp):
                if seg in tp.model_fields:
                    following.append(tp.model_fields[seg].annotation)
            elif origin is dict or (origin in (list, tuple) and seg.lstrip("-").isdigit()):
                following.append(_child(tp, seg)[0])
            elif tp is Any or tp is None:  # a type this cannot see into
                following.append(Any)
        if not following:
            return None
        current = following
    return current
