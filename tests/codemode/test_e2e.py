"""The spec's E2E plan, end to end: a real `Runtime` (what the gateway runs) built from a config
file, the scripted OpenAI-compatible model server over a socket, the bundled `notes` plugin,
real MCP servers as subprocesses and a client tool source. The model is a script that runs
`exec` programs and follows `waiting` results with `wait`, reading results as the JSON text a
real model would read.
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.config import load_config
from nodmix.messages import ToolCallBlock, ToolResultMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelReply
from nodmix.runtime import Runtime
from nodmix.sessions import export_trajectory, messages_for_model
from nodmix.subagents.service import SESSION_TOOLS
from nodmix.testing.model_server import ScriptedModelServer

from .support import StaticTools, text_tool, wait_until

EVERYTHING_BIN = (
    Path(__file__).resolve().parents[2] / "node_modules" / ".bin" / "mcp-server-everything"
)
CLIENT_TOOLS = [
    text_tool(
        "select_file",
        "chosen.txt",
        owner="app",
        source="client",
        description="Ask the user to pick a file in the app.",
    ),
    text_tool("launch_missiles", "boom", owner="app", source="client"),
]
DIRECT_NAMES = [
    "exec",
    "read",
    "edit",
    "web_fetch",
    "memory_search",
    "memory_get",
    "note_add",
    "note_list",
    "note_read",
    "note_search",
    "time__get_current_time",
    "time__convert_time",
    "select_file",
    "cron",
    "sessions_spawn",
    "sessions_send",
    "sessions_list",
    "sessions_history",
    "agents_list",
]


@dataclass
class Driver:
    """A scripted model: runs `programs` with exec (following `waiting` with wait), then
    answers with the JSON list of final results."""

    programs: deque[dict[str, Any]]
    results: list[dict[str, Any]] = field(default_factory=list)
    seen: list[dict[str, Any]] = field(default_factory=list)
    requests: list[ModelRequest] = field(default_factory=list)

    def __call__(self, request: ModelRequest) -> ModelReply:
        self.requests.append(request)
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage) and last.tool_name in ("exec", "wait"):
            data = json.loads(last.text)
            self.seen.append(data)
            if data["status"] == "waiting":
                return ModelReply.tool_call("wait", {"runId": data["runId"]})
            self.results.append(data)
        if self.programs:
            return ModelReply.tool_call("exec", self.programs.popleft())
        return ModelReply.text(json.dumps([r.get("value", r.get("code")) for r in self.results]))


def drive(*programs: str | dict[str, Any]) -> Driver:
    items = [p if isinstance(p, dict) else {"code": p} for p in programs]
    return Driver(deque(items))


def _config(state: Path, base_url: str, *, code_mode: Any, mcp: bool) -> Path:
    servers = {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        "everything": {"command": str(EVERYTHING_BIN), "args": ["stdio"]},
    }
    config = {
        "models": {
            "providers": {
                "local": {
                    "api": "openai-completions",
                    "baseUrl": base_url,
                    "apiKey": "test-key",
                    "models": [{"id": "scripted"}],
                }
            }
        },
        "agents": {
            "defaults": {"model": {"primary": "local/scripted"}},
            "list": [
                {"id": "main"},
                {"id": "quick", "tools": {"codeMode": {"timeoutMs": 300, "snapshotTtlSeconds": 1}}},
            ],
        },
        "tools": {
            "codeMode": code_mode,
            "deny": ["write", "mcp:everything:get-env", "client:app:launch_missiles"],
        },
        "plugins": {"entries": {"notes": {"enabled": True}}},
        "mcp": {"servers": servers if mcp else {"time": servers["time"]}},
    }
    path = state / "nodmix.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    """Module scope: one model server, one runtime and one set of MCP servers per module."""
    return "asyncio"


@dataclass
class Gateway:
    runtime: Runtime
    server: ScriptedModelServer
    state: Path

    async def turn(
        self,
        driver: Driver,
        text: str = "go",
        *,
        session: str,
        agent: str = "main",
    ) -> Any:
        self.server.respond = driver
        outcome = await self.runtime.run_turn(
            text, agent_id=agent, session_key=f"agent:{agent}:{session}"
        )
        return outcome

    def body_tools(self, index: int = -1) -> list[str]:
        body = self.server.requests[index].body
        return sorted(t["function"]["name"] for t in body.get("tools", []))


@pytest.fixture(scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    if not EVERYTHING_BIN.exists():
        pytest.fail(f"{EVERYTHING_BIN} is missing: run `npm ci` in the repository first")
    state = tmp_path_factory.mktemp("gateway-state")
    async with ScriptedModelServer(lambda r: ModelReply.text("idle")) as server:
        path = _config(state, server.base_url, code_mode={"enabled": True}, mcp=True)
        env = {**os.environ, "NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": str(path)}
        async with Runtime.open(
            load_config(path), env=env, extra_sources=[StaticTools(CLIENT_TOOLS)]
        ) as runtime:
            workspace = runtime.agent("main").workspace
            workspace.mkdir(parents=True, exist_ok=True)
            (workspace / "notes.txt").write_text("The ferry leaves at 9:40.\n", encoding="utf-8")
            yield Gateway(runtime, server, state)


# 1-3 -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_1_to_3_a_gateway_without_code_mode_sends_the_direct_tools_unchanged(
    tmp_path: Path,
) -> None:
    state = tmp_path / "plain"
    state.mkdir()
    async with ScriptedModelServer(lambda r: ModelReply.text("direct")) as server:
        path = _config(state, server.base_url, code_mode={"enabled": False}, mcp=False)
        env = {**os.environ, "NODMIX_STATE_DIR": str(state), "NODMIX_CONFIG_PATH": str(path)}
        async with Runtime.open(
            load_config(path), env=env, extra_sources=[StaticTools(CLIENT_TOOLS)]
        ) as runtime:
            outcome = await runtime.run_turn("hello")
    assert outcome.result.reply == "direct"
    body = server.requests[0].body
    assert [t["function"]["name"] for t in body["tools"]] == DIRECT_NAMES
    assert "exec" in body["messages"][0]["content"]  # the plain tool list in the system prompt


# 4-6 -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_4_to_6_with_code_mode_the_model_sees_exactly_exec_and_wait(
    gateway: Gateway,
) -> None:
    driver = drive("return 1")
    outcome = await gateway.turn(driver, session="e2e-4")
    assert json.loads(outcome.result.reply) == [1]
    sent = gateway.server.requests[-2:]
    assert all(
        sorted(t["function"]["name"] for t in r.body["tools"]) == ["exec", "wait"] for r in sent
    )
    system = sent[0].body["messages"][0]["content"]
    assert "select_file" not in system and "note_add" not in system
    exec_schema = next(t for t in sent[0].body["tools"] if t["function"]["name"] == "exec")
    description = exec_schema["function"]["description"]
    assert "MCP servers (everything, time)" in description and "`Notes`" in description


# 7-8 -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_7_and_8_all_tools_lists_the_test_tools_and_the_catalog_calls_them(
    gateway: Gateway,
) -> None:
    driver = drive(
        """
        const ids = ALL_TOOLS.map(t => t.id);
        const file = (await tools.search('read file'))[0];
        const read = await tools.call((await tools.describe(file.id)).id, { path: 'notes.txt' });
        const plugin = await tools.call((await tools.search('save note'))[0].id,
                                        { title: 'Ferry', text: 'leaves 9:40' });
        const pickEntry = (await tools.search('pick a file'))[0];
        const picked = await tools.call(pickEntry.id, {});
        const viaNamespace = await Notes.search('ferry');
        return { ids, file: file.id, read: read.text, plugin: plugin.details, pick: pickEntry.id,
                 picked: picked.text, ns: viaNamespace.notes.map(n => n.id) };
        """
    )
    await gateway.turn(driver, session="e2e-7")
    value = driver.results[0]["value"]
    assert set(value["ids"]) == {
        "nodmix:core:exec",
        "nodmix:core:read",
        "nodmix:core:edit",
        "nodmix:core:web_fetch",
        "nodmix:core:memory_search",
        "nodmix:core:memory_get",
        "nodmix:core:cron",
        *(f"nodmix:core:{name}" for name in SESSION_TOOLS),
        "nodmix:notes:note_add",
        "nodmix:notes:note_list",
        "nodmix:notes:note_read",
        "nodmix:notes:note_search",
        "nodmix:skills:skills_list",  # behind the `skills` namespace (bundled skills)
        "nodmix:skills:skill_read",
        "client:app:select_file",
    }
    assert value["file"] == "nodmix:core:read" and "9:40" in value["read"]
    assert value["plugin"] == {"id": "ferry", "title": "Ferry"}
    assert value["pick"] == "client:app:select_file" and value["picked"] == "chosen.txt"
    assert value["ns"] == ["ferry"]


# 9-10 ------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_9_and_10_mcp_declarations_and_namespace_calls_without_mcp_catalog_entries(
    gateway: Gateway,
) -> None:
    driver = drive(
        """
        const files = (await API.list('mcp')).files.map(f => f.path);
        const dts = (await API.read('mcp/everything.d.ts')).content;
        const sum = await MCP.everything.getSum({ a: 20, b: 22 });
        const now = await MCP.time.getCurrentTime({ timezone: 'UTC' });
        let direct; try { await tools.call('mcp:time:get_current_time', { timezone: 'UTC' }); }
                    catch (e) { direct = e.message.split('.')[0]; }
        return { files, hasSum: dts.includes('function getSum('), hasEnv: dts.includes('getEnv'),
                 sum: sum.content[0].text, tz: now.structuredContent.timezone, direct,
                 mcpInAll: ALL_TOOLS.some(t => t.source === 'mcp'),
                 mcpSearch: (await tools.search('time', { limit: 50 }))
                   .some(t => t.source === 'mcp') };
        """
    )
    await gateway.turn(driver, session="e2e-9")
    value = driver.results[0]["value"]
    assert value["files"] == ["mcp/index.d.ts", "mcp/everything.d.ts", "mcp/time.d.ts"]
    assert value["hasSum"] is True and value["hasEnv"] is False  # get-env is denied
    assert value["sum"] == "The sum of 20 and 22 is 42." and value["tz"] == "UTC"
    assert value["direct"] == "Unknown tool id: mcp:time:get_current_time"
    assert value["mcpInAll"] is False and value["mcpSearch"] is False
    # MCP entries stay in the run catalog: the telemetry on the stored result counts them.
    assert "telemetry" not in driver.results[0]  # not sent to the model by default
    stored = [
        m
        for m in messages_for_model(gateway.runtime.sessions.open("agent:main:e2e-9").entries)
        if isinstance(m, ToolResultMessage) and m.tool_name == "exec"
    ]
    assert stored[-1].details["telemetry"]["sources"]["mcp"] > 0


# 11 --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_11_denied_tools_are_absent_and_cannot_be_called_by_guessed_id(
    gateway: Gateway,
) -> None:
    guesses = ["nodmix:core:write", "write", "client:app:launch_missiles", "launch_missiles"]
    driver = drive(
        f"""
        const names = ['write', 'launch_missiles'];
        const out = {{ listed: ALL_TOOLS.filter(t => names.includes(t.name)) }};
        for (const id of {guesses!r}) {{
          try {{ await tools.call(id, {{ path: 'pwned.txt', content: 'x' }}); out[id] = 'CALLED'; }}
          catch (e) {{ out[id] = e.message.split('.')[0]; }}
        }}
        out.env = typeof MCP.everything.getEnv;
        return out;
        """
    )
    await gateway.turn(driver, session="e2e-11")
    value = driver.results[0]["value"]
    assert value.pop("listed") == [] and value.pop("env") == "undefined"
    assert value == {g: f"Unknown tool id: {g}" for g in guesses}
    assert not (gateway.runtime.agent("main").workspace / "pwned.txt").exists()


# 12-14 and 16 ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_12_to_14_and_16_a_slow_nested_call_is_resumed_by_wait_and_exported(
    gateway: Gateway,
) -> None:
    driver = drive(
        "text('before');"
        "const r = await tools.call('nodmix:core:exec', { command: 'sleep 0.6; echo hi' });"
        "text('after restore: ' + r.text.split('\\n')[0]);"
        "return r.text.split('\\n')[0]"
    )
    outcome = await gateway.turn(driver, session="e2e-12", agent="quick")
    first, *rest = driver.seen
    assert (
        first["status"] == "waiting"
        and first["pendingToolCalls"][0]["toolId"] == "nodmix:core:exec"
    )
    final = rest[-1]
    assert final["status"] == "completed" and final["value"] == "hi"
    assert final["output"] == [
        {"type": "text", "text": "before"},
        {"type": "text", "text": "after restore: hi"},
    ]
    assert json.loads(outcome.result.reply) == ["hi"]
    # 16: the trajectory shows the shell call under the exec call that made it.
    session = gateway.runtime.sessions.open(outcome.session_key)
    doc = export_trajectory(session)
    calls = [c for item in doc["items"] if item["kind"] == "assistant" for c in item["toolCalls"]]
    assert [c["name"] for c in calls] == ["exec"] + ["wait"] * len(rest)
    (nested,) = calls[0]["nested"]
    assert nested["name"] == "exec" and nested["arguments"] == {"command": "sleep 0.6; echo hi"}
    assert nested["id"].startswith(f"{calls[0]['id']}:exec:") and not nested["result"]["isError"]
    # Replay keeps the control calls and their results, and nothing nested.
    names = [
        b.name
        for m in messages_for_model(session.entries)
        for b in m.content
        if isinstance(b, ToolCallBlock)
    ]
    assert names == ["exec"] + ["wait"] * len(rest)


# 15 --------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_plan_15_a_timeout_leaves_no_runtime_state(gateway: Gateway) -> None:
    driver = drive("while (true) {}", "return 'next'")
    await gateway.turn(driver, session="e2e-15-timeout", agent="quick")
    assert [r.get("code", r["status"]) for r in driver.results] == ["timeout", "completed"]
    assert len(gateway.runtime.engine.store) == 0


@pytest.mark.anyio
async def test_plan_15_abort_kills_the_nested_shell_and_keeps_a_valid_transcript(
    gateway: Gateway,
) -> None:
    workspace = gateway.runtime.agent("quick").workspace
    workspace.mkdir(parents=True, exist_ok=True)
    pid_file = workspace / "abort.pid"
    driver = drive(
        "await tools.call('nodmix:core:exec', { command: 'echo $$ > abort.pid; exec sleep 30' })"
    )
    engine = gateway.runtime.engine
    gateway.server.respond = driver
    outcome_holder: list[Any] = []

    async def turn() -> None:
        outcome_holder.append(
            await gateway.runtime.run_turn("go", agent_id="quick", session_key="agent:quick:abort")
        )

    async with anyio.create_task_group() as group:
        group.start_soon(turn)
        await wait_until(lambda: pid_file.exists() and pid_file.read_text().strip() != "", "pid")
        await wait_until(lambda: _waiting_in_wait(engine, driver), "a wait to be in progress")
        group.cancel_scope.cancel()
    pid = int(pid_file.read_text())
    await wait_until(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), "the shell to die")
    assert len(engine.store) == 0 and outcome_holder == []
    session = gateway.runtime.sessions.open("agent:quick:abort")
    messages = messages_for_model(session.entries)
    calls = [b for m in messages for b in m.content if isinstance(b, ToolCallBlock)]
    results = [m for m in messages if isinstance(m, ToolResultMessage)]
    assert [c.id for c in calls] == [r.tool_call_id for r in results]
    assert calls[-1].name == "wait" and results[-1].is_error


@pytest.mark.anyio
async def test_plan_15_snapshot_expiry_drops_the_run_and_cancels_its_call(
    gateway: Gateway,
) -> None:
    workspace = gateway.runtime.agent("quick").workspace
    workspace.mkdir(parents=True, exist_ok=True)
    pid_file = workspace / "expiry.pid"

    class ParkThenStop(Driver):
        def __call__(self, request: ModelRequest) -> ModelReply:
            last = request.messages[-1]
            if isinstance(last, ToolResultMessage):
                self.seen.append(json.loads(last.text))
                return ModelReply.text("I will check back later.")
            return ModelReply.tool_call("exec", self.programs.popleft())

    driver = ParkThenStop(
        deque(
            [
                {
                    "code": "await tools.call('nodmix:core:exec', "
                    "{ command: 'echo $$ > expiry.pid; exec sleep 30' })"
                }
            ]
        )
    )
    await gateway.turn(driver, session="expiry", agent="quick")
    (parked,) = driver.seen
    assert parked["status"] == "waiting"
    engine = gateway.runtime.engine
    # snapshotTtlSeconds is 1 for this agent; the engine's sweeper drops the run.
    await wait_until(lambda: engine.store.get(parked["runId"]) is None, "the run to expire", 5)
    pid = int(pid_file.read_text())
    await wait_until(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), "the shell to die")
    resume = drive()
    resume.programs.clear()

    def wait_on_expired(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            resume.seen.append(json.loads(last.text))
            return ModelReply.text("ok")
        return ModelReply.tool_call("wait", {"runId": parked["runId"]})

    gateway.server.respond = wait_on_expired
    await gateway.runtime.run_turn("resume", agent_id="quick", session_key="agent:quick:expiry")
    assert resume.seen[0]["status"] == "failed" and resume.seen[0]["code"] == "snapshot_expired"


# Done-when behaviours through the real runtime --------------------------------------------------


@pytest.mark.anyio
async def test_misbehaving_programs_fail_as_the_spec_says_through_the_runtime(
    gateway: Gateway,
) -> None:
    driver = drive(
        "const fs = require('fs'); return 1",
        "while (true) {}",
        {
            "code": "interface A { n: number }\nconst a: A = { n: 2 };\nreturn a.n * 21",
            "language": "typescript",
        },
        "ls -la",
        "return 'still fine'",
    )
    await gateway.turn(driver, session="e2e-bad", agent="quick")
    assert [r.get("code", r["status"]) for r in driver.results] == [
        "module_access_denied",
        "timeout",
        "completed",
        "invalid_input",
        "completed",
    ]
    assert driver.results[2]["value"] == 42


@pytest.mark.anyio
async def test_wait_from_another_session_is_refused_through_the_runtime(gateway: Gateway) -> None:
    class ParkOnly(Driver):
        def __call__(self, request: ModelRequest) -> ModelReply:
            last = request.messages[-1]
            if isinstance(last, ToolResultMessage):
                self.seen.append(json.loads(last.text))
                return ModelReply.text("parked")
            return ModelReply.tool_call(
                "exec", {"code": "await yield_control('hold'); return 'mine'"}
            )

    owner = ParkOnly(deque())
    await gateway.turn(owner, session="owner", agent="quick")
    run_id = owner.seen[0]["runId"]
    seen: list[dict[str, Any]] = []

    def thief(request: ModelRequest) -> ModelReply:
        last = request.messages[-1]
        if isinstance(last, ToolResultMessage):
            seen.append(json.loads(last.text))
            return ModelReply.text("done")
        return ModelReply.tool_call("wait", {"runId": run_id})

    gateway.server.respond = thief
    await gateway.runtime.run_turn("steal", agent_id="quick", session_key="agent:quick:thief")
    assert seen[0]["status"] == "failed" and seen[0]["code"] == "invalid_input"
    assert "different session" in seen[0]["error"]
    seen.clear()
    await gateway.runtime.run_turn("resume", agent_id="quick", session_key="agent:quick:owner")
    assert seen[0]["status"] == "completed" and seen[0]["value"] == "mine"


def _waiting_in_wait(engine: Any, driver: Driver) -> bool:
    ids = [s["runId"] for s in driver.seen if s.get("status") == "waiting"]
    return any((run := engine.store.get(i)) is not None and run.resuming for i in ids)


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8")
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


# Last in the module: it may leave a parked run behind in the shared runtime until cleanup.
@pytest.mark.anyio
async def test_plan_15_aborting_a_turn_between_steps_cancels_the_parked_runs_calls(
    gateway: Gateway,
) -> None:
    workspace = gateway.runtime.agent("main").workspace
    pid_file = workspace / "between.pid"
    thinking = anyio.Event()

    async def respond(request: ModelRequest) -> ModelReply:
        if isinstance(request.messages[-1], ToolResultMessage):
            thinking.set()
            await anyio.sleep_forever()  # the model is still streaming when the user aborts
        return ModelReply.tool_call(
            "exec",
            {
                "code": "const p = tools.call('nodmix:core:exec',"
                " { command: 'echo $$ > between.pid; exec sleep 30' });"
                "await yield_control('parked'); return (await p).text"
            },
        )

    gateway.server.respond = respond
    engine = gateway.runtime.engine

    async def turn() -> None:
        await gateway.runtime.run_turn("go", session_key="agent:main:between")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(turn)
            with anyio.fail_after(10):
                await thinking.wait()
            await wait_until(
                lambda: pid_file.exists() and pid_file.read_text().strip() != "", "pid"
            )
            group.cancel_scope.cancel()
        pid = int(pid_file.read_text())
        await wait_until(
            lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), "the shell to die", 2.0
        )
        assert len(engine.store) == 0
    finally:
        from nodmix.codemode.nested import cancel_all

        for run in engine.store.take(lambda run: True):
            cancel_all(run.state)
