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
from nodmix.providers.fake import ModelReply, ReplyToolCall
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import code_mode, tool_then_answer
from tests.gateway.support import (
    TOKEN,
    asgi_client,
    socket_gateway,
    workspace_file,
    write_config,
)

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


# ---- in process: tool_choice, sessions, refusals -------------------------------------------


def _body(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "model": "nodmix",
        "messages": [{"role": "user", "content": text}],
        "tools": [WEATHER_TOOL],
        **extra,
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", None),
        ("required", "required"),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
async def test_tool_choice_reaches_the_first_model_call_of_each_request(
    configured: Path, model_server: ScriptedModelServer, choice: Any, sent: Any
) -> None:
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions", json=_body("use get_weather Paris", tool_choice=choice)
        )
        call = response.json()["choices"][0]["message"]["tool_calls"][0]
        key = response.headers["x-nodmix-session-key"]
        follow = await client.post(
            "/v1/chat/completions",
            headers={"x-nodmix-session-key": key},
            json={
                "model": "nodmix",
                "tools": [WEATHER_TOOL],
                "tool_choice": choice,
                "messages": [{"role": "tool", "tool_call_id": call["id"], "content": "Fog"}],
            },
        )
    assert follow.json()["choices"][0]["message"]["content"] == "Fog"
    first, second = (r.body for r in model_server.requests)
    assert first.get("tool_choice") == sent and second.get("tool_choice") == sent


@pytest.mark.anyio
async def test_a_required_tool_choice_is_not_forced_again_after_the_agents_own_tool(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    workspace_file(configured, "notes.txt", "Ferry at 9:40.")
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions",
            json={
                "model": "nodmix",
                "messages": [{"role": "user", "content": "read notes.txt"}],
                "tool_choice": "required",
            },
        )
    assert response.json()["choices"][0]["finish_reason"] == "stop"
    first, second = (r.body for r in model_server.requests)
    assert first["tool_choice"] == "required" and "tool_choice" not in second


@pytest.mark.anyio
async def test_tool_choice_none_offers_no_tools_at_all(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions", json=_body("use get_weather Paris", tool_choice="none")
        )
    assert response.json()["choices"][0]["finish_reason"] == "stop"
    assert "tools" not in model_server.requests[0].body


@pytest.mark.anyio
async def test_code_mode_turns_a_named_tool_choice_into_exec(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, "tools: { codeMode: { enabled: true } }")
    model_server.respond = _code_mode_model
    choice = {"type": "function", "function": {"name": "get_weather"}}
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions", json=_body("weather?", tool_choice=choice)
        )
    assert response.json()["choices"][0]["finish_reason"] == "tool_calls"
    sent = model_server.requests[0].body
    assert sent["tool_choice"] == {"type": "function", "function": {"name": "exec"}}
    assert sorted(t["function"]["name"] for t in sent["tools"]) == ["exec", "wait"]


@pytest.mark.anyio
async def test_the_agents_own_tools_run_in_the_same_step_as_a_client_call(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    def both(request: ModelRequest) -> ModelReply:
        if len(request.messages) == 1:
            return ModelReply(
                tool_calls=(
                    ReplyToolCall("read", {"path": "notes.txt"}),
                    ReplyToolCall("get_weather", {"city": "Oslo"}),
                )
            )
        return tool_then_answer.respond(request)

    model_server.respond = both
    workspace_file(configured, "notes.txt", "Ferry at 9:40.")
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_body("go"))
        (call,) = response.json()["choices"][0]["message"]["tool_calls"]
        final = await client.post(
            "/v1/chat/completions",
            json={
                "model": "nodmix",
                "messages": [{"role": "tool", "tool_call_id": call["id"], "content": "Snow"}],
            },
        )
    assert call["function"]["name"] == "get_weather"
    answer = final.json()["choices"][0]["message"]["content"]
    assert answer == "Ferry at 9:40.\nSnow"  # the agent's read ran in the first request


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "not in tools"),
        ({"tool_choice": "sometimes"}, "tool_choice must be"),
        ({"tools": [{"type": "web_search"}]}, "only tools of type 'function'"),
        ({"tools": [WEATHER_TOOL, WEATHER_TOOL]}, "duplicate function name"),
        ({"tools": [{"type": "function", "function": {"name": "bad name"}}]}, "function name"),
    ],
)
async def test_bad_tools_and_tool_choice_are_400s(
    configured: Path, extra: dict[str, Any], message: str
) -> None:
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_body("x", **extra))
    assert response.status_code == 400
    assert message in response.json()["error"]["message"]


@pytest.mark.anyio
async def test_a_result_for_a_call_nobody_made_is_refused_and_nothing_is_recorded(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    body = {
        "model": "nodmix",
        "messages": [{"role": "tool", "tool_call_id": "call_made_up", "content": "x"}],
    }
    async with asgi_client() as client:
        stateless = await client.post("/v1/chat/completions", json=body)
        named = await client.post(
            "/v1/chat/completions", headers={"x-nodmix-session-key": "s1"}, json=body
        )
    assert stateless.status_code == 400 and "call_made_up" in stateless.json()["error"]["message"]
    assert named.status_code == 400
    assert named.json()["error"]["code"] == "bad_session"
    assert "answers no open tool call" in named.json()["error"]["message"]
    assert model_server.requests == []


def test_a_stateless_client_continues_after_a_gateway_restart(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    messages: list[Any] = [{"role": "user", "content": "use get_weather Paris"}]
    with socket_gateway() as gateway:
        first, finish = _ask(_client(gateway.url), messages, stream=False)
    assert finish == "tool_calls"
    call = first["tool_calls"][0]
    messages += [first, {"role": "tool", "tool_call_id": call["id"], "content": "Hail"}]
    with socket_gateway() as gateway:
        final, finish = _ask(_client(gateway.url), messages, stream=False)
    assert finish == "stop" and final["content"] == "Hail"
    # The continuation ran in the first request's session: its history reached the model.
    request = model_server.requests[-1].request
    assert request is not None
    assert [m.role for m in request.messages] == ["user", "assistant", "toolResult"]


@pytest.mark.anyio
async def test_an_app_function_named_like_an_agent_tool_replaces_it_in_direct_mode(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    app_read = {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file on the user's phone.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions",
            json={
                "model": "nodmix",
                "messages": [{"role": "user", "content": "read photo.jpg"}],
                "tools": [app_read],
            },
        )
    (call,) = response.json()["choices"][0]["message"]["tool_calls"]
    assert call["function"] == {"name": "read", "arguments": '{"path":"photo.jpg"}'}
    offered = [t["function"] for t in model_server.requests[0].body["tools"]]
    reads = [t for t in offered if t["name"] == "read"]
    assert [t["description"] for t in reads] == ["Read a file on the user's phone."]
