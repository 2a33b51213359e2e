"""The `MCP` namespace of code mode: `MCP.<server>.<tool>({...})`, `$api()` and the `.d.ts` files.

MCP tools stay in the run catalog (policy, hooks, telemetry and transcript projection use the
same entries) but guests reach them only here. Identifiers are camelCase; JavaScript reserved
words and collisions get a suffix. A call takes one object argument: schema defaults are filled
in and missing required fields are reported by name before the server sees the call.
Resources and prompts are exposed as `MCP.<server>.resources.list/read` and
`MCP.<server>.prompts.list/get` for servers that offer them; they run through the same executor
as tools (as synthetic tools that are not in the catalog).
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from nodmix.catalog import CatalogEntry
from nodmix.codemode.dts import DtsMethod, DtsServer, render_index, render_server
from nodmix.tools.base import ToolContext, ToolOrigin, ToolResult, ToolSpec

JS_RESERVED = frozenset(
    "break case catch class const continue debugger default delete do else enum export extends "
    "false finally for function if import in instanceof new null return super switch this throw "
    "true try typeof var void while with yield let static implements interface package private "
    "protected public await arguments eval undefined NaN Infinity".split()
)
RESERVED_MEMBERS = frozenset(
    {"$api", "resources", "prompts", "__proto__", "constructor", "prototype"}
)
API_NOTE_ROOT = (
    "Call MCP.<server>.$api() for a server's TypeScript header, then call its tools with one "
    "object argument matching the input type."
)
API_NOTE_SERVER = "Call MCP tools with one object argument, e.g. MCP.server.tool({ field: value })."


class MCPAccess(Protocol):
    """What the namespace needs from the MCP manager beyond its tools."""

    async def server_info(self, server: str) -> Any: ...

    async def list_resources(self, server: str) -> list[dict[str, Any]]: ...

    async def read_resource(self, server: str, uri: str) -> dict[str, Any]: ...

    async def list_prompts(self, server: str) -> list[dict[str, Any]]: ...

    async def get_prompt(
        self, server: str, name: str, arguments: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...


def js_identifier(raw: str, taken: set[str], *, fallback: str = "tool") -> str:
    """camelCase identifier for `raw`, unique within `taken` (which it extends)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", raw) if w]
    if not words:
        words = [fallback]
    name = words[0][:1].lower() + words[0][1:] + "".join(w[:1].upper() + w[1:] for w in words[1:])
    if name[0].isdigit():
        name = "_" + name
    if name in JS_RESERVED or name in RESERVED_MEMBERS:
        name += "_"
    base, n = name, 2
    while name in taken:
        name = f"{base}{n}"
        n += 1
    taken.add(name)
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPTarget:
    """A callable path of the namespace, resolved on the host."""

    entry: CatalogEntry
    kind: str
    """`mcp` for server tools (resolve to the MCP result), `mcp_aux` for resources/prompts."""
    schema: dict[str, Any]
    label: str

    def resolve(self, args: list[Any]) -> tuple[CatalogEntry, dict[str, Any], str]:
        """Check the guest's arguments: one object, defaults filled, required fields present."""
        if len(args) > 1:
            raise ValueError(f"{self.label} takes one object argument, got {len(args)} arguments")
        value = args[0] if args else {}
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise ValueError(f"{self.label} takes one object argument like {{ field: value }}")
        filled = dict(value)
        props = self.schema.get("properties")
        if isinstance(props, dict):
            for key, sub in props.items():
                if key not in filled and isinstance(sub, dict) and "default" in sub:
                    filled[key] = sub["default"]
        required = [r for r in self.schema.get("required", []) if isinstance(r, str)]
        missing = [r for r in required if r not in filled]
        if missing:
            raise ValueError(f"{self.label} is missing required field(s): {', '.join(missing)}")
        return self.entry, filled, self.kind


@dataclass(slots=True)
class MCPNamespace:
    """Everything the guest and host need for the `MCP` global of one run."""

    descriptor: dict[str, Any] = field(default_factory=dict)
    """Guest tree: server → method → `{"$fn": path}` (plus nested groups)."""
    api: dict[str, Any] = field(default_factory=dict)
    """`$api()` data: root header, per-server headers, tool lists and schemas."""
    files: list[dict[str, Any]] = field(default_factory=list)
    """Virtual `mcp/*.d.ts` files."""
    targets: dict[str, MCPTarget] = field(default_factory=dict)
    servers: list[str] = field(default_factory=list)
    """Visible server identifiers, for the exec description."""


@dataclass(frozen=True, slots=True, kw_only=True)
class _AuxTool:
    """A resources/prompts operation as a tool, so it runs through the executor like the rest."""

    spec: ToolSpec
    origin: ToolOrigin
    run: Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]

    async def call(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        data = await self.run(args)
        return ToolResult.text(json.dumps(data, ensure_ascii=False)[:4000], details=data)


_AUX = {
    ("resources", "list"): ({"type": "object", "properties": {}}, "List the server's resources."),
    ("resources", "read"): (
        {"type": "object", "properties": {"uri": {"type": "string"}}, "required": ["uri"]},
        "Read one resource by URI.",
    ),
    ("prompts", "list"): ({"type": "object", "properties": {}}, "List the server's prompts."),
    ("prompts", "get"): (
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "arguments": {"type": "object", "description": "Prompt arguments"},
            },
            "required": ["name"],
        },
        "Render one prompt by name.",
    ),
}


async def build_mcp_namespace(
    entries: Sequence[CatalogEntry], access: MCPAccess | None
) -> MCPNamespace:
    """Model the `MCP` global from a run's MCP catalog entries."""
    ns = MCPNamespace()
    by_server: dict[str, list[CatalogEntry]] = {}
    for entry in entries:
        by_server.setdefault(entry.source_name, []).append(entry)
    server_ids: set[str] = set()
    dts_servers: list[DtsServer] = []
    for server, server_entries in by_server.items():
        ident = js_identifier(server, server_ids, fallback="server")
        methods, tree = await _server_methods(ns, server, ident, server_entries, access)
        ns.descriptor[ident] = tree
        dts_servers.append(DtsServer(identifier=ident, name=server, methods=methods))
        ns.servers.append(ident)
    if not dts_servers:
        return ns
    index = render_index(dts_servers)
    ns.files.append(_file("mcp/index.d.ts", "Root MCP namespace and the visible servers.", index))
    servers_meta = []
    for dts in dts_servers:
        header = render_server(dts)
        ns.files.append(_file(f"mcp/{dts.identifier}.d.ts", f"MCP server {dts.name}.", header))
        tools = [_method_meta(m) for m in sorted(dts.methods, key=lambda m: m.method)]
        ns.api[dts.identifier] = {
            "server": {"identifier": dts.identifier, "serverName": dts.name},
            "header": header,
            "tools": tools,
            "schemas": {_path(m): m.schema for m in dts.methods},
            "toolHeaders": {_path(m): render_server(dts, [m.method]) for m in dts.methods},
            "note": API_NOTE_SERVER,
        }
        tool_count = sum(1 for m in dts.methods if m.group is None)
        servers_meta.append(
            {"identifier": dts.identifier, "serverName": dts.name, "toolCount": tool_count}
        )
    ns.api["$root"] = {
        "header": render_index(dts_servers, references=False),
        "servers": servers_meta,
        "note": API_NOTE_ROOT,
    }
    return ns


async def _server_methods(
    ns: MCPNamespace,
    server: str,
    ident: str,
    entries: Sequence[CatalogEntry],
    access: MCPAccess | None,
) -> tuple[list[DtsMethod], dict[str, Any]]:
    taken: set[str] = set()
    methods: list[DtsMethod] = []
    tree: dict[str, Any] = {}
    for entry in sorted(entries, key=lambda e: e.id):
        raw = entry.tool.origin.name
        method = js_identifier(raw, taken)
        definition = getattr(entry.tool, "definition", None)
        description = getattr(definition, "description", "") or entry.description
        schema = dict(entry.tool.spec.parameters)
        path = f"MCP.{ident}.{method}"
        tree[method] = {"$fn": path}
        ns.targets[path] = MCPTarget(entry=entry, kind="mcp", schema=schema, label=path)
        methods.append(
            DtsMethod(method=method, mcp_name=raw, description=description, schema=schema)
        )
    if access is None:
        return methods, tree
    try:
        info = await access.server_info(server)
    except Exception:  # a server that cannot say what it offers simply gets no groups
        return methods, tree
    for group in ("resources", "prompts"):
        if not getattr(info, group, False):
            continue
        tree[group] = {}
        for (g, op), (schema, description) in _AUX.items():
            if g != group:
                continue
            path = f"MCP.{ident}.{group}.{op}"
            tool = _aux_tool(access, server, group, op, schema, description)
            entry = CatalogEntry(
                id=tool.origin.id,
                name=tool.spec.name,
                description=description,
                source="mcp",
                source_name=server,
                tool=tool,
            )
            tree[group][op] = {"$fn": path}
            ns.targets[path] = MCPTarget(entry=entry, kind="mcp_aux", schema=schema, label=path)
            methods.append(
                DtsMethod(
                    method=op,
                    mcp_name=f"{group}/{op}",
                    description=description,
                    schema=schema,
                    group=group,
                )
            )
    return methods, tree


def _aux_tool(
    access: MCPAccess, server: str, group: str, op: str, schema: dict[str, Any], description: str
) -> _AuxTool:
    async def run(args: dict[str, Any]) -> dict[str, Any]:
        if (group, op) == ("resources", "list"):
            return {"resources": await access.list_resources(server)}
        if (group, op) == ("resources", "read"):
            return await access.read_resource(server, str(args["uri"]))
        if (group, op) == ("prompts", "list"):
            return {"prompts": await access.list_prompts(server)}
        return await access.get_prompt(server, str(args["name"]), args.get("arguments"))

    name = f"{group}_{op}"
    spec = ToolSpec(name=f"{server}__{name}", description=description, parameters=schema)
    return _AuxTool(spec=spec, origin=ToolOrigin(source="mcp", owner=server, name=name), run=run)


def _path(method: DtsMethod) -> str:
    return f"{method.group}.{method.method}" if method.group else method.method


def _method_meta(method: DtsMethod) -> dict[str, Any]:
    return {
        "method": method.method,
        "path": _path(method).split("."),
        "mcpTool": method.mcp_name,
        "operation": f"{method.group}.{method.method}" if method.group else "tool",
        "description": method.description,
    }


def _file(path: str, description: str, content: str) -> dict[str, Any]:
    return {
        "path": path,
        "description": description,
        "content": content,
        "bytes": len(content.encode()),
    }
