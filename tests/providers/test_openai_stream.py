"""OpenAI stream chunks -> model events: text, reasoning, fragmented tool calls, usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

from nodmix.errors import (
    ContextOverflowError,
    ProviderProtocolError,
    ProviderUnavailableError,
    RateLimitedError,
)
from nodmix.messages import AssistantMessage, TextBlock, ThinkingBlock, ToolCallBlock, Usage
from nodmix.providers.base import (
    ModelEvent,
    ResponseBuilder,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)
from nodmix.providers.openai.encode import completion_body, completion_chunks
from nodmix.providers.openai.stream import ChunkParser, parse_completion, usage_from_openai


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    body: dict[str, Any] = {
        "choices": [{"index": 0, "delta": delta or {}, "finish_reason": finish}]
    }
    body.update(extra)
    return json.dumps(body)


def parse(*datas: str) -> list[ModelEvent]:
    parser = ChunkParser(provider="openai")
    events: list[ModelEvent] = []
    for data in datas:
        events.extend(parser.feed(data))
    return events + parser.finish()


def test_text_and_reasoning_deltas_stream_through() -> None:
    events = parse(
        chunk({"role": "assistant", "content": ""}),
        chunk({"reasoning_content": "Think"}),
        chunk({"reasoning": "ing."}),
        chunk({"reasoning_content": "dup", "reasoning": "dup"}),
        chunk({"content": "Hel"}),
        chunk({"content": "lo"}),
        chunk(finish="stop"),
        "[DONE]",
    )
    assert events == [
        ThinkingDelta(text="Think"),
        ThinkingDelta(text="ing."),
        ThinkingDelta(text="dup"),
        TextDelta(text="Hel"),
        TextDelta(text="lo"),
        ResponseDone(stop_reason="stop"),
    ]


def test_fragmented_tool_calls_are_assembled_by_index() -> None:
    events = parse(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "read", "arguments": ""},
                    }
                ]
            }
        ),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "ls", "arguments": '{"pa'},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"path"'}}]}),
        chunk({"tool_calls": [{"index": 1, "function": {"arguments": 'th": "src"}'}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': "a.txt"}'}}]}),
        chunk(finish="tool_calls"),
        "[DONE]",
    )
    assert events == [
        ToolCallEvent(id="call_a", name="read", arguments={"path": "a.txt"}),
        ToolCallEvent(id="call_b", name="ls", arguments={"path": "src"}),
        ResponseDone(stop_reason="toolUse"),
    ]


def test_bad_tool_arguments_are_kept_raw_instead_of_crashing() -> None:
    events = parse(
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "c",
                        "function": {"name": "read", "arguments": '{"path": "a'},
                    }
                ]
            }
        ),
        chunk(finish="length"),
    )
    assert events == [
        ToolCallEvent(id="c", name="read", arguments={"_raw": '{"path": "a'}),
        ResponseDone(stop_reason="length"),
    ]


def test_tool_calls_without_index_or_id_still_come_out() -> None:
    events = parse(
        chunk({"tool_calls": [{"id": "x1", "function": {"name": "a", "arguments": "{}"}}]}),
        chunk({"tool_calls": [{"id": "x2", "function": {"name": "b", "arguments": {"k": 1}}}]}),
        chunk({"tool_calls": [{"index": 5, "function": {"name": "c", "arguments": "[1]"}}]}),
        chunk(finish="stop"),
    )
    assert events == [
        ToolCallEvent(id="x1", name="a", arguments={}),
        ToolCallEvent(id="x2", name="b", arguments={"k": 1}),
        ToolCallEvent(id="call_5", name="c", arguments={"_raw": "[1]"}),
        ResponseDone(stop_reason="stop"),
    ]


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("stop", "stop"),
        ("tool_calls", "toolUse"),
        ("length", "length"),
        ("content_filter", "content_filter"),
        ("something_new", "stop"),
    ],
)
def test_finish_reasons_map_to_stop_reasons(reason: str, stop: str) -> None:
    assert parse(chunk(finish=reason)) == [ResponseDone(stop_reason=stop)]  # type: ignore[arg-type]


def test_usage_chunk_after_finish_is_reported_with_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "prompt_tokens_details": {"cached_tokens": 60},
    }
    events = parse(
        chunk({"content": "hi"}, usage=None),
        chunk(finish="stop", usage=None),
        json.dumps({"choices": [], "usage": usage}),
        "[DONE]",
    )
    assert events == [
        TextDelta(text="hi"),
        UsageEvent(usage=Usage(input=40, output=20, cache_read=60, total_tokens=120)),
        ResponseDone(stop_reason="stop"),
    ]


def test_usage_without_total_is_summed() -> None:
    assert usage_from_openai({"prompt_tokens": 3, "completion_tokens": 4}) == Usage(
        input=3, output=4, total_tokens=7
    )
    assert usage_from_openai({"prompt_tokens": 10, "prompt_cache_hit_tokens": 4}).cache_read == 4


def test_other_choices_are_ignored() -> None:
    data = json.dumps({"choices": [{"index": 1, "delta": {"content": "other"}}]})
    assert parse(data, "[DONE]") == [ResponseDone(stop_reason="stop")]


def test_a_stream_that_stops_before_finishing_is_an_outage() -> None:
    parser = ChunkParser(provider="openai")
    parser.feed(chunk({"content": "partial"}))
    with pytest.raises(ProviderUnavailableError, match="ended before"):
        parser.finish()


def test_done_without_finish_reason_still_completes() -> None:
    assert parse(chunk({"content": "x"}), "[DONE]")[-1] == ResponseDone(stop_reason="stop")


def test_error_chunks_raise_mapped_errors() -> None:
    parser = ChunkParser(provider="openrouter")
    with pytest.raises(RateLimitedError):
        parser.feed(json.dumps({"error": {"message": "slow down", "code": 429}}))
    with pytest.raises(ContextOverflowError):
        parser.feed(json.dumps({"error": {"message": "maximum context length is 8192"}}))


def test_malformed_chunks_raise_instead_of_passing_silently() -> None:
    with pytest.raises(ProviderProtocolError, match="malformed"):
        ChunkParser(provider="openai").feed("{not json")
    assert ChunkParser(provider="openai").feed("  ") == []


MESSAGE = AssistantMessage(
    content=(
        ThinkingBlock(thinking="Let me think about this."),
        TextBlock(text="Reading the file now."),
        ToolCallBlock(id="call_7", name="read", arguments={"path": "ünï.txt", "n": [1, 2]}),
        ToolCallBlock(id="call_8", name="ls", arguments={}),
    ),
    usage=Usage(input=50, output=10, cache_read=5, total_tokens=65),
    stop_reason="toolUse",
)


def fold(events: list[ModelEvent]) -> AssistantMessage:
    builder = ResponseBuilder()
    for event in events:
        builder.add(event)
    return builder.message(provider="", model="", api="")


def test_encoded_stream_parses_back_to_the_same_message() -> None:
    chunks = completion_chunks(MESSAGE, response_id="r", model="m")
    events = parse(*(json.dumps(c) for c in chunks), "[DONE]")
    assert sum(isinstance(e, TextDelta) for e in events) == 3  # streamed in pieces
    folded = fold(events)
    assert folded.content == MESSAGE.content
    assert folded.usage == MESSAGE.usage
    assert folded.stop_reason == "toolUse"


def test_non_streamed_completion_body_parses_to_the_same_message() -> None:
    body = json.dumps(completion_body(MESSAGE, response_id="r", model="m"))
    folded = fold(parse_completion(body, provider="openai"))
    assert folded.content == MESSAGE.content
    assert folded.usage == MESSAGE.usage
    assert folded.stop_reason == "toolUse"


def test_non_streamed_error_body_raises() -> None:
    with pytest.raises(RateLimitedError):
        parse_completion('{"error": {"message": "x", "code": 429}}', provider="openai")
    with pytest.raises(ProviderProtocolError, match="unexpected response"):
        parse_completion("[]", provider="openai")
