"""Both adapters end to end over a real socket against the scripted model server."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from nodmix.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderRequestError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    ProviderUnreachableError,
    RateLimitedError,
)
from nodmix.messages import AssistantMessage, ThinkingBlock, ToolResultMessage, Usage, user_message
from nodmix.providers.anthropic import AnthropicProvider
from nodmix.providers.base import (
    ModelEvent,
    ModelRequest,
    Provider,
    TextDelta,
    ThinkingDelta,
    collect,
)
from nodmix.providers.fake import ModelError, ModelReply, Respond
from nodmix.providers.openai import OpenAIProvider
from nodmix.providers.retry import RetryPolicy, stream_with_retry
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import echo, tool_then_answer
from tests.providers.providers_support import LS_TOOL, READ_TOOL, make_request, text_until_error

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

KEY = "sk-test-0123456789"
APIS = ["openai", "anthropic"]


def make_provider(api: str, base: str, **kwargs: Any) -> OpenAIProvider | AnthropicProvider:
    if api == "openai":
        return OpenAIProvider(name="openai", base_url=f"{base}/v1", api_key=KEY, **kwargs)
    return AnthropicProvider(name="anthropic", base_url=base, api_key=KEY, **kwargs)


@asynccontextmanager
async def serve(
    api: str, respond: Respond, **server_kwargs: Any
) -> AsyncIterator[tuple[ScriptedModelServer, Provider]]:
    async with ScriptedModelServer(respond, api_key=KEY, **server_kwargs) as server:
        provider = make_provider(api, server.url)
        try:
            with anyio.fail_after(5):
                yield server, provider
        finally:
            await provider.aclose()


async def events_of(provider: Provider, request: ModelRequest) -> list[ModelEvent]:
    return [event async for event in provider.stream(request)]


@pytest.mark.parametrize("api", APIS)
async def test_text_streams_in_chunks_with_usage(api: str) -> None:
    async with serve(api, echo.respond) as (server, provider):
        events = await events_of(provider, make_request("stream me back, please"))
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert len(deltas) == 3
    assert "".join(deltas) == "stream me back, please"
    message = await _fold(events, provider)
    assert message.stop_reason == "stop"
    assert message.usage == Usage(input=9, output=6, total_tokens=15)  # (14 + 22) / 4, 22 / 4
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", APIS)
async def test_tool_call_round_trip_feeds_the_result_back(api: str) -> None:
    async with serve(api, tool_then_answer.respond) as (server, provider):
        first = make_request("please read notes.txt", tools=[READ_TOOL, LS_TOOL])
        call_message = await collect(provider, first)
        assert call_message.stop_reason == "toolUse"
        (call,) = call_message.tool_calls
        assert (call.name, call.arguments) == ("read", {"path": "notes.txt"})
        result = ToolResultMessage(
            tool_call_id=call.id,
            tool_name="read",
            content=(user_message("buy milk").content[0],),
            is_error=False,
        )
        second = make_request([*first.messages, call_message, result], tools=[READ_TOOL, LS_TOOL])
        answer = await collect(provider, second)
    assert answer.text == "buy milk"
    assert answer.stop_reason == "stop"
    seen = server.requests[1].request
    assert seen is not None
    last = seen.messages[-1]
    assert isinstance(last, ToolResultMessage)
    assert (last.tool_call_id, last.tool_name, last.text) == (call.id, "read", "buy milk")


@pytest.mark.parametrize("api", APIS)
async def test_reasoning_streams_as_thinking_deltas(api: str) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        return ModelReply(content="42", thinking="six times seven", thinking_signature="c2ln")

    async with serve(api, respond) as (_, provider):
        events = await events_of(provider, make_request("meaning?"))
    thinking = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    assert thinking == "six times seven"
    message = await _fold(events, provider)
    assert message.text == "42"
    if api == "anthropic":  # only Anthropic sends a signature to round-trip
        assert message.content[0] == ThinkingBlock(
            thinking="six times seven", thinking_signature="c2ln"
        )


@pytest.mark.parametrize("api", APIS)
async def test_requests_carry_the_key_and_streaming_options(api: str) -> None:
    async with serve(api, echo.respond) as (server, provider):
        await collect(provider, make_request("hi"))
    recorded = server.requests[0]
    if api == "openai":
        assert recorded.headers["authorization"] == f"Bearer {KEY}"
        assert recorded.body["stream_options"] == {"include_usage": True}
        assert recorded.path == "/v1/chat/completions"
    else:
        assert recorded.headers["x-api-key"] == KEY
        assert recorded.headers["anthropic-version"] == "2023-06-01"
        assert recorded.path == "/v1/messages"
    assert recorded.body["stream"] is True


@pytest.mark.parametrize("api", APIS)
async def test_non_streamed_json_answers_are_accepted(api: str) -> None:
    async with serve(api, tool_then_answer.respond) as (server, provider):
        request = make_request("list src", tools=[LS_TOOL], extra={api: {"stream": False}})
        message = await collect(provider, request)
    assert server.requests[0].body["stream"] is False
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("ls", {"path": "src"})]
    assert message.usage.total_tokens > 0


@pytest.mark.parametrize("api", APIS)
async def test_wrong_key_is_an_auth_error(api: str) -> None:
    async with ScriptedModelServer(echo.respond, api_key="the-right-key") as server:
        provider = make_provider(api, server.url)
        with pytest.raises(ProviderAuthError) as info:
            await collect(provider, make_request())
        await provider.aclose()
    assert info.value.status == 401
    assert str(info.value).startswith(f"{api}: 401 unauthorized: invalid API key")


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ModelError(404, "model 'nope' not found"), ProviderRequestError),
        (
            ModelError(400, "prompt is too long: 300000 tokens > 200000 maximum"),
            ContextOverflowError,
        ),
        (ModelError(413, "request_too_large"), ContextOverflowError),
        (ModelError(500, "boom"), ProviderUnavailableError),
        (ModelError(529, "Overloaded"), ProviderUnavailableError),
    ],
)
@pytest.mark.parametrize("api", APIS)
async def test_http_errors_map_to_error_classes(
    api: str, error: ModelError, kind: type[ProviderError]
) -> None:
    async with serve(api, lambda request: error) as (_, provider):
        with pytest.raises(ProviderError) as info:
            await collect(provider, make_request())
    assert type(info.value) is kind
    assert info.value.status == error.status
    assert error.message in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("api", APIS)
async def test_rate_limit_carries_retry_after(api: str) -> None:
    async with serve(api, lambda request: ModelError(429, "slow down", retry_after=3)) as (
        _,
        provider,
    ):
        with pytest.raises(RateLimitedError) as info:
            await collect(provider, make_request())
    assert info.value.retry_after == 3
    assert str(info.value) == f"{api}: 429 rate limited: slow down" + (
        " (rate_limit_exceeded)" if api == "openai" else " (rate_limit_error)"
    )


@pytest.mark.parametrize("api", APIS)
async def test_server_errors_are_retried_then_succeed(api: str) -> None:
    replies: Iterator[ModelReply | ModelError] = iter(
        [ModelError(500, "boom"), ModelError(503, "again"), ModelReply.text("ok")]
    )
    sleeps: list[float] = []

    async def record(seconds: float) -> None:
        sleeps.append(seconds)

    policy = RetryPolicy(sleep=record, rand=lambda: 0.5)
    async with serve(api, lambda request: next(replies)) as (server, provider):
        events = [e async for e in stream_with_retry(provider, make_request(), policy)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "ok"
    assert sleeps == [0.5, 1.0]
    assert len(server.requests) == 3


@pytest.mark.parametrize("api", APIS)
async def test_error_in_the_middle_of_a_stream_is_raised_after_the_partial_text(api: str) -> None:
    error = ModelError(529, "Overloaded", partial="Half an ans")
    async with serve(api, lambda request: error) as (_, provider):
        seen: list[str] = []
        with pytest.raises(ProviderUnavailableError):
            await text_until_error(provider.stream(make_request()), seen)
    assert "".join(seen) == "Half an ans"


@pytest.mark.parametrize("api", APIS)
async def test_code_mode_guard_refuses_before_anything_is_sent(api: str) -> None:
    async with serve(api, echo.respond) as (server, provider):
        request = make_request(tools=[READ_TOOL], expected_tool_names=frozenset({"exec", "wait"}))
        with pytest.raises(ProviderRequestError) as info:
            await collect(provider, request)
    assert str(info.value) == (
        "code mode payload tool surface violation: expected exec,wait; got read"
    )
    assert server.requests == []


@pytest.mark.parametrize("api", APIS)
async def test_refused_local_connection_fails_at_once_with_a_hint(api: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with make_provider(api, f"http://127.0.0.1:{port}") as provider:
        with anyio.fail_after(5), pytest.raises(ProviderUnreachableError) as info:
            await collect(provider, make_request())
    message = str(info.value)
    assert message.startswith(f"{api}: connection refused at http://127.0.0.1:{port}")
    assert message.endswith("is the model server running?")
    assert not info.value.retryable


@pytest.mark.parametrize("api", APIS)
async def test_credentials_in_the_base_url_stay_out_of_connection_errors(api: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    base = f"http://proxy-user:pw-s3cret@127.0.0.1:{port}/v1?api_key=k-s3cret"
    async with make_provider(api, base) as provider:
        with anyio.fail_after(5), pytest.raises(ProviderError) as info:
            await collect(provider, make_request())
    message = str(info.value)  # the text a chat sees in "Sorry, that failed: ..."
    assert "s3cret" not in message
    assert f"[redacted]@127.0.0.1:{port}/v1" in message


@pytest.mark.parametrize("api", APIS)
async def test_a_server_that_never_answers_times_out_and_may_be_retried(api: str) -> None:
    with socket.socket() as silent:  # accepts connections (backlog) but never responds
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        base = f"http://127.0.0.1:{silent.getsockname()[1]}"
        async with make_provider(api, base, timeout=0.1) as provider:
            with anyio.fail_after(5), pytest.raises(ProviderUnavailableError) as info:
                await collect(provider, make_request())
    assert isinstance(info.value, ProviderTimeoutError)
    assert str(info.value).startswith(f"{api}/test-model did not respond within 0.1 s (idle")


async def _fold(events: list[ModelEvent], provider: Provider) -> AssistantMessage:
    from nodmix.providers.base import ResponseBuilder

    builder = ResponseBuilder()
    for event in events:
        builder.add(event)
    return builder.message(provider=provider.name, model="m", api=provider.api)
