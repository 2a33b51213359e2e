"""A corpus of programs in the styles models write, run in the real sandbox with real tools.

Each `corpus/*.js|ts` file is one `exec` program (fan-outs, map/filter/reduce, try/catch around
failing calls, console logging, timers, TypeScript, JSON shaping, string processing, MCP calls);
`corpus/expected.json` holds what it must produce: its final status and value (or error code
and message), and, where the program prints, its `output` entries in order.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from nodmix.codemode import CodeModeEngine
from nodmix.config.schema import MCPServerConfig
from nodmix.mcp import MCPManager
from nodmix.sessions import SessionManager
from nodmix.tools import FunctionTool, ToolContext, ToolResult

from .support import build_harness, make_tool

CORPUS = Path(__file__).resolve().parent / "corpus"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text("utf-8"))
PROGRAMS = sorted(p.name for p in CORPUS.iterdir() if p.suffix in (".js", ".ts"))

WEATHER = {
    "Oslo": (4, "cloudy"),
    "Lima": (19, "mild"),
    "Cairo": (33, "hot"),
    "Perth": (24, "sunny"),
}
USERS = [
    {"id": 1, "name": "Ada", "team": "core", "active": True},
    {"id": 2, "name": "Bo", "team": "web", "active": False},
    {"id": 3, "name": "Cy", "team": "core", "active": True},
    {"id": 4, "name": "Di", "team": "data", "active": True},
    {"id": 5, "name": "Ed", "team": "web", "active": True},
]
DOCS = {
    "release notes": "Release notes\nThe sandbox runs programs.\n"
    "Programs call tools and tools return results.\nThe sandbox keeps programs apart.",
    "unicode": "héllo wörld € 😀",
}


def _order(order_id: int) -> dict[str, Any]:
    return {"id": order_id, "total": order_id * 10 + 5, "status": _status(order_id)}


def _status(order_id: int) -> str:
    return "open" if order_id % 3 == 0 else "paid"


def _tools() -> list[FunctionTool]:
    attempts: dict[str, int] = {}

    async def get_weather(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        temp, summary = WEATHER[args["city"]]
        details = {"city": args["city"], "tempC": temp, "summary": summary}
        return ToolResult.text(f"{args['city']}: {summary}, {temp} C", details=details)

    async def list_users(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(f"{len(USERS)} users", details=USERS)

    async def get_order(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if args["id"] == 404:
            return ToolResult.error("order 404 not found")
        return ToolResult.text(f"order {args['id']}", details=_order(args["id"]))

    async def get_orders_for(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        user = int(args["userId"])
        orders = [_order(user * 10 + k) for k in range(1, user + 1)]
        return ToolResult.text(f"{len(orders)} orders", details=orders)

    async def search_docs(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(DOCS[args["query"]])

    async def flaky(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        n = attempts[args["key"]] = attempts.get(args["key"], 0) + 1
        if n < 3:
            return ToolResult.error(f"service busy ({n})")
        return ToolResult.text(f"ok after {n} attempts")

    async def job_status(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        n = attempts[args["job"]] = attempts.get(args["job"], 0) + 1
        done = n >= 3
        details = {"state": "done" if done else "running", "result": "export.csv" if done else None}
        return ToolResult.text(details["state"], details=details)

    def obj(**props: str) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {k: {"type": v} for k, v in props.items()},
            "required": list(props),
        }

    return [
        make_tool(
            "get_weather",
            get_weather,
            description="Current weather forecast for a city.",
            parameters=obj(city="string"),
        ),
        make_tool("list_users", list_users, description="List the team's users."),
        make_tool(
            "get_order", get_order, description="One order by id.", parameters=obj(id="integer")
        ),
        make_tool(
            "get_orders_for",
            get_orders_for,
            description="The orders of a user.",
            parameters=obj(userId="integer"),
        ),
        make_tool(
            "search_docs",
            search_docs,
            description="Search the documentation.",
            parameters=obj(query="string"),
        ),
        make_tool(
            "flaky",
            flaky,
            description="Fails twice per key, then answers.",
            parameters=obj(key="string"),
        ),
        make_tool(
            "job_status",
            job_status,
            description="Status of an export job.",
            parameters=obj(job="string"),
        ),
    ]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope, so the MCP server starts once for the corpus."""
    return "asyncio"


@pytest.fixture(scope="module")
async def mcp() -> AsyncIterator[MCPManager]:
    servers = {"time": MCPServerConfig(command=sys.executable, args=["-m", "mcp_server_time"])}
    async with MCPManager(servers) as manager:
        yield manager


def test_every_corpus_program_has_an_expected_result() -> None:
    assert sorted(EXPECTED) == PROGRAMS
    assert len(PROGRAMS) >= 20


@pytest.mark.anyio
@pytest.mark.parametrize("name", PROGRAMS)
async def test_corpus_program_produces_its_expected_result(
    name: str,
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    mcp: MCPManager,
) -> None:
    expected = EXPECTED[name]
    uses_mcp = "mcp" in name
    h = await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=_tools(),
        sources=[mcp] if uses_mcp else (),
        mcp=mcp if uses_mcp else None,
    )
    source = (CORPUS / name).read_text("utf-8")
    language = "typescript" if name.endswith(".ts") else "javascript"
    result = await h.exec(source, language=language)
    assert result["status"] == expected["status"], result
    if expected["status"] == "completed":
        assert result["value"] == expected["value"]
    else:
        assert result["code"] == expected["code"]
        assert result["error"] == expected["error"]
    if "output" in expected:
        assert result.get("output", []) == expected["output"]
