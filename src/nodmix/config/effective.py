"""The effective configuration `nodmix config get` shows: what the file sets, plus the defaults
that apply where it does not, with secrets redacted.

Defaults the code resolves at use time (a `None` in the schema) are listed in `DEFAULTS`;
anything else unset stays out of the view.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

from nodmix.config.keys import alternatives, schema_type, struct_fields
from nodmix.config.schema import NodmixConfig

DEFAULTS: dict[str, Any] = {
    "gateway.port": 18789,
    "gateway.bind": "loopback",
    "gateway.openai.statelessSessionsKept": 500,
    "agents.defaults.maxSteps": 40,
    "agents.defaults.timeoutSeconds": 600,
    "plugins.slots.contextEngine": "legacy",
    "tools.codeMode": False,
    "tools.exec.approvalTimeoutSeconds": 120,
    "gateway.tools.allowUnauthenticated": False,
}
"""Values the code uses when a key is unset (the schema leaves them `None`)."""

SECRET_FIELDS = frozenset({"apikey", "token", "password", "secret", "authorization"})
"""Field names whose values are redacted: lowercased, without `-`/`_`, ending in one of these
(`botToken`, `accessToken`, `x-api-key`, `apiKey`; not the count `maxTokens`)."""
REDACTED = "***"
_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_URL_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/@]+:)[^@]*@")


class Marked(msgspec.Struct, frozen=True):
    """A value from the defaults rather than the file."""

    value: Any


def effective_tree(config: NodmixConfig, raw: dict[str, Any]) -> Any:
    """The whole effective config: set values as they are, defaults wrapped in `Marked`."""
    return _walk(NodmixConfig, config, raw, "")


def effective_value(
    config: NodmixConfig, raw: dict[str, Any], segments: list[str | int], key: str
) -> Any:
    """The effective value at a key (a `Marked` default, or set values with defaults inside).

    Raises:
        ConfigError: the key is not in the schema (with a "did you mean").
    """
    schema_type(segments, key=key)
    node: Any = effective_tree(config, raw)
    for seg in segments:
        inner = node.value if isinstance(node, Marked) else node
        in_list = isinstance(seg, int) and isinstance(inner, list) and seg < len(inner)
        in_dict = isinstance(seg, str) and isinstance(inner, dict) and seg in inner
        if not (in_list or in_dict):
            return None
        node = inner[seg]
    return node


def _is_secret(field: str) -> bool:
    return re.sub(r"[^a-z0-9]", "", field.lower()).endswith(tuple(SECRET_FIELDS))


def redact(value: Any, *, field: str = "") -> Any:
    """`value` with secret fields replaced by `***` (`${ENV}` references stay visible)."""
    if isinstance(value, Marked):
        return Marked(redact(value.value, field=field))
    if isinstance(value, dict):
        return {k: redact(v, field=k) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v, field=field) for v in value]
    if _is_secret(field) and isinstance(value, str) and value:
        return value if _ENV_REF.match(value) else REDACTED
    if isinstance(value, str) and "://" in value and "@" in value:
        return _URL_PASSWORD.sub(r"\1" + REDACTED + "@", value)  # a database URL's password
    return value


def plain(value: Any) -> Any:
    """The value without `Marked` wrappers (for `--json`)."""
    if isinstance(value, Marked):
        return plain(value.value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def render(value: Any, indent: int = 0) -> str:
    """JSON5-style text with `// default` after every value that comes from the defaults."""
    import json

    pad = "  " * indent
    if isinstance(value, Marked):
        inner = plain(value.value)
        return json.dumps(inner, ensure_ascii=False) + "  // default"
    if isinstance(value, dict) and value:
        lines = [
            f"{pad}  {json.dumps(k)}: {_comma(render(v, indent + 1))}" for k, v in value.items()
        ]
        return "{\n" + "\n".join(lines) + f"\n{pad}}}"
    if isinstance(value, list) and value:
        lines = [f"{pad}  {_comma(render(v, indent + 1))}" for v in value]
        return "[\n" + "\n".join(lines) + f"\n{pad}]"
    return json.dumps(value, ensure_ascii=False)


def _comma(text: str) -> str:
    if text.endswith("  // default"):
        return text[: -len("  // default")] + ",  // default"
    return text + ","


def _walk(tp: Any, value: Any, raw: Any, key: str) -> Any:
    fields = next((struct_fields(alt) for alt in alternatives(tp) if struct_fields(alt)), None)
    if fields is not None and isinstance(value, msgspec.Struct):
        out: dict[str, Any] = {}
        raw_map = raw if isinstance(raw, dict) else {}
        for field in msgspec.structs.fields(type(value)):
            name = field.encode_name
            child_key = f"{key}.{name}" if key else name
            child = getattr(value, field.name)
            if child is None:
                if child_key in DEFAULTS:
                    out[name] = Marked(DEFAULTS[child_key])
                continue
            shown = _walk(fields[name], child, raw_map.get(name), child_key)
            out[name] = shown if name in raw_map else _mark(shown)
        return out
    if isinstance(value, dict):
        raw_map = raw if isinstance(raw, dict) else {}
        value_type = _mapping_value(tp)
        return {k: _walk(value_type, v, raw_map.get(k), f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        raw_list = raw if isinstance(raw, list) else []
        item_type = _list_item(tp)
        return [
            _walk(item_type, v, raw_list[i] if i < len(raw_list) else None, f"{key}[{i}]")
            for i, v in enumerate(value)
        ]
    return msgspec.to_builtins(value)


def _mark(shown: Any) -> Any:
    """A section the file leaves out entirely: every value inside is a default."""
    if isinstance(shown, dict) and shown:
        return {k: v if isinstance(v, Marked) else _mark(v) for k, v in shown.items()}
    return Marked(shown)


def _mapping_value(tp: Any) -> Any:
    import typing

    for alt in alternatives(tp):
        if typing.get_origin(alt) is dict:
            return typing.get_args(alt)[1]
    return Any


def _list_item(tp: Any) -> Any:
    import typing

    for alt in alternatives(tp):
        if typing.get_origin(alt) is list:
            return typing.get_args(alt)[0]
    return Any
