"""Anthropic stream events -> model events: text, thinking + signature, tool input, usage."""

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
from nodmix.providers.anthropic.encode import message_body, message_events
from nodmix.providers.anthropic.stream import EventParser, parse_message
from nodmix.providers.base import (
    ModelEvent,
    ResponseBuilder,
    ResponseDone,
    TextDelta,
    ThinkingDelta,
    ToolCallEvent,
    UsageEvent,
)


def ev(kind: str, **fields: Any) -> tuple[str, str]:
    return kind, json.dumps({"type": kind, **fields})


def delta(index: int, **fields: Any) -> tuple[str, str]:
    return ev("content_block_delta", index=index, delta=fields)


def parse(*events: tuple[str, str]) -> list[ModelEvent]:
    parser = EventParser(provider="anthropic")
    out: list[ModelEvent] = []
    for name, data in events:
        out.extend(parser.feed(name, data))
    return out + parser.finish()


START = ev(
    "message_start",
    message={
        "usage": {
            "input_tokens": 12,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 7,
            "output_tokens": 1,
        }
    },
)


def test_a_full_stream_yields_thinking_text_tool_call_usage_and_done() -> None:
    events = parse(
        START,
        ev("ping"),
        ev("content_block_start", index=0, content_block={"type": "thinking", "thinking": ""}),
        delta(0, type="thinking_delta", thinking="Hmm, "),
        delta(0, type="thinking_delta", thinking="a file."),
        delta(0, type="signature_delta", signature="SIG"),
        ev("content_block_stop", index=0),
        ev("content_block_start", index=1, content_block={"type": "text", "text": ""}),
        delta(1, type="text_delta", text="Reading"),
        ev("content_block_stop", index=1),
        ev(
            "content_block_start",
            index=2,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}},
        ),
        delta(2, type="input_json_delta", partial_json=""),
        delta(2, type="input_json_delta", partial_json='{"pa'),
        delta(2, type="input_json_delta", partial_json='th": "x"}'),
        ev("content_block_stop", index=2),
        ev("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 30}),
        ev("message_stop"),
    )
    assert events == [
        ThinkingDelta(text="Hmm, "),
        ThinkingDelta(text="a file."),
        ThinkingDelta(text="", signature="SIG"),
        TextDelta(text="Reading"),
        ToolCallEvent(id="toolu_1", name="read", arguments={"path": "x"}),
        UsageEvent(
            usage=Usage(input=12, output=30, cache_read=100, cache_write=7, total_tokens=149)
        ),
        ResponseDone(stop_reason="toolUse"),
    ]


@pytest.mark.parametrize(
    ("reason", "stop"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "toolUse"),
        ("max_tokens", "length"),
        ("refusal", "refusal"),
    ],
)
def test_stop_reasons_map(reason: str, stop: str) -> None:
    events = parse(START, ev("message_delta", delta={"stop_reason": reason}), ev("message_stop"))
    assert events[-1] == ResponseDone(stop_reason=stop)  # type: ignore[arg-type]


def test_context_window_stop_reason_is_an_overflow_error() -> None:
    parser = EventParser(provider="anthropic")
    with pytest.raises(ContextOverflowError):
        parser.feed(*ev("message_delta", delta={"stop_reason": "model_context_window_exceeded"}))


def test_tool_input_given_whole_at_block_start_is_used() -> None:
    events = parse(
        START,
        ev(
            "content_block_start",
            index=0,
            content_block={"type": "tool_use", "id": "t", "name": "ls", "input": {"path": "."}},
        ),
        ev("content_block_stop", index=0),
        ev("message_stop"),
    )
    assert events[0] == ToolCallEvent(id="t", name="ls", arguments={"path": "."})


def test_bad_tool_input_json_is_kept_raw() -> None:
    events = parse(
        ev(
            "content_block_start",
            index=0,
            content_block={"type": "tool_use", "id": "t", "name": "ls", "input": {}},
        ),
        delta(0, type="input_json_delta", partial_json='{"path": '),
        ev("content_block_stop", index=0),
        ev("message_stop"),
    )
    assert events[0] == ToolCallEvent(id="t", name="ls", arguments={"_raw": '{"path": '})


def test_error_event_mid_stream_raises_the_mapped_error() -> None:
    parser = EventParser(provider="anthropic")
    parser.feed(*START)
    with pytest.raises(ProviderUnavailableError) as info:
        parser.feed(*ev("error", error={"type": "overloaded_error", "message": "Overloaded"}))
    assert str(info.value) == "anthropic: 529 overloaded: Overloaded (overloaded_error)"


def test_stream_cut_before_message_stop_is_an_outage() -> None:
    parser = EventParser(provider="anthropic")
    parser.feed(*START)
    with pytest.raises(ProviderUnavailableError, match="ended before"):
        parser.finish()


def test_malformed_event_data_raises() -> None:
    with pytest.raises(ProviderProtocolError, match="malformed"):
        EventParser(provider="anthropic").feed("content_block_delta", "{oops")


def test_unknown_event_types_are_ignored() -> None:
    assert EventParser(provider="anthropic").feed(*ev("brand_new_event", x=1)) == []


MESSAGE = AssistantMessage(
    content=(
        ThinkingBlock(thinking="Considering the request.", thinking_signature="SIG=="),
        TextBlock(text="Here is the plan."),
        ToolCallBlock(id="toolu_9", name="read", arguments={"path": "ü.md"}),
    ),
    usage=Usage(input=40, output=9, cache_read=3, cache_write=2, total_tokens=54),
    stop_reason="toolUse",
)


def fold(events: list[ModelEvent]) -> AssistantMessage:
    builder = ResponseBuilder()
    for event in events:
        builder.add(event)
    return builder.message(provider="", model="", api="")


def test_encoded_stream_parses_back_to_the_same_message() -> None:
    events = parse(
        *(
            (name, json.dumps(data))
            for name, data in message_events(MESSAGE, message_id="m1", model="claude")
        )
    )
    folded = fold(events)
    assert folded.content == MESSAGE.content
    assert folded.usage == MESSAGE.usage
    assert folded.stop_reason == "toolUse"


def test_non_streamed_message_body_parses_to_the_same_message() -> None:
    body = json.dumps(message_body(MESSAGE, message_id="m1", model="claude"))
    folded = fold(parse_message(body, provider="anthropic"))
    assert folded.content == MESSAGE.content
    assert folded.usage == MESSAGE.usage


def test_non_streamed_error_body_raises() -> None:
    body = '{"type": "error", "error": {"type": "rate_limit_error", "message": "slow"}}'
    with pytest.raises(RateLimitedError):
        parse_message(body, provider="anthropic")
