"""Timeouts and the reply byte cap, over real sockets against the scripted model server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from nodmix.errors import ProviderTimeoutError
from nodmix.messages import TextBlock
from nodmix.providers.anthropic import AnthropicProvider
from nodmix.providers.base import ModelRequest, ResponseBuilder, ResponseDone, TextDelta, collect
from nodmix.providers.fake import ModelReply, ModelStall, ReplyToolCall, Respond
from nodmix.providers.limits import CallLimits, OutputBudget
from nodmix.providers.openai import OpenAIProvider
from nodmix.providers.retry import RetryPolicy, stream_with_retry
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import huge, stalls
from tests.providers.providers_support import make_request

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

APIS = ["openai", "anthropic"]
IDLE = 0.5
MARGIN = 5.0
"""How far past its timeout a stalled request may end (a loaded 2-core machine)."""


def make_provider(api: str, server: ScriptedModelServer, **kwargs: Any) -> Any:
    if api == "openai":
        return OpenAIProvider(name="openai", base_url=server.base_url, **kwargs)
    return AnthropicProvider(name="anthropic", base_url=server.url, **kwargs)


@asynccontextmanager
async def served(api: str, respond: Respond, **kwargs: Any) -> AsyncIterator[Any]:
    """A provider of `api` talking to a scripted server answering with `respond`."""
    async with ScriptedModelServer(respond) as server, make_provider(api, server, **kwargs) as p:
        yield p


@pytest.mark.parametrize("api", APIS)
@pytest.mark.parametrize("script", [stalls.hang, stalls.trickle])
async def test_a_stalled_model_ends_within_its_idle_timeout(api: str, script: Any) -> None:
    async with ScriptedModelServer(script) as server:
        limits = CallLimits(connect_seconds=5, idle_seconds=IDLE)
        async with make_provider(api, server, limits=limits) as provider:
            with anyio.fail_after(IDLE + MARGIN), pytest.raises(ProviderTimeoutError) as info:
                await collect(provider, make_request())
    assert str(info.value) == (
        f"{api}/test-model did not respond within 0.5 s (idle timeout; raise"
        f" models.providers.{api}.timeouts.idleSeconds to wait longer)"
    )


@pytest.mark.parametrize("api", APIS)
async def test_keepalives_after_partial_text_do_not_reset_the_idle_timeout(api: str) -> None:
    def respond(request: ModelRequest) -> ModelStall:
        return ModelStall(mode="trickle", partial="thinking out loud", interval=0.05)

    seen: list[str] = []
    async with served(api, respond, limits=CallLimits(idle_seconds=IDLE)) as provider:
        with anyio.fail_after(IDLE + MARGIN), pytest.raises(ProviderTimeoutError):
            async for event in provider.stream(make_request()):
                if isinstance(event, TextDelta):
                    seen.append(event.text)  # noqa: PERF401 - the stream ends by raising
    assert "".join(seen) == "thinking out loud"


@pytest.mark.parametrize("api", APIS)
async def test_the_request_idle_timeout_overrides_the_providers(api: str) -> None:
    async with served(api, stalls.trickle, limits=CallLimits(idle_seconds=300)) as provider:
        request = make_request(idle_timeout=IDLE)
        with anyio.fail_after(IDLE + MARGIN), pytest.raises(ProviderTimeoutError):
            await collect(provider, request)


@pytest.mark.parametrize("api", APIS)
async def test_timeouts_are_retried_before_output(api: str) -> None:
    calls: list[int] = []

    def respond(request: ModelRequest) -> ModelReply | ModelStall:
        calls.append(1)
        return ModelStall() if len(calls) == 1 else ModelReply.text("second try")

    async def no_sleep(seconds: float) -> None:
        return None

    async with served(api, respond, limits=CallLimits(idle_seconds=IDLE)) as provider:
        with anyio.fail_after(IDLE + MARGIN):
            events = stream_with_retry(provider, make_request(), RetryPolicy(sleep=no_sleep))
            text = "".join([e.text async for e in events if isinstance(e, TextDelta)])
    assert text == "second try"
    assert len(calls) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_huge_reply_is_cut_at_the_byte_cap_and_ends_with_length(api: str) -> None:
    cap = 100_000
    async with served(api, huge.respond) as provider:
        events = [e async for e in provider.stream(make_request("4", max_output_bytes=cap))]
    done = events[-1]
    assert isinstance(done, ResponseDone)
    assert done.stop_reason == "length" and done.cut_at_bytes == cap
    builder = ResponseBuilder()
    for event in events:
        builder.add(event)
    message = builder.message(provider=api, model="m", api=api)
    assert message.stop_reason == "length"
    text = message.content[0]
    assert isinstance(text, TextBlock)
    assert text.text == huge.huge_text(cap)


@pytest.mark.parametrize("api", APIS)
async def test_tool_arguments_count_against_the_byte_cap(api: str) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        call = ReplyToolCall("write", {"path": "big.txt", "content": "x" * 200_000})
        return ModelReply(tool_calls=(call,))

    async with ScriptedModelServer(respond) as server, make_provider(api, server) as provider:
        request = make_request(max_output_bytes=50_000)
        message = await collect(provider, request)
    assert message.stop_reason == "length"
    assert message.tool_calls == ()  # a cut-off call is dropped, never run


def test_the_output_budget_cuts_on_a_character_boundary() -> None:
    budget = OutputBudget(5)
    assert budget.take("abc") == "abc"
    assert budget.take("déf") == "d"  # "é" is two bytes and does not fit in the last one
    assert budget.exhausted
    assert budget.take("more") == ""
    unlimited = OutputBudget(None)
    assert unlimited.take("x" * 10) == "x" * 10 and unlimited.charge("y" * 10)
