"""The scripted model server speaks real OpenAI and Anthropic over a socket."""

from __future__ import annotations

import json
from typing import Any

import anyio
import httpx2
import pytest
from openai import AsyncOpenAI, AuthenticationError, RateLimitError

from nodmix.messages import UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply, ReplyToolCall
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import echo

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]


def reply_with_tool(request: ModelRequest) -> ModelReply:
    return ModelReply(
        content="Checking.",
        tool_calls=(ReplyToolCall("read", {"path": "a.txt"}),),
    )


async def test_the_openai_sdk_streams_text_and_usage_from_it() -> None:
    async with ScriptedModelServer(echo.respond) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="anything")
        with anyio.fail_after(5):
            stream = await client.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "hello over http"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            pieces: list[str] = []
            usage = None
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    pieces.append(chunk.choices[0].delta.content)
                if chunk.usage is not None:
                    usage = chunk.usage
        await client.close()
    assert "".join(pieces) == "hello over http"
    assert len(pieces) == 3
    assert usage is not None
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (4, 4, 8)


async def test_the_openai_sdk_reads_tool_calls_streamed_and_not() -> None:
    async with ScriptedModelServer(reply_with_tool) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="anything")
        with anyio.fail_after(5):
            whole = await client.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "read a.txt"}],
                tools=TOOLS,  # type: ignore[arg-type]
            )
            stream = await client.chat.completions.create(
                model="scripted",
                messages=[{"role": "user", "content": "read a.txt"}],
                tools=TOOLS,  # type: ignore[arg-type]
                stream=True,
            )
            arguments = ""
            finish = None
            async for chunk in stream:  # type: ignore[union-attr]  # tools= hides the overload
                for choice in chunk.choices:
                    for call in choice.delta.tool_calls or []:
                        arguments += (call.function.arguments or "") if call.function else ""
                    finish = choice.finish_reason or finish
        await client.close()
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Checking."
    (call,) = choice.message.tool_calls or []
    assert (call.function.name, json.loads(call.function.arguments)) == (  # type: ignore[union-attr]
        "read",
        {"path": "a.txt"},
    )
    assert json.loads(arguments) == {"path": "a.txt"}
    assert finish == "tool_calls"
    assert whole.usage is not None and whole.usage.total_tokens > 0


async def test_the_openai_sdk_sees_real_error_statuses() -> None:
    async def respond(request: ModelRequest) -> ModelError:
        if request.model.id == "limited":
            return ModelError(429, "slow down", retry_after=1)
        return ModelError(401, "bad key")

    async with ScriptedModelServer(respond) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k", max_retries=0)
        with anyio.fail_after(5):
            with pytest.raises(RateLimitError) as limited:
                await client.chat.completions.create(
                    model="limited", messages=[{"role": "user", "content": "x"}]
                )
            with pytest.raises(AuthenticationError):
                await client.chat.completions.create(
                    model="other", messages=[{"role": "user", "content": "x"}]
                )
        await client.close()
    assert limited.value.response.headers["retry-after"] == "1"
    assert limited.value.body == {
        "message": "slow down",
        "type": "rate_limit_error",
        "code": "rate_limit_exceeded",
    }


async def test_models_are_listed_in_both_vendor_shapes() -> None:
    async with ScriptedModelServer(echo.respond, models=["a", "b"]) as server:
        client = AsyncOpenAI(base_url=server.base_url, api_key="k")
        with anyio.fail_after(5):
            ids = [model.id async for model in client.models.list()]
            async with httpx2.AsyncClient() as http:
                anthropic = await http.get(
                    f"{server.url}/v1/models", headers={"anthropic-version": "2023-06-01"}
                )
        await client.close()
    assert ids == ["a", "b"]
    assert anthropic.json() == {
        "data": [
            {"type": "model", "id": "a", "display_name": "a"},
            {"type": "model", "id": "b", "display_name": "b"},
        ],
        "has_more": False,
    }


async def post(
    server: ScriptedModelServer, path: str, body: Any, **headers: str
) -> httpx2.Response:
    async with httpx2.AsyncClient() as http:
        with anyio.fail_after(5):
            return await http.post(f"{server.url}{path}", json=body, headers=headers)


async def test_anthropic_non_streamed_messages_have_the_vendor_shape() -> None:
    async with ScriptedModelServer(reply_with_tool) as server:
        response = await post(
            server,
            "/v1/messages",
            {"model": "claude", "max_tokens": 100, "messages": [{"role": "user", "content": "x"}]},
        )
    body = response.json()
    assert response.status_code == 200
    assert body["type"] == "message"
    assert body["stop_reason"] == "tool_use"
    assert body["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_1", "name": "read", "input": {"path": "a.txt"}},
    ]
    assert set(body["usage"]) >= {"input_tokens", "output_tokens"}


@pytest.mark.parametrize(
    ("path", "body", "status", "needle"),
    [
        ("/v1/chat/completions", {"model": "m"}, 400, "messages"),
        ("/v1/messages", {"model": "m", "messages": []}, 400, "max_tokens"),
        ("/v1/messages", [1, 2], 400, "JSON object"),
    ],
)
async def test_malformed_requests_get_vendor_shaped_400s(
    path: str, body: Any, status: int, needle: str
) -> None:
    async with ScriptedModelServer(echo.respond) as server:
        response = await post(server, path, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert needle in error["message"]
    if path == "/v1/messages":
        assert error["type"] == "invalid_request_error"


async def test_a_crashing_script_answers_500_and_keeps_serving() -> None:
    def respond(request: ModelRequest) -> ModelReply:
        if request.model.id == "crash":
            raise RuntimeError("script bug")
        return ModelReply.text("fine")

    async with ScriptedModelServer(respond) as server:
        crashed = await post(server, "/v1/chat/completions", {"model": "crash", "messages": []})
        fine = await post(server, "/v1/chat/completions", {"model": "ok", "messages": []})
    assert crashed.status_code == 500
    assert "RuntimeError: script bug" in crashed.json()["error"]["message"]
    assert fine.json()["choices"][0]["message"]["content"] == "fine"


async def test_requests_are_recorded_raw_and_mapped() -> None:
    async with ScriptedModelServer(echo.respond) as server:
        body = {
            "model": "m",
            "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "q"}],
        }
        await post(server, "/v1/chat/completions", body, authorization="Bearer k")
    (recorded,) = server.requests
    assert recorded.body == body
    assert recorded.api == "openai-completions"
    assert recorded.headers["authorization"] == "Bearer k"
    assert recorded.request is not None
    assert recorded.request.system == "sys"
    assert isinstance(recorded.request.messages[0], UserMessage)


async def test_the_respond_function_can_be_swapped_between_requests() -> None:
    async with ScriptedModelServer(echo.respond) as server:
        first = await post(
            server,
            "/v1/chat/completions",
            {"model": "m", "messages": [{"role": "user", "content": "one"}]},
        )
        server.respond = lambda request: ModelReply.text("two")
        second = await post(server, "/v1/chat/completions", {"model": "m", "messages": []})
    assert first.json()["choices"][0]["message"]["content"] == "one"
    assert second.json()["choices"][0]["message"]["content"] == "two"


def test_the_server_runs_in_a_thread_for_sync_callers() -> None:
    with ScriptedModelServer(echo.respond) as server:
        assert server.base_url.endswith("/v1")
        response = httpx2.post(
            f"{server.base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "from a thread"}]},
            timeout=5,
        )
        port = server.port
    assert response.json()["choices"][0]["message"]["content"] == "from a thread"
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"http://127.0.0.1:{port}/v1/models", timeout=5)
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port


def test_start_in_thread_and_stop_are_explicit_too() -> None:
    server = ScriptedModelServer(echo.respond, api_key="secret").start_in_thread()
    try:
        denied = httpx2.post(
            f"{server.base_url}/chat/completions", json={"model": "m", "messages": []}, timeout=5
        )
    finally:
        server.stop()
    assert denied.status_code == 401
    assert denied.json()["error"]["type"] == "authentication_error"
