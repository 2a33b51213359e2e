"""The WebSocket protocol against a real gateway on a socket: runs, events, sessions, errors."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import httpx2
import pytest
from websockets.asyncio.client import connect

from nodmix.gateway.client import GatewayClient, GatewayError
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.testing.model_server import ScriptedModelServer
from tests.gateway.support import TOKEN, socket_gateway, workspace_file

pytestmark = pytest.mark.anyio


class Recorder:
    """Collects the event payloads of one request."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, payload: dict[str, Any]) -> None:
        self.events.append(payload)

    @property
    def kinds(self) -> list[str]:
        return [e["kind"] for e in self.events]


class GatedModel:
    """A model whose answer waits until the test opens the gate (no sleeping anywhere)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.entered = threading.Event()

    async def __call__(self, request: ModelRequest) -> ModelReply:
        self.entered.set()
        await anyio.to_thread.run_sync(self.gate.wait, abandon_on_cancel=True)
        return ModelReply.text("released")


async def test_agent_streams_events_then_answers_with_the_turn_outcome(configured: Path) -> None:
    workspace_file(configured, "notes.txt", "The ferry leaves at 9:40.")
    events = Recorder()
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            answer = await client.request(
                "agent", {"message": "read notes.txt", "sessionKey": "ws"}, on_event=events
            )
    assert answer["reply"] == "The ferry leaves at 9:40."
    assert answer["sessionKey"] == "agent:main:ws" and answer["stopReason"] == "stop"
    assert [c["name"] for c in answer["toolCalls"]] == ["read"]
    assert answer["runId"].startswith("run_")
    kinds = events.kinds
    assert kinds[0] == "accepted" and kinds[1] == "turn_started" and kinds[-1] == "turn_finished"
    assert kinds.index("tool_started") < kinds.index("tool_finished")
    assert "text_delta" in kinds and "assistant_message" in kinds
    assert [e["seq"] for e in events.events] == list(range(len(kinds)))
    assert {e["runId"] for e in events.events} == {answer["runId"]}
    started = next(e for e in events.events if e["kind"] == "tool_started")
    assert started["toolName"] == "read" and started["arguments"] == {"path": "notes.txt"}
    assert started["parentCallId"] is None
    finished = next(e for e in events.events if e["kind"] == "tool_finished")
    assert finished["result"]["toolCallId"] == started["callId"]
    assert finished["result"]["isError"] is False
    assert finished["result"]["content"][0]["text"] == "The ferry leaves at 9:40."
    text = "".join(e["text"] for e in events.events if e["kind"] == "text_delta")
    assert text == "The ferry leaves at 9:40."


async def test_sessions_list_can_leave_out_one_shot_sessions_and_counts_them(
    configured: Path,
) -> None:
    with socket_gateway() as gateway:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as http:
            for text in ("one", "two"):
                body = {"model": "nodmix", "messages": [{"role": "user", "content": text}]}
                await http.post(f"{gateway.url}/v1/chat/completions", json=body)
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            await client.request("sessions.create", {"name": "project"})
            everything = await client.request("sessions.list")
            chats = await client.request("sessions.list", {"oneShot": False})
            first = await client.request("sessions.list", {"limit": 1})
    assert everything["total"] == 3 and everything["oneShotHidden"] == 0
    assert [r["key"] for r in chats["sessions"]] == ["agent:main:project"]
    assert chats["total"] == 1 and chats["oneShotHidden"] == 2
    assert len(first["sessions"]) == 1 and first["total"] == 3


async def test_sessions_can_be_created_listed_read_and_reset(configured: Path) -> None:
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            created = await client.request("sessions.create", {"name": "project"})
            await client.request("agent", {"message": "hello", "sessionKey": created["key"]})
            listed = await client.request("sessions.list")
            history = await client.request("sessions.history", {"sessionKey": "project"})
            reset = await client.request("sessions.reset", {"sessionKey": "project"})
            after = await client.request("sessions.history", {"sessionKey": "project"})
            generated = await client.request("sessions.create")
    assert created["key"] == "agent:main:project" and created["messageCount"] == 0
    row = next(r for r in listed["sessions"] if r["key"] == "agent:main:project")
    assert row["messageCount"] == 2 and row["running"] is False and row["name"] == "project"
    assert row["totalTokens"] > 0
    roles = [e["message"]["role"] for e in history["entries"] if e["type"] == "message"]
    assert roles == ["user", "assistant"]
    assert history["entries"][0]["message"]["content"][0]["text"] == "hello"
    assert reset["command"] == "new" and reset["sessionId"] != history["sessionId"]
    assert after["entries"] == [] and after["sessionId"] == reset["sessionId"]
    assert generated["name"].startswith("web-")


async def test_two_sessions_keep_their_own_history(configured: Path) -> None:
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            async with anyio.create_task_group() as group:
                for name in ("left", "right"):
                    for turn in range(3):
                        group.start_soon(
                            client.request,
                            "agent",
                            {"message": f"{name}-{turn}", "sessionKey": name},
                        )
            left = await client.request("sessions.history", {"sessionKey": "left"})
    texts = [
        e["message"]["content"][0]["text"]
        for e in left["entries"]
        if e["type"] == "message" and e["message"]["role"] == "user"
    ]
    assert sorted(texts) == ["left-0", "left-1", "left-2"]


async def test_a_run_can_be_aborted_and_its_session_shows_it_running_meanwhile(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    model = GatedModel()
    model_server.respond = model
    events = Recorder()
    try:
        with socket_gateway() as gateway:
            async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
                result: dict[str, Any] = {}

                async def run() -> None:
                    try:
                        await client.request("agent", {"message": "wait"}, on_event=events)
                    except GatewayError as exc:
                        result["error"] = exc

                async with anyio.create_task_group() as group:
                    group.start_soon(run)
                    with anyio.fail_after(10):
                        await anyio.to_thread.run_sync(model.entered.wait)
                    runs = await client.request("runs.list")
                    listed = await client.request("sessions.list")
                    run_id = events.events[0]["runId"]
                    aborted = await client.request("agent.abort", {"runId": run_id})
                again = await client.request("agent.abort", {"runId": run_id})
                history = await client.request("sessions.history", {"sessionKey": "main"})
    finally:
        model.gate.set()
    assert [r["runId"] for r in runs["runs"]] == [run_id]
    assert runs["runs"][0]["sessionKey"] == "agent:main:main"
    assert next(r for r in listed["sessions"] if r["key"] == "agent:main:main")["running"]
    assert aborted == {"runId": run_id, "aborted": True}
    assert again["aborted"] is False
    assert isinstance(result["error"], GatewayError) and result["error"].code == "aborted"
    roles = [e["message"]["role"] for e in history["entries"] if e["type"] == "message"]
    assert roles == ["user"]  # the transcript stays valid: the prompt, no half answer


async def test_protocol_errors_are_answered_not_fatal(configured: Path) -> None:
    with socket_gateway() as gateway:
        url = gateway.url.replace("http", "ws") + "/ws"
        headers = {"authorization": f"Bearer {TOKEN}"}
        async with connect(url, additional_headers=headers, proxy=None) as ws:
            frames = [
                "not json",
                json.dumps({"type": "hello"}),
                json.dumps({"type": "req", "method": "health"}),
                json.dumps({"type": "req", "id": "1", "method": "nope"}),
                json.dumps({"type": "req", "id": "2", "method": "agent", "params": []}),
                json.dumps({"type": "req", "id": "3", "method": "agent", "params": {}}),
                json.dumps({"type": "req", "id": "4", "method": "agent", "params": {"message": 5}}),
                json.dumps(
                    {
                        "type": "req",
                        "id": "5",
                        "method": "agent",
                        "params": {"message": "x", "agentId": "ghost"},
                    }
                ),
                json.dumps(
                    {
                        "type": "req",
                        "id": "6",
                        "method": "sessions.history",
                        "params": {"sessionKey": "none-yet"},
                    }
                ),
                json.dumps({"type": "req", "id": "7", "method": "sessions.compact"}),
            ]
            for frame in frames:
                await ws.send(frame)
            await ws.send(b"binary")
            answers = [json.loads(await ws.recv()) for _ in range(len(frames) + 1)]
            await ws.send(json.dumps({"type": "req", "id": "8", "method": "health"}))
            health = json.loads(await ws.recv())
    by_id = {a["id"]: a["error"]["code"] for a in answers if a["id"] is not None}
    assert by_id == {
        "1": "unknown_method",
        "2": "bad_request",
        "3": "bad_request",
        "4": "bad_request",
        "5": "unknown_agent",
        "6": "unknown_session",
        "7": "bad_session",  # compacting a session that does not exist
    }
    assert sum(1 for a in answers if a["id"] is None) == 4
    assert all(a["ok"] is False for a in answers)
    assert health["ok"] and health["payload"]["agents"] == [
        {"id": "main", "model": "local/scripted"}
    ]


async def test_compact_streams_compaction_events_and_answers_with_the_outcome(
    configured: Path, model_server: ScriptedModelServer
) -> None:
    events = Recorder()
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            for turn in range(6):
                await client.request(
                    "agent", {"message": f"turn {turn}: " + "words " * 400, "sessionKey": "long"}
                )
            model_server.respond = lambda request: ModelReply.text("Summary of the talk so far.")
            done = await client.request("sessions.compact", {"sessionKey": "long"}, on_event=events)
            history = await client.request("sessions.history", {"sessionKey": "long"})
    assert done["key"] == "agent:main:long" and done["ok"] is True and done["compacted"] is True
    assert done["result"]["tokensAfter"] < done["result"]["tokensBefore"]
    assert done["message"].startswith("Compacted the conversation")
    assert [(e["kind"], e["phase"]) for e in events.events] == [
        ("compaction", "start"),
        ("compaction", "end"),
    ]
    assert {e["reqId"] for e in events.events} == {events.events[0]["reqId"]}
    kinds = [e["type"] for e in history["entries"]]
    assert "compaction" in kinds


async def test_sessions_can_be_renamed_deleted_and_listed_with_replaced_ones(
    configured: Path,
) -> None:
    with socket_gateway() as gateway:
        async with GatewayClient.connect(gateway.url, token=TOKEN) as client:
            await client.request("agent", {"message": "first topic", "sessionKey": "topic"})
            old = await client.request("sessions.history", {"sessionKey": "topic"})
            await client.request("sessions.reset", {"sessionKey": "topic"})
            renamed = await client.request(
                "sessions.rename", {"sessionKey": "topic", "title": "Trip planning"}
            )
            listed = await client.request("sessions.list", {"all": True})
            plain = await client.request("sessions.list")
            deleted = await client.request("sessions.delete", {"sessionId": old["sessionId"]})
            after = await client.request("sessions.list", {"all": True})
            with pytest.raises(GatewayError) as unknown:
                await client.request("sessions.delete", {"sessionKey": "nobody"})
            with pytest.raises(GatewayError) as empty:
                await client.request("sessions.rename", {"sessionKey": "topic", "title": " "})
            gone = await client.request("sessions.delete", {"sessionKey": "topic"})
            final = await client.request("sessions.list", {"all": True})
    assert renamed["key"] == "agent:main:topic" and renamed["label"] == "Trip planning"
    row = next(r for r in listed["sessions"] if r["key"] == "agent:main:topic")
    assert row["label"] == "Trip planning" and row["sessionId"] != old["sessionId"]
    (replaced,) = listed["others"]
    assert replaced["sessionId"] == old["sessionId"] and replaced["status"] == "replaced"
    assert replaced["key"] == "agent:main:topic" and replaced["messageCount"] == 2
    assert "others" not in plain
    assert deleted["status"] == "replaced" and "/trash/" in deleted["moved"][0]
    assert [(r["sessionId"], r["status"]) for r in after["others"]] == [
        (old["sessionId"], "deleted")
    ]
    assert unknown.value.code == "unknown_session" and "agent:main:nobody" in str(unknown.value)
    assert empty.value.code == "bad_request"
    assert gone["status"] == "current"
    assert [r["key"] for r in final["sessions"]] == []
    assert {r["status"] for r in final["others"]} == {"deleted"}
