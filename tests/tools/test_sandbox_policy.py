"""`tools.sandbox.tools`: what a sandboxed session may use, and how agent settings merge."""

from __future__ import annotations

from nodmix.config.schema import (
    AgentToolsConfig,
    SandboxToolPolicyConfig,
    ToolsConfig,
    ToolsSandboxConfig,
)
from nodmix.tools import FunctionTool, ToolContext, ToolResult, ToolSource
from nodmix.tools.sandbox_policy import sandbox_tool_policy


async def _noop(args: dict[str, object], ctx: ToolContext) -> ToolResult:
    return ToolResult.text("ok")


def _tool(name: str, owner: str = "core", source: ToolSource = "nodmix") -> FunctionTool:
    return FunctionTool.create(_noop, name=name, description=name, owner=owner, source=source)


TOOLS = [
    _tool("read"),
    _tool("exec"),
    _tool("skills_list", owner="skills"),
    _tool("note_add", owner="notes"),
    _tool("time__now", owner="time", source="mcp"),
    _tool("get_weather", owner="app", source="client"),
]


def _names(tools: ToolsConfig, agent: AgentToolsConfig | None = None) -> list[str]:
    return [t.spec.name for t in sandbox_tool_policy(tools, agent).filter(TOOLS)]


def _sandbox(**fields: object) -> ToolsSandboxConfig:
    return ToolsSandboxConfig(tools=SandboxToolPolicyConfig(**fields))  # type: ignore[arg-type]


def test_by_default_only_tools_that_keep_to_the_sandbox_are_allowed() -> None:
    assert _names(ToolsConfig()) == ["read", "exec", "skills_list", "get_weather"]


def test_also_allow_lets_mcp_servers_and_plugins_in_and_deny_takes_out() -> None:
    tools = ToolsConfig(sandbox=_sandbox(also_allow=["bundle-mcp", "notes"], deny=["exec"]))
    assert _names(tools) == ["read", "skills_list", "note_add", "time__now", "get_weather"]


def test_an_agents_allow_replaces_the_list_and_its_also_allow_and_deny_add_up() -> None:
    tools = ToolsConfig(sandbox=_sandbox(also_allow=["mcp:time"], deny=["skills_list"]))
    agent = AgentToolsConfig(sandbox=_sandbox(allow=["read"], also_allow=["notes"]))
    assert _names(tools, agent) == ["read", "note_add", "time__now"]
