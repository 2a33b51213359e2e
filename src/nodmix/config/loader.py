"""Load, validate and explain `nodmix.json`.

The file is JSON5 (comments, trailing commas, unquoted keys). Validation is strict; every error
names the file, the dotted key path and what was expected, in one line.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import types
import typing
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from nodmix.config import paths
from nodmix.config.automation_schema import check_deliver_channels
from nodmix.config.channel_schema import check_channel_rules
from nodmix.config.channel_teams_chat import check_endpoint_sections
from nodmix.config.schema import BIND_ALIASES, NodmixConfig
from nodmix.errors import ConfigError

_ERROR_RE = r"(?s)^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$"
_UNKNOWN_RE = r"Object contains unknown field `(?P<field>[^`]*)`"
_TOO_DEEP = "nested too deeply to be a configuration (not valid JSON5)"
_ENV_RE = re.compile(r"^\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)\}$")


class LoadedConfig(msgspec.Struct, frozen=True):
    """A validated config and where it came from."""

    config: NodmixConfig
    path: Path
    exists: bool
    raw: dict[str, Any]


class _DuplicateKey(Exception):
    """A key given twice in one object (JSON would silently keep the last)."""


def _unique_keys(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            shown = key if len(key) <= 60 else key[:60] + "…"
            raise _DuplicateKey(
                f"key {shown!r} appears twice in one object (only one may stay: remove the other)"
            )
        out[key] = value
    return out


def parse_document(text: str, *, file: str) -> dict[str, Any]:
    """Parse JSON5 text into a dict, with a one-line error naming the file and position."""
    if not text.strip():
        return {}
    try:
        # Most files are plain JSON (that is what `nodmix config set` writes); the stdlib parser
        # is far faster than the pure-Python JSON5 one, which only runs when JSON fails.
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except RecursionError:
        raise ConfigError(_TOO_DEEP, file=file) from None
    except _DuplicateKey as exc:
        raise ConfigError(str(exc), file=file) from None
    except ValueError:
        import json5

        try:
            doc = json5.loads(text, object_pairs_hook=_unique_keys)
        except RecursionError:
            raise ConfigError(_TOO_DEEP, file=file) from None
        except _DuplicateKey as exc:
            raise ConfigError(str(exc), file=file) from None
        except ValueError as exc:
            raise ConfigError(_syntax_error(exc), file=file) from None
    if not isinstance(doc, dict):
        raise ConfigError("the top level must be an object", file=file)
    return doc


def validate(raw: Mapping[str, Any], *, file: str) -> NodmixConfig:
    """Validate a parsed document against the schema and the cross-field rules."""
    try:
        config = msgspec.convert(raw, NodmixConfig, strict=True)
    except msgspec.ValidationError as exc:
        key, message = explain(raw, NodmixConfig, str(exc))
        raise ConfigError(message, file=file, key=key or None) from None
    _check_semantics(config, file=file)
    return config


def load_config(path: Path | None = None, *, env: Mapping[str, str] | None = None) -> LoadedConfig:
    """Load the config file (missing file = defaults) and validate it."""
    env = os.environ if env is None else env
    path = path or paths.config_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return LoadedConfig(config=NodmixConfig(), path=path, exists=False, raw={})
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"not UTF-8 text (byte {exc.start}); save the file as UTF-8", file=str(path)
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", file=str(path)) from None
    raw = parse_document(text, file=str(path))
    return LoadedConfig(config=validate(raw, file=str(path)), path=path, exists=True, raw=raw)


def resolve_secret(
    value: str | None, *, key: str, env: Mapping[str, str] | None = None
) -> str | None:
    """Resolve a literal or `${ENV_VAR}` value; a reference to an unset variable is an error."""
    if value is None:
        return None
    match = _ENV_RE.match(value.strip())
    if not match:
        return value
    env = os.environ if env is None else env
    name = match.group("name")
    resolved = env.get(name)
    if not resolved:
        raise ConfigError(f"refers to ${{{name}}}, which is not set in the environment", key=key)
    return resolved


# ---- error explanation ------------------------------------------------------------------------


def _syntax_error(exc: ValueError) -> str:
    """`line L, column C: problem` for a JSON5 syntax error."""
    from nodmix.config.keys import json5_position

    found = json5_position(exc)
    if found is None:
        return f"not valid JSON5: {exc}"
    line, column, problem = found
    return f"line {line}, column {column}: {problem} (not valid JSON5)"


def explain(raw: Any, root: type, error: str) -> tuple[str, str]:
    """Turn a msgspec validation error into `(dotted key, readable message)`."""
    match = re.match(_ERROR_RE, error)
    message = match.group("msg") if match else error
    path = match.group("path") if match and match.group("path") else ""
    segments = _split_path(path)
    if "[...]" in segments:
        refined = _refine(raw, root, segments)
        if refined is not None:
            return refined
    key = _join(segments)
    unknown = re.match(_UNKNOWN_RE, message)
    if unknown:
        field = unknown.group("field")
        allowed = _allowed_keys(root, segments)
        full = f"{key}.{field}" if key else field
        from nodmix.config.keys import suggestion

        close = suggestion(field, allowed)
        hint = close or (f" (expected one of: {', '.join(allowed)})" if allowed else "")
        return full, f"unknown key{hint}"
    message = message.replace("`", "").replace(" | null", "")
    if message.startswith("Invalid enum value"):
        choices = _literal_choices(root, segments)
        if choices:
            message += f" (expected one of: {', '.join(choices)})"
    if message.startswith("Expected "):
        message = "expected " + message[len("Expected ") :]
    regex = re.match(r"expected str matching regex '(?P<pattern>.*)'$", message)
    if regex:
        message = f"expected {_pattern_words(regex.group('pattern'))}"
    return key, message


def _split_path(path: str) -> list[str]:
    return [seg for seg in re.findall(r"\.([^.\[]+)|(\[[^\]]*\])", path) for seg in seg if seg]


def _join(segments: list[str]) -> str:
    out = ""
    for seg in segments:
        out += seg if seg.startswith("[") else (f".{seg}" if out else seg)
    return out


def _refine(raw: Any, root: type, segments: list[str]) -> tuple[str, str] | None:
    """Find which mapping key a `[...]` segment stands for by re-validating its values."""
    index = segments.index("[...]")
    container = _walk_raw(raw, segments[:index])
    value_type = _walk_type(root, segments[:index], mapping_value=True)
    if not isinstance(container, dict) or value_type is None:
        return None
    for name, value in container.items():
        try:
            msgspec.convert(value, value_type, strict=True)
        except msgspec.ValidationError as exc:
            key, message = explain(value, value_type, str(exc))
            prefix = _join([*segments[:index], str(name)])
            return (f"{prefix}.{key}" if key and not key.startswith("[") else prefix + key), message
    return None


def _walk_raw(raw: Any, segments: list[str]) -> Any:
    node = raw
    for seg in segments:
        if seg.startswith("["):
            node = node[int(seg[1:-1])] if isinstance(node, list) else None
        else:
            node = node.get(seg) if isinstance(node, dict) else None
    return node


def _struct_fields(tp: Any) -> dict[str, Any]:
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return {f.encode_name: f.type for f in msgspec.structs.fields(tp)}
    return {}


def _unwrap(tp: Any) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(tp) if a is not type(None)]
    return [tp]


def _walk_type(root: type, segments: list[str], *, mapping_value: bool = False) -> Any:
    tp: Any = root
    for seg in segments:
        nxt = None
        for cand in _unwrap(tp):
            if seg.startswith("[") and typing.get_origin(cand) in (list, tuple):
                nxt = typing.get_args(cand)[0]
            elif seg in _struct_fields(cand):
                nxt = _struct_fields(cand)[seg]
            elif typing.get_origin(cand) is dict and not seg.startswith("["):
                nxt = typing.get_args(cand)[1]
            if nxt is not None:
                break
        if nxt is None:
            return None
        tp = nxt
    if mapping_value:
        for cand in _unwrap(tp):
            if typing.get_origin(cand) is dict:
                return typing.get_args(cand)[1]
        return None
    return tp


def _pattern_words(shown: str) -> str:
    """What a value must look like, for a pattern as msgspec's error shows it (escaped)."""
    from nodmix.config.automation_schema import PATTERN_WORDS
    from nodmix.config.schema import SHARE_PATTERN

    words = {
        **PATTERN_WORDS,
        SHARE_PATTERN: "group:<channel>:<id>, dm:<channel>:<id> or webhook:<name>",
    }
    for pattern, text in words.items():
        if shown in (pattern, pattern.replace("\\", "\\\\")):
            return text
    return f"a value matching {shown}"


def _literal_choices(root: type, segments: list[str]) -> list[str]:
    """The values a `Literal` key takes, as written in the file (`["off", "non-main"]`)."""
    tp = _walk_type(root, segments)
    for cand in _unwrap(tp) if tp is not None else []:
        if typing.get_origin(cand) is typing.Literal:
            return [json.dumps(value) for value in typing.get_args(cand)]
    return []


def _allowed_keys(root: type, segments: list[str]) -> list[str]:
    tp = _walk_type(root, segments)
    for cand in _unwrap(tp) if tp is not None else []:
        fields = _struct_fields(cand)
        if fields:
            return sorted(fields)
    return []


# ---- cross-field rules ------------------------------------------------------------------------


def _check_model_ref(ref: str, *, file: str, key: str) -> None:
    if "/" not in ref or ref.startswith("/") or ref.endswith("/"):
        raise ConfigError(f"expected 'provider/model', got {ref!r}", file=file, key=key)


def is_http_url(text: str) -> bool:
    """Whether `text` is an absolute `http(s)://host...` URL (a model endpoint, a base URL)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(text.strip())
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname)


def _check_heartbeats(config: NodmixConfig, *, file: str) -> None:
    from nodmix.config.automation_schema import duration_seconds

    beat = config.agents.defaults.heartbeat
    if beat is not None and beat.every is not None and duration_seconds(beat.every) < 1:
        raise ConfigError(
            f"{beat.every!r} is under a second: use 1s or more",
            file=file,
            key="agents.defaults.heartbeat.every",
        )


def _check_bind(bind: str | None, *, file: str) -> None:
    text = (bind or "loopback").strip()
    if text in BIND_ALIASES:
        return
    try:
        ipaddress.ip_address(text.strip("[]"))
    except ValueError:
        raise ConfigError(
            f"invalid bind {text!r}: use loopback, lan or an IP address",
            file=file,
            key="gateway.bind",
        ) from None


def _deliver_targets(config: NodmixConfig) -> list[tuple[str, str]]:
    """The `deliver` targets the config names, each with its key."""
    targets = [
        (f"hooks.mappings.{name}.deliver", mapping.deliver)
        for name, mapping in config.hooks.mappings.items()
        if mapping.deliver
    ]
    heartbeat = config.agents.defaults.heartbeat
    if heartbeat is not None and heartbeat.deliver:
        targets.append(("agents.defaults.heartbeat.deliver", heartbeat.deliver))
    return targets


def _check_semantics(config: NodmixConfig, *, file: str) -> None:
    check_channel_rules(config.channels, file=file)
    check_endpoint_sections(config.channels, file=file)
    check_deliver_channels(_deliver_targets(config), config.channels, file=file)
    _check_bind(config.gateway.bind, file=file)
    _check_heartbeats(config, file=file)
    selection = config.agents.defaults.model
    if selection.primary:
        _check_model_ref(selection.primary, file=file, key="agents.defaults.model.primary")
    for i, ref in enumerate(selection.fallbacks):
        _check_model_ref(ref, file=file, key=f"agents.defaults.model.fallbacks[{i}]")
    seen: set[str] = set()
    for i, agent in enumerate(config.agents.entries):
        key = f"agents.list[{i}]"
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", agent.id):
            raise ConfigError(
                "agent id must be lowercase letters, digits, '-' or '_'", file=file, key=f"{key}.id"
            )
        if agent.id in seen:
            raise ConfigError(f"duplicate agent id {agent.id!r}", file=file, key=f"{key}.id")
        seen.add(agent.id)
        if isinstance(agent.model, str):
            _check_model_ref(agent.model, file=file, key=f"{key}.model")
        elif agent.model is not None and agent.model.primary:
            _check_model_ref(agent.model.primary, file=file, key=f"{key}.model.primary")
    for name, server in config.mcp.servers.items():
        key = f"mcp.servers.{name}"
        if bool(server.command) == bool(server.url):
            raise ConfigError(
                "needs exactly one of 'command' (stdio) or 'url' (remote)", file=file, key=key
            )
    _check_providers(config, file=file)


def _check_providers(config: NodmixConfig, *, file: str) -> None:
    for name, provider in config.models.providers.items():
        if provider.base_url is not None and not is_http_url(provider.base_url):
            raise ConfigError(
                f"expected an http:// or https:// URL, got {provider.base_url!r}",
                file=file,
                key=f"models.providers.{name}.baseUrl",
            )
        for i, model in enumerate(provider.models):
            for field in ("context_window", "max_tokens"):
                value = getattr(model, field)
                if value is not None and value <= 0:
                    camel = "contextWindow" if field == "context_window" else "maxTokens"
                    raise ConfigError(
                        "must be a positive integer",
                        file=file,
                        key=f"models.providers.{name}.models[{i}].{camel}",
                    )
