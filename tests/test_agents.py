"""Resolving agent profiles from config."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.agents import resolve_agent
from nodmix.config.loader import validate
from nodmix.config.schema import CodeModeConfig
from nodmix.errors import ConfigError


def test_main_agent_exists_without_config(isolated_state: Path) -> None:
    agent = resolve_agent(validate({}, file="x"), "main")
    assert agent.id == "main"
    assert agent.workspace == isolated_state / "workspace"
    assert agent.model is None


def test_agent_entry_overrides_model_and_workspace(tmp_path: Path) -> None:
    config = validate(
        {
            "agents": {
                "defaults": {"model": {"primary": "openai/a", "fallbacks": ["openai/b"]}},
                "list": [{"id": "ops", "model": "anthropic/c", "workspace": str(tmp_path)}],
            }
        },
        file="x",
    )
    agent = resolve_agent(config, "ops")
    assert agent.model == "anthropic/c"
    assert agent.fallbacks == ("openai/b",)
    assert agent.workspace == tmp_path


def test_agent_code_mode_merges_shallowly_over_global() -> None:
    config = validate(
        {
            "tools": {"codeMode": {"enabled": True, "timeoutMs": 5000, "maxSearchLimit": 20}},
            "agents": {"list": [{"id": "ops", "tools": {"codeMode": {"timeoutMs": 1000}}}]},
        },
        file="x",
    )
    merged = resolve_agent(config, "ops").code_mode
    assert merged == CodeModeConfig(enabled=True, timeout_ms=1000, max_search_limit=20)
    assert resolve_agent(config, "main").code_mode == CodeModeConfig(
        enabled=True, timeout_ms=5000, max_search_limit=20
    )


def test_agent_can_turn_global_code_mode_off() -> None:
    config = validate(
        {
            "tools": {"codeMode": True},
            "agents": {"list": [{"id": "a", "tools": {"codeMode": False}}]},
        },
        file="x",
    )
    assert resolve_agent(config, "a").code_mode == CodeModeConfig(enabled=False)


def test_unknown_agent_is_a_config_error_listing_known_ones() -> None:
    config = validate({"agents": {"list": [{"id": "ops"}]}}, file="x")
    with pytest.raises(ConfigError) as err:
        resolve_agent(config, "nope")
    assert "main" in str(err.value) and "ops" in str(err.value)


def test_turn_and_output_limits_merge_agent_over_defaults() -> None:
    config = validate(
        {
            "agents": {
                "defaults": {"timeoutSeconds": 120, "maxTokens": 2000, "maxOutputBytes": 5000},
                "list": [
                    {"id": "quick", "timeoutSeconds": 30, "modelTimeouts": {"idleSeconds": 5}},
                ],
            }
        },
        file="nodmix.json",
    )
    main, quick = resolve_agent(config, "main"), resolve_agent(config, "quick")
    assert (main.timeout_seconds, main.max_tokens, main.max_output_bytes) == (120, 2000, 5000)
    assert main.model_timeouts is None
    assert (quick.timeout_seconds, quick.max_tokens) == (30, 2000)
    assert quick.model_timeouts is not None and quick.model_timeouts.idle_seconds == 5


def test_limits_default_to_ten_minutes_and_one_mebibyte() -> None:
    main = resolve_agent(validate({}, file="nodmix.json"), "main")
    assert (main.timeout_seconds, main.max_tokens, main.max_output_bytes) == (600, None, 1 << 20)


def test_the_sandbox_defaults_to_non_main_once_a_channel_is_configured() -> None:
    plain = resolve_agent(validate({}, file="x"), "main")
    assert plain.sandbox.mode is None  # off: only the owner can reach the agent
    telegram = {"channels": {"telegram": {"botToken": "123:abc"}}}
    assert resolve_agent(validate(telegram, file="x"), "main").sandbox.mode == "non-main"
    disabled = {"channels": {"telegram": {"botToken": "123:abc", "enabled": False}}}
    assert resolve_agent(validate(disabled, file="x"), "main").sandbox.mode is None
    chosen = {**telegram, "agents": {"defaults": {"sandbox": {"mode": "off"}}}}
    assert resolve_agent(validate(chosen, file="x"), "main").sandbox.mode == "off"
