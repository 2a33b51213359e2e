"""The in-process scripted models: replies stream like a real adapter's, errors raise alike."""

from __future__ import annotations

import anyio
import pytest

from nodmix.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderRequestError,
    ProviderUnavailableError,
    RateLimitedError,
)
from nodmix.messages import (
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    user_message,
)
from nodmix.providers.base import (
    ModelEvent,
    ModelRequest,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    UsageEvent,
    collect,
)
from nodmix.providers.fake import (
    FunctionProvider,
    ModelError,
    ModelReply,
    ReplyToolCall,
    ScriptedProvider,
    split_text,
)
from tests.providers.providers_support import READ_TOOL, make_request, text_until_error

pytestmark = pytest.mark.anyio


async def events_of(provider: FunctionProvider | ScriptedProvider) -> list[ModelEvent]:
    return [e async for e in provider.stream(make_request("hi there"))]


async def test_text_reply_streams_in_a_few_chunks_then_usage_and_done() -> None:
    provider = FunctionProvider(lambda request: ModelReply.text("Hello, world!"))
    events = await events_of(provider)
    assert events == [
        TextDelta(text="Hello"),
        TextDelta(text=", wor"),
        TextDelta(text="ld!"),
        UsageEvent(usage=Usage(input=6, output=4, total_tokens=10)),
        ResponseDone(stop_reason="stop"),
    ]


async def test_tool_calls_get_sequential_ids_and_stop_with_tool_use() -> None:
    provider = FunctionProvider(
        lambda request: ModelReply(
            content="Reading.",
            thinking="need the file",
            tool_calls=(ReplyToolCall("read", {"path": "a"}), ReplyToolCall("ls", id="mine")),
        )
    )
    message = await collect(provider, make_request())
    assert message.content == (
        ThinkingBlock(thinking="need the file"),
        TextBlock(text="Reading."),
        ToolCallBlock(id="call_1", name="read", arguments={"path": "a"}),
        ToolCallBlock(id="mine", name="ls", arguments={}),
    )
    assert message.stop_reason == "toolUse"
    assert (message.provider, message.api) == ("scripted", "scripted")
    again = await collect(provider, make_request())
    assert again.tool_calls[0].id == "call_2"


async def test_thinking_signature_rides_on_the_last_thinking_chunk() -> None:
    provider = FunctionProvider(
        lambda request: ModelReply(thinking="abcdef", thinking_signature="sig", content="x")
    )
    thinking = [e for e in await events_of(provider) if isinstance(e, ThinkingDelta)]
    assert thinking == [
        ThinkingDelta(text="ab"),
        ThinkingDelta(text="cd"),
        ThinkingDelta(text="ef", signature="sig"),
    ]


async def test_explicit_usage_and_stop_reason_are_reported() -> None:
    usage = Usage(input=1000, output=5, cache_read=50, total_tokens=1055)
    provider = FunctionProvider(
        lambda request: ModelReply(content="cut", usage=usage, stop_reason="length")
    )
    message = await collect(provider, make_request())
    assert (message.usage, message.stop_reason) == (usage, "length")


async def test_async_respond_functions_work_and_requests_are_recorded() -> None:
    async def respond(request: ModelRequest) -> ModelReply:
        return ModelReply.text(f"{len(request.messages)} messages")

    provider = FunctionProvider(respond)
    message = await collect(provider, make_request("q"))
    assert message.text == "1 messages"
    assert [r.messages[0] for r in provider.requests] == [provider.requests[0].messages[0]]
    assert len(provider.requests) == 1


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (ModelError(401, "bad key"), ProviderAuthError),
        (ModelError(404, "no such model"), ProviderRequestError),
        (ModelError(429, "slow", retry_after=2), RateLimitedError),
        (ModelError(400, "prompt is too long: 9 tokens > 8 maximum"), ContextOverflowError),
    ],
)
async def test_scripted_errors_raise_what_an_adapter_would(
    error: ModelError, kind: type[Exception]
) -> None:
    provider = FunctionProvider(lambda request: error, name="openai")
    with pytest.raises(kind) as info:
        await collect(provider, make_request())
    assert str(info.value).startswith(f"openai: {error.status} ")


async def test_partial_text_streams_before_the_error() -> None:
    provider = FunctionProvider(lambda request: ModelError(500, "boom", partial="so far"))
    seen: list[str] = []
    with pytest.raises(ProviderUnavailableError, match="boom"):
        await text_until_error(provider.stream(make_request()), seen)
    assert "".join(seen) == "so far"


async def test_respond_must_return_a_reply() -> None:
    provider = FunctionProvider(lambda request: "oops")  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="ModelReply, ModelError or ModelStall"):
        await collect(provider, make_request())


async def test_the_code_mode_guard_applies_and_records_nothing() -> None:
    provider = FunctionProvider(lambda request: ModelReply.text("x"))
    request = make_request(tools=[READ_TOOL], expected_tool_names=frozenset({"exec", "wait"}))
    with pytest.raises(ProviderRequestError, match="tool surface violation"):
        await collect(provider, request)
    assert provider.requests == []


async def test_scripted_provider_replays_its_list_in_order() -> None:
    def second(request: ModelRequest) -> ModelReply:
        result = request.messages[-1]
        assert isinstance(result, ToolResultMessage)
        return ModelReply.text(f"file says {result.text}")

    provider = ScriptedProvider([ModelReply.tool_call("read", {"path": "n"}), second])
    call = await collect(provider, make_request("read n", tools=[READ_TOOL]))
    result = ToolResultMessage(
        tool_call_id=call.tool_calls[0].id,
        tool_name="read",
        content=(TextBlock(text="42"),),
        is_error=False,
    )
    answer = await collect(provider, make_request([user_message("read n"), call, result]))
    assert answer.text == "file says 42"
    provider.assert_complete()
    assert provider.remaining == 0


async def test_scripted_provider_reports_unused_and_missing_replies() -> None:
    provider = ScriptedProvider([ModelReply.text("a"), ModelReply.text("b")])
    await collect(provider, make_request())
    with pytest.raises(AssertionError, match="1 of 2 replies were not used"):
        provider.assert_complete()
    await collect(provider, make_request())
    with pytest.raises(AssertionError, match="only 2 replies were scripted"):
        await collect(provider, make_request())


async def test_streams_yield_control_between_events() -> None:
    order: list[str] = []

    async def other() -> None:
        order.append("other")

    provider = FunctionProvider(lambda request: ModelReply.text("abc"))
    async with anyio.create_task_group() as tg:
        async for _ in provider.stream(make_request()):
            tg.start_soon(other)
            order.append("event")
    assert order[:3] == ["event", "other", "event"]


def test_split_text_covers_short_and_empty_text() -> None:
    assert split_text("") == []
    assert split_text("ab") == ["a", "b"]
    assert split_text("abcdefg") == ["abc", "def", "g"]
