"""Webhook message templates: `{{body.subject}}`, `{{body.items.0.name}}`.

A placeholder is a dotted path into the request (`body`, and `name` for the mapping's name);
list items are addressed by index. Nothing is evaluated: an unknown path renders as an empty
string, a non-string value as compact JSON. The rendered text is capped in length.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

MAX_RENDERED_CHARS = 20_000
_PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][\w-]*(?:\.[\w-]+)*)\s*\}\}")


def lookup(root: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path (None when any step is missing)."""
    value: Any = root
    for part in path.split("."):
        if isinstance(value, Mapping):
            value = value.get(part)
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def render(template: str, values: Mapping[str, Any]) -> str:
    """`template` with each `{{path}}` replaced by its value."""
    out = _PLACEHOLDER.sub(lambda m: _text(lookup(values, m.group(1))), template)
    return out[:MAX_RENDERED_CHARS]
