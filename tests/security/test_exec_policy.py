"""Which rules apply to a turn: the origin's defaults, the global keys, the agent's keys."""

from __future__ import annotations

import msgspec

from nodmix.config.schema import AgentToolsConfig, ExecToolConfig, ToolsConfig
from nodmix.origin import TurnOrigin
from nodmix.security.allowlist import Pattern, PatternIndex
from nodmix.security.exec_policy import decide, resolve_rules

OWNER = None  # the owner's turns have no origin
CHANNEL = TurnOrigin(channel="telegram", chat_id="42")


def test_the_owner_keeps_running_commands_and_channels_default_to_allowlist_on_miss() -> None:
    owner = resolve_rules(ToolsConfig(), None, OWNER)
    channel = resolve_rules(ToolsConfig(), None, CHANNEL)
    assert (owner.security, owner.ask, owner.unrestricted) == ("full", "off", True)
    assert (channel.security, channel.ask, channel.timeout_seconds) == ("allowlist", "on-miss", 120)
    assert decide(channel, "id", PatternIndex([]), "main").verdict == "ask"


def test_configured_keys_apply_to_every_origin_and_the_agent_wins() -> None:
    tools = ToolsConfig(exec=ExecToolConfig(security="allowlist", ask="off"))
    agent = AgentToolsConfig(exec=ExecToolConfig(ask="always", approval_timeout_seconds=5))
    assert resolve_rules(tools, None, OWNER).security == "allowlist"
    merged = resolve_rules(tools, agent, CHANNEL)
    assert (merged.security, merged.ask, merged.timeout_seconds) == ("allowlist", "always", 5)


def test_decide_runs_asks_or_denies_with_a_reason() -> None:
    patterns = PatternIndex([Pattern.compile("ls **")])
    allowlist_off = resolve_rules(
        ToolsConfig(exec=ExecToolConfig(security="allowlist", ask="off")), None, OWNER
    )
    assert decide(allowlist_off, "ls -la", patterns, "main").verdict == "run"
    refused = decide(allowlist_off, "rm -rf x", patterns, "main")
    assert refused.verdict == "deny" and "tools.exec.ask: off" in refused.reason
    denied = decide(
        resolve_rules(ToolsConfig(exec=ExecToolConfig(security="deny")), None, OWNER),
        "ls",
        patterns,
        "main",
    )
    assert denied.verdict == "deny" and "tools.exec.security: deny" in denied.reason
    always = resolve_rules(ToolsConfig(exec=ExecToolConfig(ask="always")), None, OWNER)
    assert decide(always, "ls", patterns, "main").verdict == "ask"


def test_the_config_keys_parse_from_camel_case_and_reject_unknown_values() -> None:
    parsed = msgspec.convert(
        {"exec": {"security": "allowlist", "ask": "on-miss", "approvalTimeoutSeconds": 30}},
        ToolsConfig,
    )
    assert parsed.exec == ExecToolConfig(
        security="allowlist", ask="on-miss", approval_timeout_seconds=30
    )
    try:
        msgspec.convert({"exec": {"ask": "sometimes"}}, ToolsConfig)
    except msgspec.ValidationError as exc:
        assert "$.exec.ask" in str(exc)
    else:
        raise AssertionError("an unknown ask value was accepted")
