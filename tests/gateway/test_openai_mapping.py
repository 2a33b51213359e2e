"""How an OpenAI request maps to a prompt and to the history seeded into a new session."""

from __future__ import annotations

import json

import pytest

from nodmix.gateway.errors import APIError
from nodmix.gateway.media_parts import UserParts
from nodmix.gateway.openai_mapping import (
    SYSTEM_NOTE_INTRO,
    agent_of_model,
    finish_reason,
    parse_request,
    prompt_parts,
    seed,
)
from nodmix.messages import AssistantMessage, UserMessage


def _request(*messages: dict[str, object], **extra: object) -> bytes:
    return json.dumps({"model": "nodmix", "messages": list(messages), **extra}).encode()


def test_the_prompt_is_the_last_user_message_and_earlier_turns_are_seeded() -> None:
    request = parse_request(
        _request(
            {"role": "developer", "content": "Be brief."},
            {"role": "system", "content": [{"type": "text", "text": "Use metric units."}]},
            {"role": "user", "content": "How far is it?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "x"}}],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
            {"role": "assistant", "content": "42 km."},
            {
                "role": "user",
                "content": [{"type": "text", "text": "And"}, {"type": "text", "text": "back?"}],
            },
            temperature=0.2,
            tools=[{"type": "function", "function": {"name": "x"}}],
        )
    )
    assert prompt_parts(request) == UserParts("And\nback?")
    note, history = seed(request)
    assert note == f"{SYSTEM_NOTE_INTRO}\n\nBe brief.\n\nUse metric units."
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]
    assert [m.text for m in history] == ["How far is it?", "42 km."]


def test_a_single_message_seeds_nothing() -> None:
    assert seed(parse_request(_request({"role": "user", "content": "hi"}))) == (None, [])


@pytest.mark.parametrize(
    ("model", "agent"), [("nodmix", None), ("nodmix/main", "main"), ("nodmix/a-b_1", "a-b_1")]
)
def test_nodmix_model_names_choose_the_agent(model: str, agent: str | None) -> None:
    assert agent_of_model(model) == agent


@pytest.mark.parametrize("model", ["gpt-4o", "nodmix/", "nodmixx", "openai/nodmix"])
def test_other_model_names_are_not_ours(model: str) -> None:
    with pytest.raises(ValueError):
        agent_of_model(model)


def test_stream_usage_is_only_sent_when_asked_for() -> None:
    asked = parse_request(
        _request(
            {"role": "user", "content": "x"}, stream=True, stream_options={"include_usage": True}
        )
    )
    plain = parse_request(_request({"role": "user", "content": "x"}, stream=True))
    assert asked.include_usage and not plain.include_usage


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        _request({"role": "wizard", "content": "x"}),
        _request({"role": "user", "content": 5}),
        json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(),
    ],
)
def test_malformed_requests_are_400s(body: bytes) -> None:
    with pytest.raises(APIError) as raised:
        parse_request(body)
    assert raised.value.status == 400 and raised.value.body()["error"]["message"]


def test_turns_cut_short_finish_with_length() -> None:
    assert [finish_reason(s) for s in ("stop", "length", "max_steps", "aborted")] == [
        "stop",
        "length",
        "length",
        "stop",
    ]


PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE"
    "hQGAhKmMIQAAAABJRU5ErkJggg=="
)


def test_image_parts_of_user_messages_are_decoded_for_the_prompt_and_the_seed() -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
    request = parse_request(
        _request(
            {"role": "user", "content": [{"type": "text", "text": "first"}, image]},
            {"role": "assistant", "content": "a dot"},
            {"role": "user", "content": [image, {"type": "text", "text": "again?"}]},
        )
    )
    prompt = prompt_parts(request)
    assert prompt.text == "again?" and [m.mime_type for m in prompt.media] == ["image/png"]
    assert prompt.media[0].data.startswith(b"\x89PNG")
    assert prompt.media[0].where == "messages[2].content[0]"
    _, history = seed(request)
    assert isinstance(history[0], UserParts) and history[0].text == "first"
    assert isinstance(history[1], AssistantMessage)


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.org/a.png"}}, "not fetched"),
        ({"type": "image_url", "image_url": {"url": "data:text/html;base64,PGI+"}}, "data:image"),
        ({"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}, "base64"),
        ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "aiff"}}, "format"),
        ({"type": "file", "file": {}}, "not supported"),
    ],
)
def test_unusable_media_parts_are_400s_that_say_why(part: dict[str, object], says: str) -> None:
    request = parse_request(_request({"role": "user", "content": [part]}))
    with pytest.raises(APIError) as raised:
        prompt_parts(request)
    assert raised.value.status == 400 and says in raised.value.message


def test_media_in_system_or_assistant_messages_is_refused() -> None:
    image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PIXEL}"}}
    request = parse_request(
        _request({"role": "system", "content": [image]}, {"role": "user", "content": "hi"})
    )
    with pytest.raises(APIError, match="not supported; send text"):
        seed(request)
