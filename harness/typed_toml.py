"""TOML tables into typed values: the one reader every typed input of lbench goes through.

A TOML file (a spec, a claim, a scenario's ``[params]``) can hold anything; its values are
checked against a type annotation before anything compares or converts them.  ``value``
checks one value (an int is accepted, and converted, where a float is wanted; a bool is never
a number), ``load`` builds a dataclass from a table (unknown keys, missing keys and wrong types
refused), ``check_fields`` checks the fields of a dataclass already built (from a table and
command-line options).  Every refusal is ``BadInput`` (exit 2) saying what, where and what to do.

Types understood: ``bool``, ``int``, ``float``, ``str``, ``X | None``, unions, ``list[X]``,
``tuple[X, ...]``, ``dict[str, X]``, ``typing.Any``, bare ``list``/``dict`` and other classes
(checked with ``isinstance``).  This module imports nothing of lbench but its errors.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from harness.errors import BadInput

T = TypeVar("T")

WORDS: dict[object, str] = {int: "an integer", float: "a number", str: "a string", bool: "true or false",
                            list: "a list", dict: "a table"}


def word(hint: object) -> str:
    """The type in words ("an integer", "a list of a string")."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(word(a) for a in args if a is not type(None))
    if origin in (list, tuple) and args:
        return f"a list of {word(args[0])}"
    if origin is dict and args:
        return f"a table of {word(args[1])}"
    return WORDS.get(hint, getattr(hint, "__name__", str(hint)))


def _wrong(name: str, value: object, hint: object, where: str, fix: str, root: str | None) -> BadInput:
    what = "it" if root is None or root == name else name
    return BadInput(f"{root or name} has the wrong type: {what} must be {word(hint)}, not {value!r}"[:300],
                    where=where, hint=fix)


def value(raw: object, hint: object, name: str, where: str, fix: str = "fix the value in the TOML file",
          root: str | None = None) -> Any:
    """``raw`` checked against ``hint`` (and converted: int -> float, list -> tuple), or ``BadInput``
    naming ``name`` (``params.models``; an item: ``params.models has the wrong type: params.models[1]
    must be ...``) at ``where`` with ``fix`` as what to do."""
    root = root or name
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any or hint is object:
        return raw
    if origin in (typing.Union, types.UnionType):
        if raw is None and type(None) in args:
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return value(raw, a, name, where, fix, root)
            except BadInput:
                continue
        raise _wrong(name, raw, hint, where, fix, root)
    if origin in (list, tuple):
        if not isinstance(raw, list):
            raise _wrong(name, raw, hint, where, fix, root)
        items = [value(v, args[0], f"{name}[{i}]", where, fix, root) for i, v in enumerate(raw)] if args else list(raw)
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(raw, dict):
            raise _wrong(name, raw, hint, where, fix, root)
        return {str(k): value(v, args[1], f"{name}.{k}", where, fix, root) for k, v in raw.items()}
    if origin is not None:  # Literal and other forms: not read from TOML here
        return raw
    if hint is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if not isinstance(hint, type) or (hint in (int, float) and isinstance(raw, bool)) or not isinstance(raw, hint):
        raise _wrong(name, raw, hint, where, fix, root)
    return raw


def load(cls: type[T], raw: Mapping[str, object], where: str, *, prefix: str = "", noun: str = "key",
         fix: str = "fix the value in the TOML file") -> T:
    """The dataclass ``cls`` from the table ``raw``: every key a field, every field without a
    default given, every value of its field's type.  ``prefix`` names the table in messages
    (``params.``), ``noun`` its keys (``parameter``)."""
    if not isinstance(raw, Mapping):
        raise BadInput(f"{prefix.rstrip('.') or 'the input'} must be a table, not {raw!r}"[:300], where=where, hint=fix)
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init]  # type: ignore[arg-type]
    names = [f.name for f in fields]
    unknown = sorted(set(raw) - set(names))
    if unknown:
        raise BadInput(f"unknown {noun}(s) {', '.join(unknown)}", where=where,
                       hint=f"known: {', '.join(names) or '(none)'}")
    missing = [f.name for f in fields if f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING and f.name not in raw]
    if missing:
        raise BadInput(f"missing {noun}(s) {', '.join(missing)}", where=where, hint=fix)
    return cls(**{k: value(v, hints[k], prefix + k, where, fix) for k, v in raw.items()})


def check_fields(obj: object, where: str, *, skip: Collection[str] = (),
                 fix: str = "fix the value in the TOML file") -> None:
    """Every field of the dataclass instance ``obj`` (but ``skip``) holds a value of its type."""
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        if f.name not in skip:
            value(getattr(obj, f.name), hints[f.name], f.name, where, fix)
