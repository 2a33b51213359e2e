"""Dotted config keys against the schema: the type at a key, "did you mean" for unknown keys,
and how `nodmix config set` reads a value for a key."""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

import msgspec

from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError


def struct_fields(tp: Any) -> dict[str, Any]:
    """`{file name: type}` of a config section (empty for anything else)."""
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return {f.encode_name: f.type for f in msgspec.structs.fields(tp)}
    return {}


def alternatives(tp: Any) -> list[Any]:
    """The members of an optional/union type, without None (Annotated unwrapped)."""
    if typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return [alt for a in typing.get_args(tp) if a is not type(None) for alt in alternatives(a)]
    return [tp]


def suggestion(name: str, choices: typing.Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest choice, or `` when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def schema_type(segments: list[str | int], *, key: str) -> Any:
    """The schema type at a parsed key path.

    Raises:
        ConfigError: a segment names no key of its section (with a "did you mean").
    """
    tp: Any = NodmixConfig
    for depth, seg in enumerate(segments):
        nxt: Any = None
        sections: dict[str, Any] = {}
        for alt in alternatives(tp):
            origin = typing.get_origin(alt)
            if isinstance(seg, int) and origin is list:
                nxt = typing.get_args(alt)[0]
            elif isinstance(seg, str) and origin is dict:
                nxt = typing.get_args(alt)[1]
            elif isinstance(seg, str) and seg in struct_fields(alt):
                nxt = struct_fields(alt)[seg]
            sections.update(struct_fields(alt))
            if nxt is not None:
                break
        if nxt is None:
            where = _prefix(segments[:depth])
            if sections and isinstance(seg, str):
                hint = suggestion(seg, sections)
                raise ConfigError(f"unknown key{hint}", key=f"{where}.{seg}" if where else seg)
            raise ConfigError("no such key in the config schema", key=key)
        tp = nxt
    return tp


def accepts_text(tp: Any) -> bool:
    """Whether a value of type `tp` may be a plain string."""
    for alt in alternatives(tp):
        if alt is str or alt is Any:
            return True
        if typing.get_origin(alt) is typing.Literal and all(
            isinstance(a, str) for a in typing.get_args(alt)
        ):
            return True
    return False


def parse_value_for(key: str, segments: list[str | int], text: str) -> Any:
    """`nodmix config set KEY VALUE`: JSON5 when it parses; bare text for a string-typed key;
    otherwise the JSON5 error, naming the key.

    Raises:
        ConfigError: unknown key, or a value that is neither JSON5 nor allowed as text.
    """
    import json5

    tp = schema_type(segments, key=key)
    try:
        return json5.loads(text)
    except ValueError as exc:
        if accepts_text(tp):
            return text
        raise ConfigError(f"not a valid JSON5 value: {_json5_problem(exc)}", key=key) from None


def json5_position(exc: ValueError) -> tuple[int, int, str] | None:
    """`(line, column, problem)` of a json5 parse error, when its message says."""
    import re

    match = re.match(r"^<string>:(\d+) (.*) at column (\d+)$", str(exc))
    if match is None:
        return None
    problem = match.group(2)
    return int(match.group(1)), int(match.group(3)), problem[:1].lower() + problem[1:]


def _json5_problem(exc: ValueError) -> str:
    found = json5_position(exc)
    if found is None:
        return str(exc)
    line, column, problem = found
    return f"{problem} at column {column}" if line == 1 else f"{problem} (line {line})"


def _prefix(segments: list[str | int]) -> str:
    out = ""
    for seg in segments:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else seg)
    return out
