"""Compaction through the runtime over a real model socket: /compact, sessions.compact, plugins."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from nodmix.compaction.prompts import SUMMARIZER_SYSTEM
from nodmix.compaction.service import compaction_message
from nodmix.errors import SessionError
from nodmix.events import CompactionEvent, RunEvent
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import CommandOutcome, Runtime
from nodmix.sessions import CompactionEntry, messages_for_model
from nodmix.testing.model_server import ScriptedModelServer

from ..context.runtime_support import TINY_ENGINE_PLUGIN, plugin_file, write_config
from .builders import headed, words

pytestmark = pytest.mark.anyio

PROVIDER_PLUGIN = """
from nodmix.plugins import Plugin

class Provider:
    async def summarize(self, request):
        names = sorted({m.role for m in request.messages})
        return "PLUGIN SUMMARY of " + ",".join(names)

plugin = Plugin(
    id="summaries",
    name="Summaries",
    register=lambda api: api.register_compaction_provider("house-style", Provider()),
)
"""


def respond(request: ModelRequest) -> ModelReply:
    if request.system.startswith(SUMMARIZER_SYSTEM):
        return ModelReply.text(headed("MODEL SUMMARY"))
    return ModelReply.text("ok " + words(300, "r"))


async def _chat(runtime: Runtime, turns: int) -> None:
    with anyio.fail_after(10):
        for n in range(turns):
            await runtime.run_turn(f"turn {n}: " + words(300, f"t{n}"))


async def test_slash_compact_summarises_and_the_next_request_carries_the_summary(
    isolated_state: Path,
) -> None:
    events: list[RunEvent] = []
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, window=200_000)
        async with Runtime.open() as runtime:
            await _chat(runtime, 3)
            with anyio.fail_after(10):
                outcome = await runtime.submit(
                    "/compact Focus on the API design", emit=events.append
                )
                await runtime.run_turn("what did we decide?")
            session = runtime.open_session(runtime.agent(), None)
        summary_request = next(
            r
            for r in server.requests
            if r.request and r.request.system.startswith(SUMMARIZER_SYSTEM)
        )
        last = server.requests[-1].body["messages"]
    assert isinstance(outcome, CommandOutcome) and outcome.command == "compact"
    assert "Compacted the conversation" in outcome.message and "#1" in outcome.message
    assert outcome.data["compacted"] and outcome.data["result"]["tokensBefore"] > 0
    assert "Focus on the API design" in str(summary_request.body)
    assert "MODEL SUMMARY" in last[1]["content"] and last[-1]["content"] == "what did we decide?"
    assert [m["role"] for m in last] == ["system", "user", "user"]  # a clean checkpoint
    assert session.entry.compaction_count == 1
    assert [e.phase for e in events if isinstance(e, CompactionEvent)] == ["start", "end"]


async def test_compact_session_on_a_fresh_conversation_reports_nothing_to_do(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, compaction={"keepRecentTokens": 5000})
        async with Runtime.open() as runtime:
            await _chat(runtime, 1)
            with anyio.fail_after(10):
                done = await runtime.compact_session(None, "agent:main:main")
    assert done.result.ok and not done.result.compacted
    assert done.to_json()["compacted"] is False and "nothing to compact" in (
        done.result.reason or ""
    )
    assert compaction_message(done) == (
        "Nothing to compact yet (the conversation is a single exchange)."
    )


async def test_compacting_a_new_session_says_it_is_empty(isolated_state: Path) -> None:
    write_config(isolated_state, "http://127.0.0.1:9/v1")
    async with Runtime.open() as runtime:
        await runtime.submit("/new", session_key="agent:main:main")
        done = await runtime.compact_session(None, "agent:main:main")
    assert compaction_message(done) == "Nothing to compact yet (the conversation is empty)."


async def test_compacting_a_session_that_does_not_exist_is_an_error(isolated_state: Path) -> None:
    write_config(isolated_state, "http://127.0.0.1:9/v1")
    async with Runtime.open() as runtime:
        with pytest.raises(SessionError):
            await runtime.compact_session(None, "nope")


async def test_a_plugin_engine_delegating_compaction_gets_the_builtin_one(
    isolated_state: Path,
) -> None:
    plugin = plugin_file(isolated_state / "plugins", "tiny", TINY_ENGINE_PLUGIN)
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            plugins={"load": {"paths": [str(plugin)]}, "slots": {"contextEngine": "tiny"}},
        )
        async with Runtime.open() as runtime:
            await _chat(runtime, 3)
            with anyio.fail_after(10):
                done = await runtime.compact_session(None, "main")
            session = runtime.open_session(runtime.agent(), "main")
    assert done.result.compacted and done.compaction_count == 1
    assert isinstance(session.entries[-1], CompactionEntry)
    assert "MODEL SUMMARY" in messages_for_model(session.entries)[0].text


async def test_a_registered_compaction_provider_writes_the_summary(isolated_state: Path) -> None:
    plugin = plugin_file(isolated_state / "plugins", "summaries", PROVIDER_PLUGIN)
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            plugins={"load": {"paths": [str(plugin)]}},
            compaction={"provider": "house-style"},
        )
        async with Runtime.open() as runtime:
            await _chat(runtime, 2)
            with anyio.fail_after(10):
                done = await runtime.compact_session(None, "main")
            session = runtime.open_session(runtime.agent(), "main")
        summary_calls = [
            r
            for r in server.requests
            if r.request and r.request.system.startswith(SUMMARIZER_SYSTEM)
        ]
    entry = session.entries[-1]
    assert done.result.compacted and summary_calls == []
    assert isinstance(entry, CompactionEntry) and entry.summary.startswith(
        "PLUGIN SUMMARY of assistant,user"
    )
    assert entry.from_hook is True


async def test_a_provider_compacts_a_small_window_automatically_even_with_mode_off(
    isolated_state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plugin = plugin_file(isolated_state / "plugins", "summaries", PROVIDER_PLUGIN)
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            window=4096,
            plugins={"load": {"paths": [str(plugin)]}},
            compaction={"mode": "off", "provider": "house-style"},
        )
        async with Runtime.open() as runtime:
            await _chat(runtime, 4)
            session = runtime.open_session(runtime.agent(), "main")
    summaries = [e for e in session.entries if isinstance(e, CompactionEntry)]
    assert session.entry.compaction_count >= 1 and summaries
    assert all(e.summary.startswith("PLUGIN SUMMARY") for e in summaries)
    assert "forces compaction mode 'safeguard': mode 'off' is ignored" in caplog.text


async def test_a_manual_compaction_waits_for_the_running_turn(isolated_state: Path) -> None:
    release = anyio.Event()
    started = anyio.Event()

    async def slow(request: ModelRequest) -> ModelReply:
        if request.system.startswith(SUMMARIZER_SYSTEM):
            return ModelReply.text(headed("S"))
        if "slow" in str(request.messages[-1]):
            started.set()
            await release.wait()
        return ModelReply.text("ok")

    async with ScriptedModelServer(slow) as server:
        write_config(isolated_state, server.base_url)
        async with Runtime.open() as runtime:
            await runtime.run_turn("first")
            order: list[str] = []

            async def turn() -> None:
                await runtime.run_turn("slow one")
                order.append("turn")

            async def compact() -> None:
                await started.wait()
                done = await runtime.compact_session(None, "main")
                order.append(f"compact:{done.result.compacted}")

            with anyio.fail_after(10):
                async with anyio.create_task_group() as group:
                    group.start_soon(turn)
                    group.start_soon(compact)
                    await started.wait()
                    await anyio.wait_all_tasks_blocked()
                    assert order == []
                    release.set()
    assert order == ["turn", "compact:True"]


async def test_a_misconfigured_compaction_model_fails_the_compaction_not_the_runtime(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, compaction={"model": "nope/summariser"})
        async with Runtime.open() as runtime:
            await _chat(runtime, 2)
            with anyio.fail_after(10):
                outcome = await runtime.submit("/compact")
    assert isinstance(outcome, CommandOutcome)
    assert outcome.message.startswith("Compaction failed:") and "nope" in outcome.message
    assert "full history was kept" in outcome.message and not outcome.data["ok"]
