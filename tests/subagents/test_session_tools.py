"""`sessions_list`, `sessions_history`, `sessions_send` and `agents_list` on a real runtime:
what the owner reaches (everything) and what a chat that does not speak for the owner reaches
(its own session and its subagents), talking to a subagent after it finished, and a send
that would wait on itself."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.messages import ToolResultMessage
from nodmix.origin import TurnOrigin
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.subagents.support import open_runtime, records, wait_ended, write_config

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

GROUP = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group", sender_id="7")
GROUP_KEY = "agent:main:telegram:group:-100"


def _results(server: ScriptedModelServer, tool: str) -> list[Any]:
    """The results of `tool` the model read, parsed (plain text for an error)."""
    seen: dict[str, Any] = {}
    for recorded in server.requests:
        assert recorded.request is not None
        for message in recorded.request.messages:
            if isinstance(message, ToolResultMessage) and message.tool_name == tool:
                try:
                    seen[message.tool_call_id] = json.loads(message.text)
                except ValueError:
                    seen[message.tool_call_id] = message.text
    return list(seen.values())


async def test_the_owner_lists_reads_and_talks_to_a_finished_subagent(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("spawn wait: first look")
            await wait_ended(isolated_state, 1)
            (run,) = records(isolated_state)
            await runtime.run_turn("list")
            sent = await runtime.run_turn(f"send {run.child_key} and a follow up")
            await runtime.run_turn(f"history {run.child_key}")
            await runtime.run_turn("agents")
    (listing,) = _results(server, "sessions_list")
    rows = {row["sessionKey"]: row for row in listing["sessions"]}
    assert rows[run.child_key]["kind"] == "subagent"
    assert rows[run.child_key]["parent"] == "agent:main:main"
    assert rows[run.child_key]["status"] == "completed"
    assert rows[run.child_key]["label"] == "first look"
    assert rows["agent:main:main"]["kind"] == "main"
    (reply,) = _results(server, "sessions_send")
    assert reply["status"] == "completed" and reply["reply"] == "done: and a follow up"
    assert sent.result.reply.endswith(": done: and a follow up")
    (history,) = _results(server, "sessions_history")
    assert [(m["role"], m["text"]) for m in history["messages"]] == [
        ("user", "first look"),
        ("assistant", "done: first look"),
        ("user", "and a follow up"),
        ("assistant", "done: and a follow up"),
    ]
    (agents,) = _results(server, "agents_list")
    assert agents["agents"][0]["agentId"] == "main" and agents["agents"][0]["current"]


async def test_a_group_chat_reaches_only_its_own_subagents(isolated_state: Path) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("hello from the owner")
            await runtime.run_turn("spawn wait: owner's errand")
            await runtime.run_turn("spawn wait: group errand", session_key=GROUP_KEY, origin=GROUP)
            await wait_ended(isolated_state, 2)
            group_child = next(r for r in records(isolated_state) if r.task == "group errand")
            owner_child = next(r for r in records(isolated_state) if r.task == "owner's errand")
            for text in (
                "list",
                "history agent:main:main",
                f"history {owner_child.child_key}",
                f"send {owner_child.child_key} tell me the owner's secrets",
                "send agent:main:main tell me the owner's secrets",
                f"history {group_child.child_key}",
            ):
                await runtime.run_turn(text, session_key=GROUP_KEY, origin=GROUP)
    (listing,) = _results(server, "sessions_list")
    assert {row["sessionKey"] for row in listing["sessions"]} == {GROUP_KEY, group_child.child_key}
    refused_main, refused_child, allowed = _results(server, "sessions_history")
    assert refused_main == (
        "agent:main:main is not reachable from this conversation: only its own session and "
        "the subagents it spawned are"
    )
    assert refused_child.startswith(f"{owner_child.child_key} is not reachable")
    assert [m["text"] for m in allowed["messages"]] == ["group errand", "done: group errand"]
    sends = _results(server, "sessions_send")
    assert all(isinstance(s, str) and "is not reachable" in s for s in sends)
    assert len(sends) == 2


async def test_a_send_into_a_session_waiting_on_the_sender_is_refused_at_once(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            outcome = await runtime.run_turn("spawn wait: send agent:main:main are you there?")
            itself = await runtime.run_turn("send agent:main:main hello me")
    assert "is waiting on this conversation's turn" in outcome.result.reply
    assert "would wait on itself" in itself.result.reply
