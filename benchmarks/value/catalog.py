"""The benchmark catalogs: real core tools, real MCP tool definitions, generated tools.

A catalog of N tools is the first N of one fixed sequence: Nodmix's 5 core tools, the 15 tools
the two MCP servers the project tests with report (`benchmarks/fixtures/mcp_tools.json`, captured
by `scripts/capture_mcp_tools.py`), then the 480 generated tools in a seeded order. The 500-tool
catalog is therefore all of them, and smaller catalogs are prefixes that mix every source.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from benchmarks.value.generator import ToolDef, generate, load_domains, shuffled
from nodmix.mcp import MCPTool, MCPToolDefinition, ToolNamer, assign_server_names
from nodmix.tools import FunctionTool, Tool, ToolContext, ToolResult, core_tools

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
MCP_FIXTURE = FIXTURES / "mcp_tools.json"
SIZES = (10, 50, 200, 500)
FIXED = 20
"""Core and MCP tools at the head of the sequence (never dropped to make room)."""
Body = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


class _OfflineCaller:
    """MCP tools built from the fixture are listed, never called."""

    async def call_tool(
        self, server: str, tool: str, arguments: Mapping[str, Any] | None = None
    ) -> ToolResult:
        return ToolResult.error(f"{server}/{tool}: benchmark fixture, no server attached")


def mcp_tools(path: Path = MCP_FIXTURE, reserved: Iterable[str] = ()) -> list[Tool]:
    """The captured MCP tools, named as `MCPManager.list_tools` names them."""
    data = json.loads(path.read_text(encoding="utf-8"))
    servers: dict[str, Any] = data["servers"]
    parts = assign_server_names(servers)
    namer = ToolNamer(reserved)
    caller = _OfflineCaller()
    out: list[Tool] = []
    for server, listing in servers.items():
        for raw in listing["tools"]:
            definition = MCPToolDefinition(
                server=server,
                name=raw["name"],
                title=raw.get("title"),
                description=raw.get("description", ""),
                input_schema=raw["inputSchema"],
                output_schema=None,
                annotations=raw.get("annotations"),
                raw=raw,
            )
            name = namer.name(parts[server], raw["name"])
            out.append(MCPTool.create(definition, name=name, caller=caller))
    return out


def generated_defs() -> list[ToolDef]:
    """The 480 generated definitions in catalog order."""
    return shuffled(generate(load_domains()))


def _stub(name: str) -> Body:
    async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(json.dumps({"ok": True, "tool": name}), details={"input": args})

    return body


def function_tool(definition: ToolDef, body: Body | None = None) -> FunctionTool:
    """A generated definition as a plugin tool (owner = its domain)."""
    return FunctionTool.create(
        body or _stub(definition.name),
        name=definition.name,
        description=definition.description,
        parameters=definition.parameters,
        owner=definition.owner,
    )


def sequence(bodies: Mapping[str, Body] | None = None) -> list[Tool]:
    """All 500 tools in catalog order (generated tools get `bodies[name]` when given)."""
    bodies = bodies or {}
    core = core_tools(None)
    mcp = mcp_tools(reserved=[t.spec.name for t in core])
    generated = [function_tool(d, bodies.get(d.name)) for d in generated_defs()]
    return [*core, *mcp, *generated]


def catalog_tools(
    size: int, *, include: Sequence[str] = (), bodies: Mapping[str, Body] | None = None
) -> list[Tool]:
    """The first `size` tools; generated tools named in `include` are always in (they take
    the places of the last generated ones)."""
    everything = sequence(bodies)
    if size > len(everything):
        raise ValueError(f"at most {len(everything)} tools")
    wanted = set(include)
    missing = wanted - {t.spec.name for t in everything}
    if missing:
        raise ValueError(f"unknown tools: {sorted(missing)}")
    head = everything[:size]
    extra = [t for t in everything[size:] if t.spec.name in wanted]
    droppable = [i for i, t in enumerate(head) if i >= FIXED and t.spec.name not in wanted]
    if len(droppable) < len(extra):
        raise ValueError(f"{size} tools cannot hold {len(wanted)} required ones")
    dropped = set(droppable[len(droppable) - len(extra) :]) if extra else set()
    return [t for i, t in enumerate(head) if i not in dropped] + extra
