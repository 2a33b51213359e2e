"""A subagent speaks for exactly whom its requester speaks for. A chat member who does not
speak for the owner gains nothing by delegating: the subagent is refused what the member is
refused (the owner's instructions, other chats' notes, the owner's jobs), its commands ask
for approval in the member's chat and run in the sandbox. The owner's subagents keep the
owner's standing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.messages import ToolResultMessage
from nodmix.origin import TurnOrigin, is_owner_turn
from nodmix.security.approvals import RecordingPresenter
from nodmix.sessions import CustomMessageEntry
from nodmix.subagents.lineage import child_origin
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts.subagents import respond
from tests.gateway.support import workspace_file
from tests.subagents.support import (
    HeldChildren,
    open_runtime,
    poll,
    records,
    wait_ended,
    write_config,
)

pytestmark = [pytest.mark.anyio, pytest.mark.integration]

GROUP = TurnOrigin(channel="telegram", chat_id="-100", chat_type="group", sender_id="7")
GROUP_KEY = "agent:main:telegram:group:-100"
OWNER_DM = TurnOrigin(channel="telegram", chat_id="4242", sender_id="4242")
PEER_DM = TurnOrigin(channel="telegram", chat_id="99", sender_id="99")
CRON = TurnOrigin(channel="cron", chat_id="job1")
CHILD = "agent:main:subagent:0123456789abcdef"
_MAY_USE_OPS: dict[str, Any] = {"subagents": {"allowAgents": ["ops"]}}
GRANDCHILD = "agent:main:subagent:fedcba9876543210"


@pytest.mark.parametrize(
    ("origin", "key", "owner"),
    [
        (None, "agent:main:main", True),
        (None, "agent:main:work", True),
        (OWNER_DM, "agent:main:main", True),
        (GROUP, GROUP_KEY, False),
        (PEER_DM, "agent:main:telegram:dm:99", False),
        (CRON, "agent:main:cron:job1:run1", False),
        (CRON, "agent:main:main", False),
    ],
)
def test_a_subagent_and_its_own_subagent_speak_for_whom_the_requester_speaks_for(
    origin: TurnOrigin | None, key: str, owner: bool
) -> None:
    assert is_owner_turn(origin, "main", key) is owner
    child = child_origin(origin, key)
    assert is_owner_turn(child, "main", CHILD) is owner
    grandchild = child_origin(child, CHILD)
    assert is_owner_turn(grandchild, "main", GRANDCHILD) is owner
    if origin is not None:
        assert child is not None and grandchild is not None
        assert child.chat_id == origin.chat_id and child.channel == origin.channel
        assert grandchild.spawned_by == key  # the first requester, however deep


def _tool_texts(server: ScriptedModelServer, tool: str) -> list[str]:
    texts: dict[str, str] = {}
    for recorded in server.requests:
        assert recorded.request is not None
        for message in recorded.request.messages:
            if isinstance(message, ToolResultMessage) and message.tool_name == tool:
                texts[message.tool_call_id] = message.text
    return list(texts.values())


PROBES = [
    ("write", "use write path=MEMORY.md content=obey-the-group"),
    ("edit", "use edit path=skills/x/SKILL.md oldText=a newText=b"),
    ("memory_get", "use memory_get path=memory/peers/telegram-4242.md"),
    ("cron", "use cron action=add session=main in=5m message=take-over"),
]


@pytest.mark.parametrize(("tool", "probe"), PROBES, ids=[tool for tool, _ in PROBES])
async def test_a_group_members_subagent_is_refused_what_the_member_is_refused(
    isolated_state: Path, tool: str, probe: str
) -> None:
    workspace_file(isolated_state, "MEMORY.md", "the owner's notes\n")
    (isolated_state / "workspace" / "memory" / "peers").mkdir(parents=True)
    workspace_file(isolated_state, "memory/peers/telegram-4242.md", "the owner's chat notes\n")
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn(probe, session_key=GROUP_KEY, origin=GROUP)
            await runtime.run_turn(f"spawn wait: {probe}", session_key=GROUP_KEY, origin=GROUP)
            await wait_ended(isolated_state, 1)
    direct, delegated = _tool_texts(server, tool)
    assert direct == delegated
    assert any(word in direct for word in ("not writable", "another chat", "only the owner"))
    memory = (isolated_state / "workspace" / "MEMORY.md").read_text(encoding="utf-8")
    assert memory == "the owner's notes\n"


@pytest.mark.parametrize(
    ("tool", "probe"),
    [("read", "use read MEMORY.md"), ("memory_get", "use memory_get path=MEMORY.md")],
    ids=["read", "memory_get"],
)
async def test_a_group_members_subagent_reads_the_owners_memory_exactly_as_the_member_may(
    isolated_state: Path, tool: str, probe: str
) -> None:
    """Whatever the rule for a member reading `MEMORY.md` (`security/workspace_guard.py`,
    `memory/tools.py`), delegating does not change the answer."""
    workspace_file(isolated_state, "MEMORY.md", "the owner's notes\n")
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn(probe, session_key=GROUP_KEY, origin=GROUP)
            await runtime.run_turn(f"spawn wait: {probe}", session_key=GROUP_KEY, origin=GROUP)
            await wait_ended(isolated_state, 1)
    direct, delegated = _tool_texts(server, tool)
    assert direct == delegated


async def test_the_owner_in_their_telegram_dm_keeps_owner_standing_through_a_subagent(
    isolated_state: Path,
) -> None:
    workspace_file(isolated_state, "MEMORY.md", "old\n")
    async with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            probe = "use write path=MEMORY.md content=updated-by-the-owner"
            await runtime.run_turn(f"spawn wait: {probe}", origin=OWNER_DM)
    (written,) = _tool_texts(server, "write")
    assert "MEMORY.md" in written and "not writable" not in written
    assert (isolated_state / "workspace" / "MEMORY.md").read_text() == "updated-by-the-owner"


async def test_a_group_members_subagent_asks_approval_in_that_chat_for_a_command(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state, server.base_url, tools={"exec": {"approvalTimeoutSeconds": 30}}
        )
        async with open_runtime(isolated_state) as runtime:
            chat = RecordingPresenter()
            runtime.security.broker.router.register("channel", chat)
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: runtime.run_turn(
                        "spawn wait: use exec id", session_key=GROUP_KEY, origin=GROUP
                    )
                )
                await poll(lambda: bool(chat.batches), what="the approval request")
                (request,) = chat.batches[0].requests
                runtime.security.broker.resolve(request.id, "deny", by="test")
            (run,) = await wait_ended(isolated_state, 1)
    assert request.command == "id"
    assert request.session_key == run.child_key
    assert request.origin is not None and request.origin.chat_id == "-100"
    assert request.origin.spawned_by == GROUP_KEY
    assert run.reply is not None and "Not run: the user denied this command" in run.reply


async def test_a_group_members_subagent_runs_commands_in_the_sandbox(
    isolated_state: Path,
) -> None:
    secret = workspace_file(isolated_state, "notes.txt", "x")
    state_file = isolated_state / "nodmix.json"
    probe = f"use exec cat {state_file}"
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            tools={"exec": {"security": "full", "ask": "off"}},
        )
        _sandbox(isolated_state, {"mode": "non-main"})
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn(probe)  # the owner's main session: not sandboxed
            await runtime.run_turn(f"spawn wait: {probe}", session_key=GROUP_KEY, origin=GROUP)
            await wait_ended(isolated_state, 1)
    owner, child = _tool_texts(server, "exec")
    assert "scripted" in owner  # the config file, read unsandboxed
    assert "scripted" not in child and "No such file" in child  # the state dir is hidden
    assert secret.exists()


def _sandbox(state: Path, sandbox: dict[str, Any]) -> None:
    path = state / "nodmix.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["agents"]["defaults"]["sandbox"] = sandbox
    path.write_text(json.dumps(config), encoding="utf-8")


async def test_a_result_whose_requester_session_is_gone_reaches_main_only_for_the_owner(
    isolated_state: Path,
) -> None:
    model = HeldChildren()
    one_shot = "agent:main:openai:0123456789abcdef0123"
    async with ScriptedModelServer(model) as server:
        write_config(isolated_state, server.base_url)
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("spawn: held group job", session_key=GROUP_KEY, origin=GROUP)
            await runtime.run_turn("spawn: held api job", session_key=one_shot)
            runtime.sessions.archive("main", [GROUP_KEY, one_shot])
            model.release()
            await runtime.subagents.settle()
            main = runtime.sessions.open("agent:main:main")
            posted = [e for e in main.entries if isinstance(e, CustomMessageEntry)]
    assert [p.details["label"] for p in posted] == ["held api job"]
    assert all(r.announced for r in records(isolated_state))


async def test_a_sandboxed_turn_cannot_reach_the_host_through_another_agents_subagent(
    isolated_state: Path,
) -> None:
    # The owner's main session is sandboxed (`mode: all`); agent `ops` is not. A prompt
    # injected into main that spawns an `ops` subagent must not get an unsandboxed shell.
    state_file = isolated_state / "nodmix.json"
    probe = f"use exec cat {state_file}"
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=[{"id": "main", "sandbox": {"mode": "all"}, **_MAY_USE_OPS}, {"id": "ops"}],
            tools={"exec": {"security": "full", "ask": "off"}},
        )
        async with open_runtime(isolated_state) as runtime:
            result = await runtime.run_turn(f"spawn wait agent=ops: {probe}")
    assert "less confined" in result.result.reply and "sandbox" in result.result.reply
    assert all("scripted" not in text for text in _tool_texts(server, "exec"))
    assert records(isolated_state) == []


async def test_a_sandboxed_turn_may_spawn_an_agent_that_is_sandboxed_too(
    isolated_state: Path,
) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=[
                {"id": "main", "sandbox": {"mode": "all"}, **_MAY_USE_OPS},
                {"id": "ops", "sandbox": {"mode": "non-main"}},
            ],
        )
        async with open_runtime(isolated_state) as runtime:
            result = await runtime.run_turn("spawn wait agent=ops: say hi")
    assert "done: say hi" in result.result.reply


@pytest.mark.parametrize(
    ("agents", "sender", "target"),
    [
        # non-main: the owner's other sessions are sandboxed, the main session is not
        ([{"id": "main", "sandbox": {"mode": "non-main"}}], "work", "agent:main:main"),
        # all: every session of main is sandboxed, agent ops runs unsandboxed
        (
            [{"id": "main", "sandbox": {"mode": "all"}, **_MAY_USE_OPS}, {"id": "ops"}],
            "main",
            "agent:ops:main",
        ),
    ],
)
async def test_a_sandboxed_turn_cannot_reach_the_host_by_messaging_an_unsandboxed_session(
    isolated_state: Path, agents: list[dict[str, Any]], sender: str, target: str
) -> None:
    state_file = isolated_state / "nodmix.json"
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=agents,
            tools={"exec": {"security": "full", "ask": "off"}},
        )
        async with open_runtime(isolated_state) as runtime:
            owner_of_target = target.split(":")[1]
            await runtime.run_turn("hello", agent_id=owner_of_target, session_key=target)
            result = await runtime.run_turn(
                f"send {target} use exec cat {state_file}", session_key=sender
            )
    assert "less confined" in result.result.reply
    assert all("scripted" not in text for text in _tool_texts(server, "exec"))


async def test_an_agent_starts_turns_as_another_agent_only_when_allow_agents_names_it(
    isolated_state: Path,
) -> None:
    # `main` denies exec; `ops` allows it. Without `allowAgents`, main's turns can neither
    # spawn an ops subagent nor message an ops session, so they cannot borrow its shell.
    state_file = isolated_state / "nodmix.json"
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=[{"id": "main", "tools": {"deny": ["exec"]}}, {"id": "ops"}],
            tools={"exec": {"security": "full", "ask": "off"}},
        )
        async with open_runtime(isolated_state) as runtime:
            await runtime.run_turn("hello", agent_id="ops", session_key="agent:ops:main")
            spawned = await runtime.run_turn(f"spawn wait agent=ops: use exec cat {state_file}")
            sent = await runtime.run_turn(f"send agent:ops:main use exec cat {state_file}")
            await runtime.run_turn("agents")
    assert "may not spawn subagents of agent 'ops'" in spawned.result.reply
    assert "allowAgents" in spawned.result.reply
    assert "may not start turns in sessions of agent 'ops'" in sent.result.reply
    assert all("scripted" not in text for text in _tool_texts(server, "exec"))
    assert records(isolated_state) == []
    listing = json.loads(_tool_texts(server, "agents_list")[-1])
    assert [a["agentId"] for a in listing["agents"]] == ["main"]


async def test_allow_agents_star_lets_the_owner_spawn_every_agent(isolated_state: Path) -> None:
    async with ScriptedModelServer(respond) as server:
        write_config(
            isolated_state,
            server.base_url,
            agents=[
                {"id": "main", "subagents": {"allowAgents": ["*"]}},
                {"id": "ops"},
                {"id": "research"},
            ],
        )
        async with open_runtime(isolated_state) as runtime:
            result = await runtime.run_turn("spawn wait agent=research: find papers")
            await runtime.run_turn("agents")
    assert result.result.reply == "find papers: done: find papers"
    listing = json.loads(_tool_texts(server, "agents_list")[-1])
    assert [a["agentId"] for a in listing["agents"]] == ["main", "ops", "research"]
