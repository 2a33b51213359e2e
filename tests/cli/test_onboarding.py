"""What the onboarding answers do to a config document."""

from __future__ import annotations

import pytest

from nodmix.cli.onboarding import Answers, apply, provider_choice


def test_a_local_server_becomes_a_provider_with_its_model_and_the_default_primary() -> None:
    answers = Answers(provider="local", model="qwen3", base_url="http://127.0.0.1:8000/v1/")
    doc = apply({"gateway": {"port": 18999}}, answers)
    assert doc["models"]["providers"]["local"] == {
        "api": "openai-completions",
        "baseUrl": "http://127.0.0.1:8000/v1",
        "models": [{"id": "qwen3"}],
    }
    assert doc["agents"]["defaults"]["model"]["primary"] == "local/qwen3"
    assert doc["tools"]["codeMode"] is False and doc["gateway"] == {"port": 18999}


def test_a_hosted_provider_keeps_an_env_reference_and_code_mode_keeps_its_settings() -> None:
    existing = {"tools": {"codeMode": {"enabled": False, "timeoutMs": 5000}}}
    answers = Answers(
        provider="openai", model="gpt-4.1-mini", api_key="${OPENAI_API_KEY}", code_mode=True
    )
    doc = apply(existing, answers)
    assert doc["models"]["providers"]["openai"] == {"apiKey": "${OPENAI_API_KEY}"}
    assert doc["tools"]["codeMode"] == {"enabled": True, "timeoutMs": 5000}
    assert existing["tools"]["codeMode"]["enabled"] is False  # the input is not changed


def test_a_channel_is_added_once_and_its_existing_settings_are_kept() -> None:
    answers = Answers(provider="local", model="m", base_url="http://h/v1", channel="telegram")
    fresh = apply({}, answers)
    kept = apply({"channels": {"telegram": {"dmPolicy": "allowlist"}}}, answers)
    assert fresh["channels"] == {"telegram": {}}
    assert kept["channels"] == {"telegram": {"dmPolicy": "allowlist"}}


def test_an_unknown_provider_names_the_choices() -> None:
    with pytest.raises(ValueError, match="choose one of: openai, anthropic, openrouter, local"):
        provider_choice("mistral")
