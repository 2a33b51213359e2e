"""Our requests -> OpenAI chat-completions JSON, and back (pure, snapshot-style)."""

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
    UserMessage,
    user_message,
)
from nodmix.providers.openai.mapping import (
    build_payload,
    payload_tool_names,
    request_from_payload,
    token_limit_field,
)
from tests.providers.providers_support import READ_TOOL, make_request

CONVERSATION: list[Message] = [
    user_message("What is in notes.txt?"),
    AssistantMessage(
        content=(
            ThinkingBlock(thinking="I should read it.", thinking_signature="sig"),
            TextBlock(text="Let me look."),
            ToolCallBlock(id="call_1", name="read", arguments={"path": "notes.txt"}),
        ),
        api="openai-completions",
    ),
    ToolResultMessage(
        tool_call_id="call_1",
        tool_name="read",
        content=(TextBlock(text="buy milk"),),
        is_error=False,
    ),
    AssistantMessage(content=(TextBlock(text="It says: buy milk."),)),
    UserMessage(
        content=(
            TextBlock(text="And this picture?"),
            ImageBlock(data="aGVsbG8=", mime_type="image/png"),
        )
    ),
]


def test_full_conversation_maps_to_the_expected_payload() -> None:
    request = make_request(CONVERSATION, tools=[READ_TOOL], max_tokens=500, temperature=0.2)
    assert build_payload(request, base_url="http://127.0.0.1:11434/v1") == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What is in notes.txt?"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "notes.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "buy milk"},
            {"role": "assistant", "content": "It says: buy milk."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "And this picture?"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}},
                ],
            },
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "read",
                    "description": "Read a file.",
                    "parameters": READ_TOOL.parameters,
                },
            }
        ],
        "max_tokens": 500,
        "temperature": 0.2,
    }


def test_api_openai_com_gets_max_completion_tokens() -> None:
    payload = build_payload(make_request(max_tokens=64), base_url="https://api.openai.com/v1")
    assert payload["max_completion_tokens"] == 64
    assert "max_tokens" not in payload
    assert token_limit_field("https://openrouter.ai/api/v1") == "max_tokens"


def test_no_system_prompt_and_no_limit_leave_those_fields_out() -> None:
    payload = build_payload(make_request(system=""), base_url="http://x/v1")
    assert payload["messages"] == [{"role": "user", "content": "hello"}]
    assert "max_tokens" not in payload
    assert "tools" not in payload


def test_tool_only_assistant_turn_has_null_content_and_empty_turns_are_dropped() -> None:
    messages: list[Message] = [
        user_message("go"),
        AssistantMessage(content=(), stop_reason="aborted"),
        AssistantMessage(content=(ToolCallBlock(id="c", name="read", arguments={}),)),
    ]
    payload = build_payload(make_request(messages, system=""), base_url="http://x/v1")
    assert payload["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        }
    ]


def test_tool_result_images_follow_the_tool_messages_as_a_user_turn() -> None:
    image = ImageBlock(data="AAAA", mime_type="image/jpeg")
    messages: list[Message] = [
        user_message("screenshot both"),
        AssistantMessage(
            content=(
                ToolCallBlock(id="a", name="shot", arguments={}),
                ToolCallBlock(id="b", name="shot", arguments={}),
            )
        ),
        ToolResultMessage(tool_call_id="a", tool_name="shot", content=(image,), is_error=False),
        ToolResultMessage(
            tool_call_id="b", tool_name="shot", content=(TextBlock(text="ok"), image), is_error=True
        ),
    ]
    out = build_payload(make_request(messages, system=""), base_url="http://x/v1")["messages"]
    assert out[2:] == [
        {"role": "tool", "tool_call_id": "a", "content": "(image attached below)"},
        {"role": "tool", "tool_call_id": "b", "content": "ok"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Images returned by the tool call(s) above:"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,AAAA"}},
            ],
        },
    ]


def test_unparseable_arguments_go_back_as_valid_json() -> None:
    messages: list[Message] = [
        user_message("go"),
        AssistantMessage(
            content=(ToolCallBlock(id="c", name="read", arguments={"_raw": '{"path": '}),)
        ),
    ]
    out = build_payload(make_request(messages), base_url="http://x/v1")["messages"]
    assert out[2]["tool_calls"][0]["function"]["arguments"] == '{"_raw": "{\\"path\\": "}'


def test_vendor_extras_are_merged_last() -> None:
    request = make_request(extra={"openai": {"reasoning_effort": "high", "stream": True}})
    assert build_payload(request, base_url="http://x/v1")["reasoning_effort"] == "high"


def test_payload_tool_names_lists_function_names_in_order() -> None:
    payload = build_payload(make_request(tools=[READ_TOOL]), base_url="http://x/v1")
    assert payload_tool_names(payload) == ["read"]
    assert payload_tool_names({}) == []


def test_reverse_mapping_recovers_what_a_script_needs() -> None:
    request = make_request(CONVERSATION, tools=[READ_TOOL], max_tokens=500, temperature=0.2)
    back = request_from_payload(build_payload(request, base_url="https://api.openai.com/v1"))
    assert back.system == "You are terse."
    assert back.model.id == "test-model"
    assert back.max_tokens == 500
    assert back.temperature == 0.2
    assert back.tools == [READ_TOOL]
    # Thinking is not sent to chat-completions, so it does not come back; the rest does.
    assert [type(m).__name__ for m in back.messages] == [
        "UserMessage",
        "AssistantMessage",
        "ToolResultMessage",
        "AssistantMessage",
        "UserMessage",
    ]
    assistant = back.messages[1]
    assert isinstance(assistant, AssistantMessage)
    assert assistant.content == (
        TextBlock(text="Let me look."),
        ToolCallBlock(id="call_1", name="read", arguments={"path": "notes.txt"}),
    )
    result = back.messages[2]
    assert isinstance(result, ToolResultMessage)
    assert (result.tool_call_id, result.tool_name, result.text) == ("call_1", "read", "buy milk")
    picture = back.messages[4]
    assert isinstance(picture, UserMessage)
    assert picture.content == (
        TextBlock(text="And this picture?"),
        ImageBlock(data="aGVsbG8=", mime_type="image/png"),
    )


def test_reverse_mapping_rejects_bodies_that_are_not_chat_requests() -> None:
    with pytest.raises(ValueError, match="messages"):
        request_from_payload({"model": "m"})
    with pytest.raises(ValueError, match="role"):
        request_from_payload({"model": "m", "messages": [{"role": "robot", "content": "x"}]})
