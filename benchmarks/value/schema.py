"""A compact notation for the JSON Schemas of generated tools.

Each property is one string, `name[!]:type[=description]`:

- `!` marks the property required;
- types: `str`, `text`, `int`, `int(lo,hi)`, `num`, `bool`, `date`, `datetime`, `email`, `url`,
  `id`, `ids`, `list`, `enum(a|b|c)`, and the nested objects `money`, `address`, `period`,
  `person` and `map`;
- without a description one is derived from the name, or (for about one property in five,
  decided by a hash of the tool and property names) left out, as real schemas often do.

`compile_schema` turns a list of such strings into an object schema; it is deterministic.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from typing import Any

_PROP_RE = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*)(?P<req>!?):(?P<type>[a-z]+(?:\([^)]*\))?)")

_NESTED: dict[str, dict[str, Any]] = {
    "money": {
        "type": "object",
        "properties": {
            "amount": {"type": "number", "description": "Amount in major units, e.g. 12.50."},
            "currency": {
                "type": "string",
                "description": "ISO 4217 currency code.",
                "pattern": "^[A-Z]{3}$",
            },
        },
        "required": ["amount", "currency"],
    },
    "address": {
        "type": "object",
        "properties": {
            "line1": {"type": "string"},
            "line2": {"type": "string"},
            "city": {"type": "string"},
            "region": {"type": "string", "description": "State, province or county."},
            "postal_code": {"type": "string"},
            "country": {"type": "string", "description": "ISO 3166-1 alpha-2 country code."},
        },
        "required": ["line1", "city", "country"],
    },
    "period": {
        "type": "object",
        "properties": {
            "start": {"type": "string", "format": "date"},
            "end": {"type": "string", "format": "date"},
        },
        "required": ["start", "end"],
    },
    "person": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "email": {"type": "string", "format": "email"},
        },
        "required": ["email"],
    },
    "map": {"type": "object", "additionalProperties": {"type": "string"}},
}


def humanize(name: str) -> str:
    """`owner_id` -> `Owner id`."""
    words = name.replace("_", " ").strip()
    return words[:1].upper() + words[1:]


def _type_schema(kind: str) -> dict[str, Any]:
    if kind.startswith("enum("):
        return {"type": "string", "enum": kind[5:-1].split("|")}
    if kind.startswith("int("):
        low, high = (int(x) for x in kind[4:-1].split(","))
        return {"type": "integer", "minimum": low, "maximum": high}
    simple: dict[str, dict[str, Any]] = {
        "str": {"type": "string"},
        "text": {"type": "string"},
        "int": {"type": "integer"},
        "num": {"type": "number"},
        "bool": {"type": "boolean"},
        "date": {"type": "string", "format": "date"},
        "datetime": {"type": "string", "format": "date-time"},
        "email": {"type": "string", "format": "email"},
        "url": {"type": "string", "format": "uri"},
        "id": {"type": "string"},
        "ids": {"type": "array", "items": {"type": "string"}},
        "list": {"type": "array", "items": {"type": "string"}},
    }
    if kind in simple:
        return dict(simple[kind])
    if kind in _NESTED:
        nested: dict[str, Any] = _deep_copy(_NESTED[kind])
        return nested
    raise ValueError(f"unknown property type {kind!r}")


def _deep_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _deep_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deep_copy(v) for v in value]
    return value


def _auto_description(name: str, kind: str) -> str:
    if name.endswith("_ids"):
        return f"Ids of the {name[:-4].replace('_', ' ')}s."
    if name.endswith("_id"):
        return f"Id of the {name[:-3].replace('_', ' ')}."
    if kind.startswith("enum("):
        return f"{humanize(name)}."
    if kind == "bool":
        return f"Whether to {name.replace('_', ' ')}." if "_" in name else f"{humanize(name)}."
    return f"{humanize(name)}."


def parse_property(spec: str, salt: str) -> tuple[str, dict[str, Any], bool]:
    """One property string -> `(name, schema, required)`."""
    head, _, description = spec.partition("=")
    match = _PROP_RE.match(head.strip())
    if match is None:
        raise ValueError(f"bad property spec {spec!r}")
    name, kind = match["name"], match["type"]
    schema = _type_schema(kind)
    text = description.strip()
    if not text and zlib.crc32(f"{salt}:{name}".encode()) % 5 != 0:
        text = _auto_description(name, kind)
    if text:
        schema["description"] = text
    return name, schema, bool(match["req"])


def compile_schema(props: Sequence[str], salt: str) -> dict[str, Any]:
    """An object schema from property strings (order kept; `required` when any)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for spec in props:
        name, schema, is_required = parse_property(spec, salt)
        properties[name] = schema
        if is_required:
            required.append(name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def property_name(spec: str) -> str:
    """The name of a property string."""
    match = _PROP_RE.match(spec.partition("=")[0].strip())
    if match is None:
        raise ValueError(f"bad property spec {spec!r}")
    return match["name"]


def is_required(spec: str) -> bool:
    """Whether a property string is marked required."""
    match = _PROP_RE.match(spec.partition("=")[0].strip())
    return bool(match and match["req"])
