"""Client tools through the official `openai` client: the agent calls the application's
`get_weather`, the response hands the call over, the client sends the result, and the agent's
final answer uses it (direct mode and code mode, streamed and not)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from nodmix.messages import AssistantMessage, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import code_mode
from tests.gateway.support import TOKEN, socket_gateway, write_config

WEATHER_TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
WEATHER = "Sunny, 21 C"
PROGRAM = """const w = await tools.call('client:app:get_weather', { city: 'Paris' });
return 'In Paris: ' + w.text;"""


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=30)


def _code_mode_model(request: ModelRequest) -> ModelReply:
    """Calls the client tool from a program; follows `waiting` with `wait`."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage | AssistantMessage):
        return code_mode.respond(request)
    return ModelReply.tool_call("exec", {"code": PROGRAM})


def _run_tool(name: str, arguments: str) -> str:
    assert name == "get_weather" and json.loads(arguments) == {"city": "Paris"}
    return WEATHER


def _ask(client: openai.OpenAI, messages: list[Any], *, stream: bool) -> tuple[Any, str]:
    """One request: `(assistant message as a dict, finish_reason)`, streamed or not."""
    if not stream:
        response = client.chat.completions.create(
            model="nodmix", messages=messages, tools=[WEATHER_TOOL]
        )
        choice = response.choices[0]
        return choice.message.model_dump(exclude_none=True), str(choice.finish_reason)
    content, calls, finish = "", [], ""
    for chunk in client.chat.completions.create(
        model="nodmix", messages=messages, tools=[WEATHER_TOOL], stream=True
    ):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            calls.extend(
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.function.name, "arguments": c.function.arguments},
                }
                for c in choice.delta.tool_calls or []
                if c.function is not None
            )
            finish = choice.finish_reason or finish
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = calls
    return message, finish


def _round_trip(url: str, *, stream: bool) -> tuple[dict[str, Any], str]:
    """The user asks, the client runs the tool call it receives, the agent answers."""
    client = _client(url)
    messages: list[Any] = [{"role": "user", "content": "use get_weather Paris"}]
    first, finish = _ask(client, messages, stream=stream)
    assert finish == "tool_calls"
    (call,) = first["tool_calls"]
    assert call["function"]["name"] == "get_weather"
    output = _run_tool(call["function"]["name"], call["function"]["arguments"])
    messages += [first, {"role": "tool", "tool_call_id": call["id"], "content": output}]
    final, finish = _ask(client, messages, stream=stream)
    assert finish == "stop"
    return final, call["id"]


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_direct_mode_client_tool_round_trip_answers_with_the_clients_result(
    isolated_state: Path, model_server: ScriptedModelServer, stream: bool
) -> None:
    write_config(isolated_state, model_server.base_url)
    with socket_gateway() as gateway:
        final, _ = _round_trip(gateway.url, stream=stream)
    assert final["content"] == WEATHER
    offered = model_server.requests[0].request.tools
    assert "get_weather" in {tool.name for tool in offered}


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
def test_code_mode_program_waits_for_the_client_tool_then_wait_delivers_it(
    isolated_state: Path, model_server: ScriptedModelServer, stream: bool
) -> None:
    write_config(isolated_state, model_server.base_url, "tools: { codeMode: { enabled: true } }")
    model_server.respond = _code_mode_model
    with socket_gateway() as gateway:
        final, call_id = _round_trip(gateway.url, stream=stream)
    assert final["content"] == f"In Paris: {WEATHER}"
    # The first turn ended right after `exec` suspended for the client, and the second turn
    # resumed the same program with `wait`.
    results = [
        m
        for r in model_server.requests
        for m in r.request.messages
        if isinstance(m, ToolResultMessage)
    ]
    waiting = json.loads(results[0].text)
    assert waiting["status"] == "waiting" and waiting["reason"] == "client_tool"
    assert waiting["pendingToolCalls"][0]["toolId"] == "client:app:get_weather"
    assert model_server.requests[-2].request.messages[-1].tool_name == "exec"
    assert call_id.endswith(":get_weather:1")
