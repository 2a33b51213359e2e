"""Memory tools in real turns: a running Nodmix, a scripted model over a socket, real files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.compaction.summarize import SUMMARIZER_SYSTEM
from nodmix.messages import ToolResultMessage, UserMessage
from nodmix.origin import TurnOrigin
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime.core import Runtime
from nodmix.testing.model_server import ScriptedModelServer
from tests.compaction.builders import headed, words
from tests.context.runtime_support import write_config
from tests.memory.support import write_notes

pytestmark = pytest.mark.anyio


def calls_then_reports(*calls: tuple[str, dict[str, Any]]) -> Callable[[ModelRequest], Any]:
    """A model that makes the given tool calls in turn, then answers with the last result."""

    def respond(request: ModelRequest) -> ModelReply:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        since_user = 0
        for message in reversed(request.messages):
            if isinstance(message, UserMessage):
                break
            since_user += isinstance(message, ToolResultMessage)
        if since_user < len(calls):
            name, args = calls[since_user]
            return ModelReply.tool_call(name, args)
        return ModelReply.text(results[-1].text if results else "no results")

    return respond


def results_of(reply: str) -> list[dict[str, Any]]:
    return list(json.loads(reply)["results"])


async def test_a_reworded_question_finds_the_right_dated_note_in_keyword_mode(
    isolated_state: Path,
) -> None:
    write_notes(isolated_state / "workspace")
    respond = calls_then_reports(("memory_search", {"query": "when am I seeing the dentist?"}))
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                outcome = await runtime.run_turn("When is my dentist thing?")
        offered = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert {"memory_search", "memory_get"} <= offered
    first = results_of(outcome.result.reply)[0]
    assert (first["path"], first["startLine"], first["endLine"]) == ("memory/2026-11-18.md", 1, 5)
    assert json.loads(outcome.result.reply)["mode"] == "keyword"


async def test_a_paraphrase_with_no_shared_word_finds_the_note_with_scripted_embeddings(
    isolated_state: Path,
) -> None:
    write_notes(isolated_state / "workspace")
    respond = calls_then_reports(("memory_search", {"query": "orthodontist checkup"}))
    async with ScriptedModelServer(respond) as server:
        embeddings = {"baseUrl": server.base_url, "model": "scripted-embeddings"}
        write_config(isolated_state, server.base_url, memory={"embeddings": embeddings})
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                outcome = await runtime.run_turn("what was that tooth thing?")
        assert server.embedding_requests
    payload = json.loads(outcome.result.reply)
    assert payload["mode"] == "hybrid"
    assert payload["results"][0]["path"] == "memory/2026-11-18.md"


async def test_a_note_the_model_edits_is_found_by_its_next_search_and_read_with_memory_get(
    isolated_state: Path,
) -> None:
    workspace = isolated_state / "workspace"
    write_notes(workspace)
    respond = calls_then_reports(
        ("memory_search", {"query": "lisbon flight"}),
        ("edit", {"path": "memory/2026-11-20.md", "oldText": "Lisbon", "newText": "Porto"}),
        ("memory_search", {"query": "porto flight"}),
        ("memory_get", {"path": "memory/2026-11-20.md", "from": 3, "lines": 2}),
    )
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                outcome = await runtime.run_turn("move my trip to Porto")
            results = [m for m in server.requests[-1].request.messages if m.role == "toolResult"]
            # An edit made outside Nodmix between turns shows up in the next turn's search.
            (workspace / "memory/2026-11-20.md").write_text("# Trip\nTrain to Madrid.\n")
            server.respond = calls_then_reports(("memory_search", {"query": "madrid"}))
            with anyio.fail_after(20):
                later = await runtime.run_turn("and now?")
    texts = [r.text for r in results if isinstance(r, ToolResultMessage)]
    assert results_of(texts[0])[0]["path"] == "memory/2026-11-20.md"
    after_edit = results_of(texts[2])
    assert after_edit[0]["path"] == "memory/2026-11-20.md"
    assert "Porto" in after_edit[0]["snippet"]
    assert outcome.result.reply == (
        "memory/2026-11-20.md lines 3-4\n## Trip\n"
        "Flight to Porto leaves Friday 7:40 from terminal 2."
    )
    assert results_of(later.result.reply)[0]["snippet"] == "# Trip\nTrain to Madrid."


async def test_memory_get_refuses_files_that_are_not_memory(isolated_state: Path) -> None:
    workspace = isolated_state / "workspace"
    write_notes(workspace)
    (workspace / "private.txt").write_text("nope")
    respond = calls_then_reports(("memory_get", {"path": "private.txt"}))
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                outcome = await runtime.run_turn("read it")
    assert "'private.txt' is not a memory file" in outcome.result.reply


async def test_disabled_memory_offers_no_memory_tools(isolated_state: Path) -> None:
    async with ScriptedModelServer(lambda r: ModelReply.text("ok")) as server:
        write_config(isolated_state, server.base_url, memory={"enabled": False})
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                await runtime.run_turn("hi")
        offered = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert not offered & {"memory_search", "memory_get"}


async def test_notes_the_memory_flush_writes_are_found_by_memory_search(
    isolated_state: Path,
) -> None:
    def respond(request: ModelRequest) -> ModelReply:
        if request.system.startswith(SUMMARIZER_SYSTEM):
            return ModelReply.text(headed("condensed"))
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("[Housekeeping"):
            note = "# Decisions\nWe chose PostgreSQL over MySQL for the ledger service.\n"
            return ModelReply.tool_call("write", {"path": "memory/2026-11-21.md", "content": note})
        if isinstance(last, UserMessage) and last.text == "which database?":
            return ModelReply.tool_call("memory_search", {"query": "ledger database choice"})
        if isinstance(last, ToolResultMessage):
            return ModelReply.text(last.text)
        return ModelReply.text("ok " + words(600, "r"))

    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            window=6000,
            compaction={"memoryFlush": {"softThresholdTokens": 1500}},
        )
        async with Runtime.open() as runtime:
            with anyio.fail_after(60):
                for n in range(8):
                    await runtime.run_turn(f"turn {n}: " + words(700, f"t{n}"))
                assert (isolated_state / "workspace/memory/2026-11-21.md").exists()
                outcome = await runtime.run_turn("which database?")
    assert results_of(outcome.result.reply)[0]["path"] == "memory/2026-11-21.md"


async def test_a_group_chat_cannot_search_or_read_the_owners_past_sessions(
    isolated_state: Path,
) -> None:
    write_notes(isolated_state / "workspace")
    group = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group", sender_id="7")
    state: dict[str, str] = {}

    def respond(request: ModelRequest) -> ModelReply:
        asked = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
        if "keep it safe" in request.messages[asked].text:  # the owner's own turn
            return ModelReply.text("Noted.")
        done = [m.text for m in request.messages[asked:] if isinstance(m, ToolResultMessage)]
        if not done:
            return ModelReply.tool_call("memory_search", {"query": "bank PIN 4711"})
        if len(done) == 1:
            return ModelReply.tool_call("memory_get", {"path": state["transcript"]})
        return ModelReply.text("\n---\n".join(done))

    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, memory={"sessions": True})
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                await runtime.run_turn("My bank PIN is 4711, keep it safe.")
            [transcript] = (isolated_state / "agents" / "main" / "sessions").glob("*.jsonl")
            state["transcript"] = f"sessions/{transcript.name}"
            with anyio.fail_after(20):
                owner = await runtime.run_turn("what was my PIN?", session_key="notes")
                outcome = await runtime.run_turn(
                    "what is the PIN?", session_key="telegram:group:-100", origin=group
                )
    assert "4711" not in outcome.result.reply
    assert "past sessions are only readable from the owner's own chat" in outcome.result.reply
    assert '"results": []' in outcome.result.reply
    assert "4711" in owner.result.reply  # an owner's turn (no origin) still finds it


async def test_a_chat_does_not_find_or_read_another_chats_notes(isolated_state: Path) -> None:
    peers = isolated_state / "workspace" / "memory" / "peers"
    peers.mkdir(parents=True)
    (peers / "telegram-g1.md").write_text("- the launch code is 1234\n", encoding="utf-8")
    (peers / "telegram-g2.md").write_text("- our launch code phrase is swordfish\n", "utf-8")
    g2 = TurnOrigin(channel="telegram", chat_id="g2", chat_type="group", sender_id="7")

    def respond(request: ModelRequest) -> ModelReply:
        asked = max(i for i, m in enumerate(request.messages) if isinstance(m, UserMessage))
        done = [m.text for m in request.messages[asked:] if isinstance(m, ToolResultMessage)]
        if not done:
            return ModelReply.tool_call("memory_search", {"query": "launch code"})
        if len(done) == 1:
            return ModelReply.tool_call("memory_get", {"path": "memory/peers/telegram-g1.md"})
        return ModelReply.text("\n---\n".join(done))

    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with Runtime.open() as runtime:
            with anyio.fail_after(20):
                chat = await runtime.run_turn(
                    "what is the launch code?", session_key="telegram:group:g2", origin=g2
                )
                owner = await runtime.run_turn("what is the launch code?", session_key="notes")
    searched, got = chat.result.reply.split("\n---\n")
    assert "swordfish" in searched and "1234" not in searched
    assert "1234" not in got and "another chat's notes" in got
    assert owner.result.reply.count("1234") == 2  # the owner finds and reads every chat's notes


async def test_the_memory_search_script_searches_through_an_exec_program_in_code_mode(
    isolated_state: Path,
) -> None:
    from nodmix.testing.scripts import memory_search

    write_notes(isolated_state / "workspace")
    async with ScriptedModelServer(memory_search.respond) as server:
        write_config(isolated_state, server.base_url, tools={"codeMode": True})
        async with Runtime.open() as runtime:
            with anyio.fail_after(60):
                outcome = await runtime.run_turn("when am I seeing the dentist?")
        offered = {t["function"]["name"] for t in server.requests[0].body["tools"]}
    assert offered == {"exec", "wait"}
    assert [call.name for call in outcome.result.tool_calls] == ["exec"]
    assert outcome.result.reply.startswith("memory/2026-11-18.md:1-5 (")
