"""Our requests -> Anthropic Messages JSON, and back (pure, snapshot-style)."""

from __future__ import annotations

import pytest

from nodmix.messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    ToolResultMessage,
    user_message,
)
from nodmix.providers.anthropic.mapping import (
    build_payload,
    payload_tool_names,
    request_from_payload,
    tool_use_id,
)
from tests.providers.providers_support import READ_TOOL, make_request

EPHEMERAL = {"type": "ephemeral"}

CONVERSATION: list[Message] = [
    user_message("Read a and b"),
    AssistantMessage(
        content=(
            ThinkingBlock(thinking="Two reads.", thinking_signature="sig-1"),
            TextBlock(text=""),
            ToolCallBlock(id="toolu_a", name="read", arguments={"path": "a"}),
            ToolCallBlock(id="toolu_b", name="read", arguments={"path": "b"}),
        ),
        api="anthropic-messages",
    ),
    ToolResultMessage(
        tool_call_id="toolu_a", tool_name="read", content=(TextBlock(text="A"),), is_error=False
    ),
    ToolResultMessage(
        tool_call_id="toolu_b",
        tool_name="read",
        content=(TextBlock(text="no such file"),),
        is_error=True,
    ),
    user_message("Summarise."),
]


def test_full_conversation_maps_to_the_expected_payload() -> None:
    request = make_request(CONVERSATION, tools=[READ_TOOL], temperature=0.5)
    assert build_payload(request) == {
        "model": "test-model",
        "max_tokens": 8192,
        "stream": True,
        "system": [{"type": "text", "text": "You are terse.", "cache_control": EPHEMERAL}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Read a and b"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Two reads.", "signature": "sig-1"},
                    {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "a"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "read", "input": {"path": "b"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_b",
                        "content": "no such file",
                        "is_error": True,
                    },
                    {"type": "text", "text": "Summarise.", "cache_control": EPHEMERAL},
                ],
            },
        ],
        "tools": [
            {"name": "read", "description": "Read a file.", "input_schema": READ_TOOL.parameters}
        ],
        "temperature": 0.5,
    }


def test_max_tokens_comes_from_the_request_else_the_model() -> None:
    assert build_payload(make_request(max_tokens=99))["max_tokens"] == 99
    assert build_payload(make_request())["max_tokens"] == 8192


def test_thinking_from_other_providers_or_unsigned_is_not_sent() -> None:
    messages: list[Message] = [
        user_message("q"),
        AssistantMessage(
            content=(ThinkingBlock(thinking="t", thinking_signature="s"), TextBlock(text="a")),
            api="openai-completions",
        ),
        AssistantMessage(content=(ThinkingBlock(thinking="t"), TextBlock(text="b"))),
    ]
    out = build_payload(make_request(messages))["messages"]
    assert out[1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "a"},
            {"type": "text", "text": "b", "cache_control": EPHEMERAL},
        ],
    }


def test_foreign_tool_ids_are_sanitised_the_same_on_call_and_result() -> None:
    messages: list[Message] = [
        user_message("q"),
        AssistantMessage(
            content=(ToolCallBlock(id="functions.read:0", name="read", arguments={}),)
        ),
        ToolResultMessage(
            tool_call_id="functions.read:0",
            tool_name="read",
            content=(TextBlock(text="x"),),
            is_error=False,
        ),
    ]
    out = build_payload(make_request(messages))["messages"]
    assert out[1]["content"][0]["id"] == "functions_read_0"
    assert out[2]["content"][0]["tool_use_id"] == "functions_read_0"
    assert tool_use_id("") == "toolu_unknown"


def test_images_become_base64_sources_in_user_turns_and_tool_results() -> None:
    image = ImageBlock(data="AAAA", mime_type="image/png")
    messages: list[Message] = [
        user_message("q"),
        AssistantMessage(content=(ToolCallBlock(id="t1", name="shot", arguments={}),)),
        ToolResultMessage(
            tool_call_id="t1",
            tool_name="shot",
            content=(TextBlock(text="here"), image),
            is_error=False,
        ),
    ]
    block = build_payload(make_request(messages))["messages"][2]["content"][0]
    source = {"type": "base64", "media_type": "image/png", "data": "AAAA"}
    assert block == {
        "type": "tool_result",
        "tool_use_id": "t1",
        "content": [{"type": "text", "text": "here"}, {"type": "image", "source": source}],
        "cache_control": EPHEMERAL,
    }


def test_no_system_prompt_leaves_the_field_out_and_extras_merge() -> None:
    request = make_request(system="", extra={"anthropic": {"thinking": {"type": "enabled"}}})
    payload = build_payload(request)
    assert "system" not in payload
    assert payload["thinking"] == {"type": "enabled"}
    assert payload_tool_names(payload) == []


def test_reverse_mapping_recovers_what_a_script_needs() -> None:
    back = request_from_payload(build_payload(make_request(CONVERSATION, tools=[READ_TOOL])))
    assert back.system == "You are terse."
    assert back.tools == [READ_TOOL]
    assert back.max_tokens == 8192
    kinds = [type(m).__name__ for m in back.messages]
    assert kinds == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "ToolResultMessage",
        "UserMessage",
    ]
    assistant = back.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == (
        ThinkingBlock(thinking="Two reads.", thinking_signature="sig-1"),
        ToolCallBlock(id="toolu_a", name="read", arguments={"path": "a"}),
        ToolCallBlock(id="toolu_b", name="read", arguments={"path": "b"}),
    )
    failed = back.messages[3]
    assert isinstance(failed, ToolResultMessage)
    assert (failed.tool_name, failed.text, failed.is_error) == ("read", "no such file", True)


def test_reverse_mapping_accepts_plain_string_content_and_system() -> None:
    back = request_from_payload(
        {
            "model": "m",
            "system": "be nice",
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
        }
    )
    assert back.system == "be nice"
    assert back.messages[0] == user_message("hi").__class__(
        content=(TextBlock(text="hi"),), timestamp=back.messages[0].timestamp
    )


def test_reverse_mapping_rejects_bodies_that_are_not_messages_requests() -> None:
    with pytest.raises(ValueError, match="messages"):
        request_from_payload({"model": "m", "messages": "nope"})
    with pytest.raises(ValueError, match="role"):
        request_from_payload({"model": "m", "messages": [{"role": "system", "content": "x"}]})


def test_prompt_caching_can_be_switched_off_for_compatible_servers() -> None:
    request = make_request(extra={"anthropic": {"prompt_cache": False, "top_k": 5}})
    payload = build_payload(request)
    assert payload["system"] == [{"type": "text", "text": "You are terse."}]
    assert payload["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"}]}]
    assert payload["top_k"] == 5
    assert "prompt_cache" not in payload
