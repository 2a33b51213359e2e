from __future__ import annotations

import pytest

from nodmix.config.schema import AgentToolsConfig, ToolsConfig
from nodmix.messages import JsonObject
from nodmix.tools.base import FunctionTool, Tool, ToolContext, ToolResult, ToolSource
from nodmix.tools.policy import ToolPolicy, entry_matches


async def _noop(args: JsonObject, ctx: ToolContext) -> ToolResult:
    return ToolResult.text("ok")


def _tool(name: str, owner: str = "core", source: ToolSource = "nodmix") -> Tool:
    return FunctionTool.create(_noop, name=name, description=name, owner=owner, source=source)


READ = _tool("read")
EXEC = _tool("exec")
NOTES_ADD = _tool("notes_add", owner="notes")
TIME = _tool("get_current_time", owner="time", source="mcp")
GITHUB_ISSUE = _tool("create_issue", owner="github", source="mcp")
BROWSER = _tool("click", owner="browser", source="client")
ALL = [READ, EXEC, NOTES_ADD, TIME, GITHUB_ISSUE, BROWSER]


def _names(tools: list[Tool]) -> list[str]:
    return [tool.spec.name for tool in tools]


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("*", ["read", "exec", "notes_add", "get_current_time", "create_issue", "click"]),
        ("read", ["read"]),
        ("nodmix:core:read", ["read"]),
        ("mcp:time:get_current_time", ["get_current_time"]),
        ("mcp:time:*", ["get_current_time"]),
        ("mcp:time", ["get_current_time"]),
        ("time", ["get_current_time"]),
        ("notes", ["notes_add"]),
        ("plugin:notes", ["notes_add"]),
        ("nodmix:notes", ["notes_add"]),
        ("nodmix:core", ["read", "exec"]),
        ("group:core", ["read", "exec"]),
        ("group:plugins", ["notes_add"]),
        ("group:mcp", ["get_current_time", "create_issue"]),
        ("group:client", ["click"]),
        ("group:github", ["create_issue"]),
        ("mcp:*", ["get_current_time", "create_issue"]),
        ("*_add", ["notes_add"]),
        ("plugin:core", []),
        ("Read", []),
        ("", []),
    ],
)
def test_policy_entry_grammar(entry: str, expected: list[str]) -> None:
    assert [t.spec.name for t in ALL if entry_matches(entry, t)] == expected


def test_no_allow_list_allows_everything_not_denied() -> None:
    policy = ToolPolicy(deny=["exec", "group:mcp"])
    assert _names(policy.filter(ALL)) == ["read", "notes_add", "click"]


def test_allow_list_keeps_only_matching_tools_in_order() -> None:
    policy = ToolPolicy(allow=["mcp:time", "read", "notes"])
    assert _names(policy.filter(ALL)) == ["read", "notes_add", "get_current_time"]


def test_deny_wins_over_allow() -> None:
    policy = ToolPolicy(allow=["*"], deny=["nodmix:core:exec"])
    assert "exec" not in _names(policy.filter(ALL))
    assert not policy.allows(EXEC)


def test_empty_allow_list_disables_all_tools() -> None:
    policy = ToolPolicy(allow=[])
    assert policy.disables_tools
    assert policy.filter(ALL) == []
    assert not ToolPolicy().disables_tools


def test_policy_from_config_reads_allow_and_deny() -> None:
    policy = ToolPolicy.from_config(ToolsConfig(allow=["group:core"], deny=["exec"]))
    assert _names(policy.filter(ALL)) == ["read"]
    assert ToolPolicy.from_config(None).filter(ALL) == ALL


def test_agent_allow_replaces_global_allow_and_denies_add_up() -> None:
    global_policy = ToolPolicy.from_config(ToolsConfig(allow=["group:core"], deny=["exec"]))
    merged = global_policy.merged(AgentToolsConfig(allow=["group:mcp", "exec"], deny=["time"]))
    assert merged.allow == ("group:mcp", "exec")
    assert merged.deny == ("exec", "time")
    assert _names(merged.filter(ALL)) == ["create_issue"]


def test_agent_without_allow_keeps_the_global_allow() -> None:
    global_policy = ToolPolicy(allow=["group:core"])
    merged = global_policy.merged(AgentToolsConfig(deny=["read"]))
    assert _names(merged.filter(ALL)) == ["exec"]
    assert global_policy.merged(None) is global_policy


def test_agent_empty_allow_disables_tools_even_with_a_global_allow() -> None:
    merged = ToolPolicy(allow=["*"]).merged(AgentToolsConfig(allow=[]))
    assert merged.disables_tools
