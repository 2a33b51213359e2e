"""The OpenAI-compatible API, in process: completions, streaming, sessions, seeding, errors."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import anyio
import anyio.to_thread
import httpx2
import pytest

from nodmix.messages import ToolResultMessage, UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import (
    TOKEN,
    asgi_client,
    socket_gateway,
    sse_payloads,
    workspace_file,
    write_config,
)

pytestmark = pytest.mark.anyio


def _chat(text: str, **extra: object) -> dict[str, object]:
    return {"model": "nodmix", "messages": [{"role": "user", "content": text}], **extra}


async def test_plain_completion_is_the_agent_reply_with_usage(configured: Path) -> None:
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("hello gateway"))
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == "nodmix"
    assert body["choices"][0]["message"] == {
        "role": "assistant",
        "content": "hello gateway",
        "refusal": None,
    }
    assert body["choices"][0]["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert response.headers["x-nodmix-session-key"].startswith("agent:main:openai:")


async def test_streamed_completion_sends_role_deltas_finish_usage_and_done(
    configured: Path,
) -> None:
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions",
            json=_chat("streaming works", stream=True, stream_options={"include_usage": True}),
        )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_payloads(response.text)
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text == "streaming works"
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] > 0
    assert len({c["id"] for c in chunks}) == 1


async def test_stream_without_include_usage_has_no_usage_chunk(configured: Path) -> None:
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("x", stream=True))
    chunks = sse_payloads(response.text)[:-1]
    assert all(chunk["choices"] for chunk in chunks)


async def test_tool_activity_stays_inside_and_only_the_final_answer_is_returned(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    workspace_file(configured, "notes.txt", "The ferry leaves at 9:40.")
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("read notes.txt"))
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "The ferry leaves at 9:40."
    assert "tool_calls" not in message
    assert len(model_server.requests) == 2  # the tool round trip happened in the gateway


async def test_tool_choice_none_runs_the_turn_without_the_agents_tools(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    model_server.respond = lambda request: ModelReply.text("no tools needed")
    async with asgi_client() as client:
        response = await client.post(
            "/v1/chat/completions", json=_chat("read notes.txt", tool_choice="none")
        )
        assert response.json()["choices"][0]["message"]["content"] == "no tools needed"
        assert model_server.requests[-1].request.tools == []
        await client.post("/v1/chat/completions", json=_chat("read notes.txt"))
    assert "read" in [t.name for t in model_server.requests[-1].request.tools]


async def test_user_field_keeps_one_session_across_requests(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    async with asgi_client() as client:
        first = await client.post("/v1/chat/completions", json=_chat("first", user="alice"))
        second = await client.post("/v1/chat/completions", json=_chat("second", user="alice"))
    assert first.headers["x-nodmix-session-key"] == "agent:main:alice"
    assert second.headers["x-nodmix-session-key"] == "agent:main:alice"
    request = model_server.requests[-1].request
    assert request is not None
    texts = [m.text for m in request.messages if isinstance(m, UserMessage)]
    assert texts == ["first", "second"]


async def test_session_header_wins_over_user_and_requests_without_either_are_fresh(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    async with asgi_client() as client:
        named = await client.post(
            "/v1/chat/completions",
            json=_chat("one", user="ignored"),
            headers={"x-nodmix-session-key": "agent:main:work"},
        )
        fresh_a = await client.post("/v1/chat/completions", json=_chat("a"))
        fresh_b = await client.post("/v1/chat/completions", json=_chat("b"))
    assert named.headers["x-nodmix-session-key"] == "agent:main:work"
    assert fresh_a.headers["x-nodmix-session-key"] != fresh_b.headers["x-nodmix-session-key"]
    last = model_server.requests[-1].request
    assert last is not None
    assert [m.text for m in last.messages if isinstance(m, UserMessage)] == ["b"]


async def test_a_new_session_is_seeded_with_the_client_history_once(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    history = [
        {"role": "system", "content": "Answer like a pirate."},
        {"role": "user", "content": "earlier question"},
        {"role": "assistant", "content": "earlier answer"},
        {"role": "user", "content": [{"type": "text", "text": "now"}]},
    ]
    async with asgi_client() as client:
        await client.post(
            "/v1/chat/completions", json={"model": "nodmix", "messages": history, "user": "s1"}
        )
        again = [
            *history,
            {"role": "assistant", "content": "now"},
            {"role": "user", "content": "more"},
        ]
        await client.post(
            "/v1/chat/completions", json={"model": "nodmix", "messages": again, "user": "s1"}
        )
    first, second = (r.request for r in model_server.requests)
    assert first is not None and second is not None
    seen = [(m.role, m.text) for m in first.messages]
    assert seen[0][0] == "user" and "Answer like a pirate." in seen[0][1]
    assert seen[1:] == [
        ("user", "earlier question"),
        ("assistant", "earlier answer"),
        ("user", "now"),
    ]
    # The second request's history was not recorded again: the transcript is the context.
    assert [(m.role, m.text) for m in second.messages][1:] == [
        ("user", "earlier question"),
        ("assistant", "earlier answer"),
        ("user", "now"),
        ("assistant", "now"),
        ("user", "more"),
    ]


async def test_models_lists_nodmix_and_each_agent(
    isolated_state: Path, model_server: ScriptedModelServer
) -> None:
    write_config(isolated_state, model_server.base_url, agents="list: [{ id: 'helper' }]")
    async with asgi_client() as client:
        response = await client.get("/v1/models")
        helper = await client.post(
            "/v1/chat/completions", json={**_chat("hi"), "model": "nodmix/helper"}
        )
    ids = [m["id"] for m in response.json()["data"]]
    assert ids[:3] == ["nodmix", "nodmix/main", "nodmix/helper"]
    assert helper.status_code == 200
    assert helper.headers["x-nodmix-session-key"].startswith("agent:helper:")


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (
            {"model": "gpt-4o", "messages": [{"role": "user", "content": "x"}]},
            404,
            "model_not_found",
        ),
        (
            {"model": "nodmix/ghost", "messages": [{"role": "user", "content": "x"}]},
            404,
            "unknown_agent",
        ),
        ({"model": "nodmix", "messages": []}, 400, "bad_request"),
        (
            {"model": "nodmix", "messages": [{"role": "assistant", "content": "x"}]},
            400,
            "bad_request",
        ),
        ({"model": "nodmix"}, 400, "bad_request"),
        (
            {
                "model": "nodmix",
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}
                ],
            },
            400,
            "bad_request",
        ),
        (
            {
                "model": "nodmix",
                "messages": [{"role": "user", "content": "x"}],
                "user": "has space",
            },
            400,
            "bad_session",
        ),
    ],
)
async def test_bad_requests_get_openai_shaped_errors(
    configured: Path, body: dict[str, object], status: int, code: str
) -> None:
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=body)
    assert response.status_code == status
    error = response.json()["error"]
    assert error["code"] == code and error["message"] and error["type"]


async def test_malformed_json_is_a_400(configured: Path) -> None:
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", content=b"{nope")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == "the request body is not valid JSON"


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (ModelError(503, "overloaded"), 503, "model_unavailable"),
        (ModelError(401, "bad key"), 502, "model_auth_failed"),
        (ModelError(400, "bad payload"), 502, "model_error"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
async def test_model_failures_map_to_502_and_503(
    configured: Path,
    model_server: ScriptedModelServer,
    error: ModelError,
    status: int,
    code: str,
    stream: bool,
) -> None:
    model_server.respond = lambda request: error
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("x", stream=stream))
    assert response.status_code == status
    assert response.json()["error"]["code"] == code


async def test_a_failure_after_streamed_text_ends_the_stream_with_an_error_event(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    model_server.respond = lambda request: ModelError(400, "broke mid-way", partial="half an ")
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("x", stream=True))
    assert response.status_code == 200
    events = sse_payloads(response.text)
    assert "[DONE]" not in events
    assert events[-1]["error"]["code"] == "model_error"
    text = "".join(
        e["choices"][0]["delta"].get("content", "") for e in events[:-1] if e.get("choices")
    )
    assert text == "half an "


async def test_new_command_resets_the_session(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    async with asgi_client() as client:
        await client.post("/v1/chat/completions", json=_chat("remember me", user="cmd"))
        reset = await client.post("/v1/chat/completions", json=_chat("/new", user="cmd"))
        await client.post("/v1/chat/completions", json=_chat("after", user="cmd"))
    assert reset.json()["choices"][0]["message"]["content"] == "Started a new session."
    last = model_server.requests[-1].request
    assert isinstance(last, ModelRequest)
    assert [m.text for m in last.messages if isinstance(m, UserMessage)] == ["after"]


async def test_usage_of_a_tool_turn_adds_up_both_model_calls(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    from nodmix.messages import Usage

    replies = iter(
        [
            ModelReply.tool_call("read", {"path": "a.txt"}, usage=Usage(input=10, output=2)),
            ModelReply.text("done", usage=Usage(input=20, output=3)),
        ]
    )
    workspace_file(configured, "a.txt", "A")
    model_server.respond = lambda request: next(replies)
    async with asgi_client() as client:
        response = await client.post("/v1/chat/completions", json=_chat("go"))
    usage = response.json()["usage"]
    assert (usage["prompt_tokens"], usage["completion_tokens"]) == (30, 5)
    assert json.loads(json.dumps(usage))["total_tokens"] == 35


async def test_text_reaches_the_client_while_the_turn_is_still_running(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    workspace_file(configured, "a.txt", "A")
    gate, entered = threading.Event(), threading.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if not isinstance(request.messages[-1], ToolResultMessage):
            return ModelReply.tool_call("read", {"path": "a.txt"}, text="Let me look. ")
        entered.set()
        await anyio.to_thread.run_sync(gate.wait, abandon_on_cancel=True)
        return ModelReply.text("Found it.")

    model_server.respond = respond
    seen: list[str] = []
    try:
        with socket_gateway() as gateway:
            async with (
                httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as client,
                client.stream(
                    "POST", f"{gateway.url}/v1/chat/completions", json=_chat("go", stream=True)
                ) as response,
            ):
                async for line in response.aiter_lines():
                    if not line.startswith("data: {"):
                        continue
                    delta = json.loads(line.removeprefix("data: "))["choices"]
                    seen.append(delta[0]["delta"].get("content") or "" if delta else "")
                    if "".join(seen) == "Let me look. ":
                        # The turn is blocked in its second model call; text already arrived.
                        assert entered.wait(10)
                        gate.set()
    finally:
        gate.set()
    assert "".join(seen) == "Let me look. Found it."
