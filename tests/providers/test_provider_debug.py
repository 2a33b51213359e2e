"""Debug logging of model traffic: what each switch logs, and that secrets never appear."""

from __future__ import annotations

import json
import logging

import pytest

from nodmix.providers.anthropic import AnthropicProvider
from nodmix.providers.base import Provider, collect
from nodmix.providers.debug import DebugSettings, is_secret_key, redact, redact_text
from nodmix.providers.openai import OpenAIProvider
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import echo
from tests.providers.providers_support import LS_TOOL, READ_TOOL, make_request

KEY = "sk-secret-abcdef123456"


@pytest.mark.parametrize(
    ("env", "settings"),
    [
        ({}, DebugSettings()),
        ({"NODMIX_DEBUG_MODEL_TRANSPORT": "1"}, DebugSettings(transport=True)),
        ({"NODMIX_DEBUG_MODEL_TRANSPORT": "0"}, DebugSettings()),
        ({"NODMIX_DEBUG_MODEL_PAYLOAD": "tools"}, DebugSettings(payload="tools")),
        ({"NODMIX_DEBUG_MODEL_PAYLOAD": "full-redacted"}, DebugSettings(payload="full-redacted")),
        ({"NODMIX_DEBUG_MODEL_PAYLOAD": "bogus"}, DebugSettings()),
        ({"NODMIX_DEBUG_SSE": "events"}, DebugSettings(sse="events")),
        ({"NODMIX_DEBUG_SSE": "PEEK"}, DebugSettings(sse="peek")),
    ],
)
def test_settings_are_read_from_the_environment(
    env: dict[str, str], settings: DebugSettings
) -> None:
    assert DebugSettings.from_env(env) == settings
    assert settings.enabled is (settings != DebugSettings())


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("api_key", True),
        ("apiKey", True),
        ("x-api-key", True),
        ("Authorization", True),
        ("access_token", True),
        ("client_secret", True),
        ("password", True),
        ("max_tokens", False),
        ("max_completion_tokens", False),
        ("input_tokens", False),
        ("model", False),
        ("content", False),
    ],
)
def test_secret_like_field_names_are_recognised(name: str, secret: bool) -> None:
    assert is_secret_key(name) is secret


def test_redaction_masks_secret_fields_values_and_known_secrets_deeply() -> None:
    value = {
        "headers": {"authorization": "Bearer abc", "x-api-key": KEY, "accept": "x"},
        "messages": [{"role": "user", "content": f"my key is {KEY} and sk-proj-zzzzzzzzzzzz"}],
        "max_tokens": 10,
        "nested": [{"token": "t"}, ("Bearer eyJhbGciOi", 3)],
    }
    assert redact(value, secrets=[KEY]) == {
        "headers": {"authorization": "[redacted]", "x-api-key": "[redacted]", "accept": "x"},
        "messages": [{"role": "user", "content": "my key is [redacted] and [redacted]"}],
        "max_tokens": 10,
        "nested": [{"token": "[redacted]"}, ["[redacted]", 3]],
    }


def test_url_key_parameters_are_masked() -> None:
    assert redact_text("https://x/v1?key=abc&alt=sse") == "https://x/v1?key=[redacted]&alt=sse"


def provider_for(api: str, server: ScriptedModelServer, debug: DebugSettings) -> Provider:
    if api == "openai":
        return OpenAIProvider(base_url=server.base_url, api_key=KEY, debug=debug)
    return AnthropicProvider(base_url=server.url, api_key=KEY, debug=debug)


async def logged(api: str, debug: DebugSettings, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.set_level(logging.INFO, logger="nodmix.providers")
    async with ScriptedModelServer(echo.respond) as server:
        provider = provider_for(api, server, debug)
        request = make_request(f"my key is {KEY}", tools=[READ_TOOL, LS_TOOL])
        await collect(provider, request)
        await provider.aclose()
    lines = [r.getMessage() for r in caplog.records if r.name == "nodmix.providers"]
    assert all(KEY not in line for line in lines)
    return lines


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_transport_logging_shows_url_status_and_timing(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    lines = await logged(api, DebugSettings(transport=True), caplog)
    assert len(lines) == 2
    assert lines[0].startswith(f"{api} POST http://127.0.0.1:")
    assert " -> 200 in " in lines[0] and lines[0].endswith(" ms")
    assert lines[1].startswith(f"{api} stream finished in ")


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_payload_tools_logging_lists_the_final_tool_names(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    assert await logged(api, DebugSettings(payload="tools"), caplog) == [
        f"{api} payload tools: read,ls"
    ]


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_full_redacted_payload_is_valid_json_with_secrets_masked(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    (line,) = await logged(api, DebugSettings(payload="full-redacted"), caplog)
    prefix = f"{api} payload: "
    payload = json.loads(line[len(prefix) :])
    assert payload["model"] == "test-model"
    assert "my key is [redacted]" in json.dumps(payload)


@pytest.mark.anyio
async def test_full_redacted_payload_is_capped(caplog: pytest.LogCaptureFixture) -> None:
    (line,) = await logged(
        "openai", DebugSettings(payload="full-redacted", payload_cap=100), caplog
    )
    assert "… [truncated, " in line
    assert len(line) < 200


@pytest.mark.anyio
@pytest.mark.parametrize(("mode", "count"), [("events", None), ("peek", 5)])
async def test_sse_logging_shows_every_event_or_the_first_five(
    mode: str, count: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    lines = await logged("anthropic", DebugSettings(sse=mode), caplog)  # type: ignore[arg-type]
    assert lines[0].startswith("anthropic sse #1 message_start: {")
    if count is None:
        assert len(lines) > 5
        assert lines[-1].startswith(f"anthropic sse #{len(lines)} message_stop")
    else:
        assert len(lines) == count


@pytest.mark.anyio
async def test_nothing_is_logged_by_default(caplog: pytest.LogCaptureFixture) -> None:
    assert await logged("openai", DebugSettings(), caplog) == []
