"""`POST /v1/responses` through the official `openai` client against a real gateway."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from nodmix.messages import AssistantMessage, UserMessage
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, socket_gateway

WEATHER_TOOL: Any = {
    "type": "function",
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=30)


def _user_texts(server: ScriptedModelServer, index: int) -> list[str]:
    request = server.requests[index].request
    assert request is not None
    return [m.text for m in request.messages if isinstance(m, UserMessage)]


@pytest.fixture
def gateway_url(configured: Path) -> Any:
    with socket_gateway() as gateway:
        yield gateway.url


def test_response_answers_and_a_follow_up_by_previous_response_id_continues_the_session(
    gateway_url: str, model_server: ScriptedModelServer
) -> None:
    client = _client(gateway_url)
    first = client.responses.create(
        model="nodmix", input="remember the ferry", instructions="Be brief."
    )
    assert first.status == "completed" and first.output_text == "remember the ferry"
    assert first.usage is not None and first.usage.total_tokens > 0
    second = client.responses.create(
        model="nodmix", input="and the train", previous_response_id=first.id
    )
    assert second.output_text == "and the train" and second.id != first.id
    assert second.previous_response_id == first.id
    note, *said = _user_texts(model_server, 1)
    assert note.endswith("Be brief.") and said == ["remember the ferry", "and the train"]


def test_a_new_response_without_previous_id_starts_a_fresh_session(
    gateway_url: str, model_server: ScriptedModelServer
) -> None:
    client = _client(gateway_url)
    client.responses.create(model="nodmix", input="one")
    client.responses.create(model="nodmix", input="two")
    assert _user_texts(model_server, 1) == ["two"]


def test_streamed_response_sends_the_responses_event_types_in_order(
    gateway_url: str,
) -> None:
    client = _client(gateway_url)
    events = list(client.responses.create(model="nodmix", input="stream me", stream=True))
    kinds = [event.type for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds and "response.output_item.done" in kinds
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "stream me"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    final = events[-1].response
    assert final.output_text == "stream me" and final.status == "completed"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_client_function_call_round_trip_by_previous_response_id(
    gateway_url: str, stream: bool
) -> None:
    client = _client(gateway_url)
    if stream:
        events = list(
            client.responses.create(
                model="nodmix", input="use get_weather Paris", tools=[WEATHER_TOOL], stream=True
            )
        )
        assert events[-1].type == "response.completed"
        first = events[-1].response
        assert "response.function_call_arguments.done" in [e.type for e in events]
    else:
        first = client.responses.create(
            model="nodmix", input="use get_weather Paris", tools=[WEATHER_TOOL]
        )
    (call,) = [item for item in first.output if item.type == "function_call"]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    final = client.responses.create(
        model="nodmix",
        previous_response_id=first.id,
        tools=[WEATHER_TOOL],
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Rain, 12 C"}],
    )
    assert final.output_text == "Rain, 12 C"


def test_unknown_or_unstored_previous_response_is_a_404_in_openais_shape(
    gateway_url: str,
) -> None:
    client = _client(gateway_url)
    unstored = client.responses.create(model="nodmix", input="x", store=False)
    for previous in ("resp_nope", unstored.id):
        with pytest.raises(openai.NotFoundError) as caught:
            client.responses.create(model="nodmix", input="y", previous_response_id=previous)
        error = caught.value.body
        assert isinstance(error, dict) and error["code"] == "previous_response_not_found"
        assert error["param"] == "previous_response_id"


def test_input_that_does_not_end_with_a_user_message_is_a_400(gateway_url: str) -> None:
    client = _client(gateway_url)
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(
            model="nodmix", input=[{"role": "assistant", "content": "I spoke last"}]
        )
    assert "must end with a user message" in str(caught.value)


def test_a_client_resending_the_whole_conversation_goes_on_after_a_tool_call(
    gateway_url: str, model_server: ScriptedModelServer
) -> None:
    """The pattern of the Agents SDK's `to_input_list()` and LangChain's `use_responses_api`:
    no `previous_response_id`; every request carries the conversation so far, output items
    (reasoning, messages, function calls) and function call outputs included."""
    client = _client(gateway_url)
    conversation: list[Any] = [{"role": "user", "content": "use get_weather Paris"}]
    first = client.responses.create(model="nodmix", input=conversation, tools=[WEATHER_TOOL])
    (call,) = [item for item in first.output if item.type == "function_call"]
    conversation += [{"type": "reasoning", "id": "rs_1", "summary": []}]
    conversation += [item.model_dump(exclude_none=True) for item in first.output]
    conversation += [{"type": "function_call_output", "call_id": call.call_id, "output": "Rain"}]
    second = client.responses.create(model="nodmix", input=conversation, tools=[WEATHER_TOOL])
    assert second.output_text == "Rain"
    conversation += [item.model_dump(exclude_none=True) for item in second.output]
    conversation += [{"role": "user", "content": [{"type": "input_text", "text": "and now?"}]}]
    third = client.responses.create(model="nodmix", input=conversation, tools=[WEATHER_TOOL])
    assert third.output_text == "and now?"
    request = model_server.requests[-1].request
    assert request is not None
    said = [(type(m).__name__, m.text) for m in request.messages]
    assert said[-4:] == [
        ("AssistantMessage", ""),
        ("ToolResultMessage", "Rain"),
        ("AssistantMessage", "Rain"),
        ("UserMessage", "and now?"),
    ]
    assistant = request.messages[-4]
    assert isinstance(assistant, AssistantMessage)
    (seeded,) = assistant.tool_calls
    assert (seeded.id, seeded.name, seeded.arguments) == (
        call.call_id,
        "get_weather",
        {"city": "Paris"},
    )


def test_items_the_gateway_cannot_read_are_400s_naming_the_item(gateway_url: str) -> None:
    client = _client(gateway_url)
    bad: list[Any] = [
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"role": "user", "content": "hi"},
    ]
    with pytest.raises(openai.BadRequestError) as caught:
        client.responses.create(model="nodmix", input=bad)
    assert "input[0]: items of type 'web_search_call' are not supported" in str(caught.value)
