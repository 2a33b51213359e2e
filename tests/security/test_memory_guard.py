"""The owner's memory stays the owner's: a turn that does not speak for the owner cannot read
`MEMORY.md` or `memory/` through any tool, a code-mode program or the real sandbox, however the
path is spelled, while its own notes stay readable (real runtime, scripted model server,
bubblewrap)."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from nodmix.automation.jobs import new_job
from nodmix.automation.runner import plan_job_run
from nodmix.automation.schedule import every_schedule
from nodmix.config.loader import load_config
from nodmix.errors import ToolError
from nodmix.messages import ToolResultMessage
from nodmix.origin import TurnOrigin, sees_owner_memory
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime, TurnOutcome
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.tools.core import core_tools
from tests.gateway.support import NO_RETRY, write_config
from tests.security.conftest import context

pytestmark = pytest.mark.anyio

CANARY = "CANARY-b81e the owner's doctor is Dr. Vance"
GROUP = TurnOrigin(channel="telegram", chat_id="g1", chat_type="group", sender_id="mallory")
GROUP_KEY = "telegram:group:g1"
OWN_NOTES = "memory/peers/telegram-g1.md"


def _seed(workspace: Path) -> Path:
    (workspace / "memory" / "peers").mkdir(parents=True, exist_ok=True)
    (workspace / "MEMORY.md").write_text(f"- {CANARY}\n", encoding="utf-8")
    (workspace / "memory" / "2026-03-04.md").write_text(f"- {CANARY}\n", encoding="utf-8")
    (workspace / OWN_NOTES).write_text("- the group likes cats\n", encoding="utf-8")
    return workspace


def model(request: ModelRequest) -> ModelReply:
    """`program <js>` runs a code-mode program, `call <tool> <json>` one tool call."""
    last = request.messages[-1]
    if isinstance(last, ToolResultMessage):
        return ModelReply.text("tool said: " + "\n".join(b.text for b in last.content))  # type: ignore[union-attr]
    text = getattr(last, "text", "")
    if text.startswith("program "):
        return ModelReply.tool_call("exec", {"code": text.removeprefix("program ")})
    name, args = text.removeprefix("call ").split(" ", 1)
    return ModelReply.tool_call(name, json.loads(args))


@contextlib.asynccontextmanager
async def _runtime(state: Path, server: ScriptedModelServer, tools: str) -> AsyncIterator[Runtime]:
    write_config(
        state,
        server.base_url,
        f"tools: {{ {tools}exec: {{ security: 'full', ask: 'off' }} }}",
        agents="list: [{ id: 'main', sandbox: { mode: 'non-main' } }]",
    )
    env = dict(os.environ)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        yield runtime


async def _say(runtime: Runtime, text: str, origin: TurnOrigin | None, key: str) -> str:
    outcome = await runtime.submit(text, session_key=key, origin=origin)
    assert isinstance(outcome, TurnOutcome)
    return outcome.result.reply


async def test_a_code_mode_program_of_a_group_reads_none_of_the_owners_memory(
    isolated_state: Path, bwrap: str
) -> None:
    _seed(isolated_state / "workspace")
    program = (
        "const out = [];"
        "const calls = [['nodmix:core:read', {path: 'MEMORY.md'}],"
        " ['nodmix:core:read', {path: './memory/2026-03-04.md'}],"
        " ['memory_get', {path: 'MEMORY.md'}], ['memory_search', {query: 'doctor Vance'}],"
        " ['nodmix:core:exec', {command: 'cat MEMORY.md memory/*.md; grep -r Vance . || true'}],"
        f" ['nodmix:core:read', {{path: '{OWN_NOTES}'}}]];"
        "for (const [tool, args] of calls) {"
        "  try { const r = await tools.call(tool, args); out.push(JSON.stringify(r)); }"
        "  catch (e) { out.push(String(e.message || e)); } }"
        "return out.join('\\n');"
    )
    with ScriptedModelServer(model) as server:
        async with _runtime(isolated_state, server, "codeMode: true, ") as runtime:
            group = await _say(runtime, f"program {program}", GROUP, GROUP_KEY)
            owner = await _say(runtime, f"program {program}", None, "main")
            systems = [r.request.system or "" for r in server.requests]
    assert "Vance" not in group, group
    assert "the owner's memory" in group and "the group likes cats" in group
    assert not any("Vance" in s for s in systems[:2])  # the group's two requests
    assert "Vance" in owner and CANARY in systems[-1]


async def test_read_and_edit_refuse_every_spelling_of_the_memory_paths(tmp_path: Path) -> None:
    workspace = _seed(tmp_path)
    (workspace / "notes").mkdir()
    (workspace / "notes" / "link.md").symlink_to(workspace / "MEMORY.md")
    (workspace / "mem").symlink_to(workspace / "memory")
    tools = {t.spec.name: t for t in core_tools()}
    ctx = context(workspace, GROUP_KEY, origin=GROUP)
    for path in (
        "MEMORY.md",
        "memory.md",
        "./MEMORY.md",
        "notes/../MEMORY.md",
        str(workspace / "MEMORY.md"),
        "notes/link.md",
        "memory/2026-03-04.md",
        "mem/2026-03-04.md",
        "Memory/2026-03-04.md",
        "memory/peers/telegram-other.md",
    ):
        with pytest.raises(ToolError, match="owner's memory"):
            await tools["read"].call({"path": path}, ctx)
        with pytest.raises(ToolError):
            await tools["edit"].call({"path": path, "oldText": "Dr", "newText": "x"}, ctx)
    own = await tools["read"].call({"path": OWN_NOTES}, ctx)
    assert "cats" in own.text_content
    owner = await tools["read"].call({"path": "notes/link.md"}, context(workspace))
    assert CANARY in owner.text_content


async def test_whose_runs_see_the_owners_memory() -> None:
    now = time.time()
    cli = new_job(name="a", message="m", schedule=every_schedule("1h"), now=now)
    from_chat = new_job(
        name="b", message="m", schedule=every_schedule("1h"), now=now, for_owner=False
    )
    legacy = msgspec.structs.replace(from_chat, for_owner=None, created_by="agent")
    owner_dm = TurnOrigin(channel="telegram", chat_id="42", sender_id="42", owner=True)
    stranger_dm = TurnOrigin(channel="telegram", chat_id="7", sender_id="7")
    heartbeat = TurnOrigin(channel="heartbeat", chat_id="main")
    webhook = TurnOrigin(channel="webhook", chat_id="mail")
    shared = msgspec.structs.replace(GROUP, memory=True)
    seen = {
        "cli job": plan_job_run(cli, "schedule", "r1").origin,
        "chat job": plan_job_run(from_chat, "schedule", "r2").origin,
        "old chat job": plan_job_run(legacy, "schedule", "r3").origin,
        "owner dm": owner_dm,
        "owner dm, per-peer": owner_dm,
        "stranger dm": stranger_dm,
        "group": GROUP,
        "owner in a group": msgspec.structs.replace(GROUP, owner=True),
        "shared group": shared,
        "heartbeat": heartbeat,
        "webhook": webhook,
    }
    keys = {"owner dm": "agent:main:main", "stranger dm": "agent:main:telegram:dm:7"}
    result = {
        name: sees_owner_memory(origin, "main", keys.get(name, "agent:main:x"))
        for name, origin in seen.items()
    }
    assert result == {
        "cli job": True,
        "chat job": False,
        "old chat job": False,
        "owner dm": True,
        "owner dm, per-peer": True,
        "stranger dm": False,
        "group": False,
        "owner in a group": False,
        "shared group": True,
        "heartbeat": True,
        "webhook": False,
    }
