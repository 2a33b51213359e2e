"""TypeScript-style declarations of MCP tools, rendered from their JSON Schemas.

Guests read them as virtual files (`API.read("mcp/<server>.d.ts")`) instead of the model
receiving every schema in its prompt. Rules: required parameters first; enums of up to 16
primitives and `oneOf`/`anyOf` of up to 8 members become unions; nested objects render inline;
descriptions become JSDoc (at most 12 lines) and per-field comments with defaults.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_IDENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$]*$")
_MAX_ENUM = 16
_MAX_UNION = 8
_MAX_DOC_LINES = 12
_MAX_DEPTH = 6

RESULT_TYPE = """type McpToolResult = {
  content?: unknown[];
  structuredContent?: unknown;
  isError?: boolean;
  [key: string]: unknown;
};"""


@dataclass(frozen=True, slots=True, kw_only=True)
class DtsMethod:
    """One callable of a server namespace."""

    method: str
    """JS name, e.g. `createIssue`."""
    mcp_name: str
    """The server's own name, e.g. `create_issue` or `resources/read`."""
    description: str
    schema: dict[str, Any]
    group: str | None = None
    """`resources` or `prompts` for the nested groups; None for tools."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DtsServer:
    """One server namespace."""

    identifier: str
    """JS name, e.g. `chromeDevtools`."""
    name: str
    """Configured server name, e.g. `chrome-devtools`."""
    methods: Sequence[DtsMethod] = field(default_factory=tuple)


def render_server(server: DtsServer, only: Sequence[str] | None = None) -> str:
    """`mcp/<server>.d.ts` (or the subset of `only` methods, for `$api(tool)`)."""
    wanted = set(only) if only is not None else None
    methods = [m for m in server.methods if wanted is None or m.method in wanted]
    lines = [
        "type McpApiHeader = { header: string; tools?: unknown[]; schemas?: Record<string, "
        "unknown> };",
        "",
        RESULT_TYPE,
        "",
        f"declare namespace MCP.{server.identifier} {{",
        "  /** This header; `$api(method, { schema: true })` also returns raw schemas. */",
        "  function $api(toolName?: string, options?: { schema?: boolean }): "
        "Promise<McpApiHeader>;",
    ]
    top = sorted((m for m in methods if m.group is None), key=lambda m: m.method)
    for method in top:
        lines.append("")
        lines.extend(_function(method, "  "))
    groups = sorted({m.group for m in methods if m.group is not None})
    for group in groups:
        lines.append("")
        lines.append(f"  namespace {group} {{")
        members = sorted((m for m in methods if m.group == group), key=lambda m: m.method)
        for i, method in enumerate(members):
            if i:
                lines.append("")
            lines.extend(_function(method, "    "))
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_index(servers: Sequence[DtsServer], *, references: bool = True) -> str:
    """`mcp/index.d.ts`: the `MCP` root and its servers."""
    lines = (
        [f'/// <reference path="./{s.identifier}.d.ts" />' for s in servers] if references else []
    )
    if lines:
        lines.append("")
    lines.append("type McpApiHeader = { header: string; servers?: unknown[] };")
    lines.append("")
    lines.append("declare const MCP: {")
    lines.append("  /** The visible MCP servers; call MCP.<server>.$api() for one server. */")
    lines.append("  $api(): Promise<McpApiHeader>;")
    lines.extend(f"  readonly {s.identifier}: typeof MCP.{s.identifier};" for s in servers)
    lines.append("};")
    return "\n".join(lines) + "\n"


def _function(method: DtsMethod, indent: str) -> list[str]:
    schema = method.schema if isinstance(method.schema, dict) else {}
    raw_props = schema.get("properties")
    props: dict[str, Any] = raw_props if isinstance(raw_props, dict) else {}
    required = [r for r in schema.get("required", []) if isinstance(r, str)]
    order = [k for k in required if k in props] + [k for k in props if k not in required]
    out = [f"{indent}/**"]
    doc = [ln.strip() for ln in method.description.splitlines() if ln.strip()][:_MAX_DOC_LINES]
    out.extend(f"{indent} * {_escape(ln)}" for ln in (doc or [f"MCP {method.mcp_name}"]))
    params = [
        (k, _collapse(props[k].get("description", "")))
        for k in order
        if isinstance(props.get(k), dict) and props[k].get("description")
    ]
    if params:
        out.append(f"{indent} *")
        for key, desc in params:
            mark = "" if key in required else "?"
            out.append(f"{indent} * @param {key}{mark} {_escape(desc)}")
    out.append(f"{indent} */")
    if not order:
        out.append(
            f"{indent}function {method.method}(input?: Record<string, never>): "
            "Promise<McpToolResult>;"
        )
        return out
    out.append(f"{indent}function {method.method}(")
    out.append(f"{indent}  input: {{")
    for key in order:
        sub = props[key] if isinstance(props.get(key), dict) else {}
        comment = _field_comment(sub)
        if comment:
            out.append(f"{indent}    {comment}")
        mark = "" if key in required else "?"
        out.append(f"{indent}    {_key(key)}{mark}: {ts_type(sub)};")
    out.append(f"{indent}  }}")
    out.append(f"{indent}): Promise<McpToolResult>;")
    return out


def ts_type(schema: Any, depth: int = 0) -> str:
    """The TypeScript type of a JSON Schema fragment."""
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return "unknown"
    enum = schema.get("enum")
    if (
        isinstance(enum, list)
        and enum
        and len(enum) <= _MAX_ENUM
        and all(v is None or isinstance(v, str | int | float | bool) for v in enum)
    ):
        return " | ".join(json.dumps(v) for v in enum)
    if "const" in schema and isinstance(schema["const"], str | int | float | bool):
        return json.dumps(schema["const"])
    for key in ("oneOf", "anyOf"):
        members = schema.get(key)
        if isinstance(members, list) and 0 < len(members) <= _MAX_UNION:
            return _union(ts_type(m, depth + 1) for m in members)
    kind = schema.get("type")
    if isinstance(kind, list):
        return _union(ts_type({**schema, "type": k}, depth + 1) for k in kind)
    if kind == "string":
        return "string"
    if kind in ("integer", "number"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "null":
        return "null"
    if kind == "array":
        item = ts_type(schema.get("items"), depth + 1)
        return f"({item})[]" if " | " in item else f"{item}[]"
    if kind == "object" or "properties" in schema:
        return _object(schema, depth)
    return "unknown"


def _object(schema: dict[str, Any], depth: int) -> str:
    props = schema.get("properties")
    if not isinstance(props, dict) or not props:
        return "Record<string, unknown>"
    required = {r for r in schema.get("required", []) if isinstance(r, str)}
    parts = [
        f"{_key(k)}{'' if k in required else '?'}: {ts_type(v, depth + 1)}"
        for k, v in props.items()
    ]
    return "{ " + "; ".join(parts) + " }"


def _union(types: Any) -> str:
    return " | ".join(dict.fromkeys(types)) or "unknown"


def _key(name: str) -> str:
    return name if _IDENT.match(name) else json.dumps(name)


def _field_comment(schema: dict[str, Any]) -> str:
    text = _collapse(schema.get("description", ""))
    if "default" in schema:
        if text and not text.endswith((".", "!", "?", ":")):
            text += "."
        text = (text + " " if text else "") + f"Default: {json.dumps(schema['default'])}."
    return f"/** {_escape(text)} */" if text else ""


def _collapse(text: Any) -> str:
    return " ".join(str(text).split())


def _escape(text: str) -> str:
    return text.replace("*/", "* /")
