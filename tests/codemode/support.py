"""Helpers for the code-mode tests.

Everything here drives the real parts: the QuickJS-WASI sandbox, the real `CodeModeEngine`,
`build_run_tools` (the same code path `Runtime.run_turn` uses to build a run's surface), the real
`ToolExecutor` with real hooks, and real transcripts. Nothing is mocked; test tools are plain
`FunctionTool`s whose behaviour the test controls (events instead of sleeps).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.agents import AgentProfile
from nodmix.codemode import CodeModeEngine, ExecTool, WaitTool
from nodmix.codemode.mcp_namespace import MCPAccess
from nodmix.codemode.namespaces import NamespaceRegistration
from nodmix.codemode.results import model_view
from nodmix.config.schema import AgentToolsConfig, CodeModeConfig, CompactionConfig, ToolsConfig
from nodmix.context.legacy import LegacyContextEngine
from nodmix.events import RunEvent, ToolCallFinished, ToolCallStarted
from nodmix.hooks import BeforeToolCallHook, Hooks, Registered, ToolCallInfo
from nodmix.loop import RunTools, TurnDeps, TurnRequest, TurnResult, run_turn
from nodmix.messages import user_message
from nodmix.origin import TurnOrigin
from nodmix.providers.base import ModelSpec, Provider
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime.toolset import ToolProvider, ToolsetInputs, build_run_tools
from nodmix.sessions import Session, SessionManager
from nodmix.tools import FunctionTool, Tool, ToolContext, ToolResult
from nodmix.tools.base import ToolSource
from nodmix.tools.executor import ToolExecutor

DEADLINE_S = 10.0
Result = dict[str, Any]
ToolBody = Callable[[dict[str, Any], ToolContext], Awaitable[ToolResult]]


def make_tool(
    name: str,
    body: ToolBody,
    *,
    description: str | None = None,
    parameters: dict[str, Any] | None = None,
    owner: str = "core",
    source: ToolSource = "nodmix",
    label: str | None = None,
) -> FunctionTool:
    """A test tool with an explicit origin (`core` owner, a plugin id, or a client owner)."""
    return FunctionTool.create(
        body,
        name=name,
        description=description or f"The {name} test tool.",
        parameters=parameters,
        owner=owner,
        source=source,
        label=label,
    )


def text_tool(name: str, text: str = "ok", **kwargs: Any) -> FunctionTool:
    """A tool that answers `text` and echoes its input in `details`."""

    async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(text, details={"tool": name, "args": args})

    return make_tool(name, body, **kwargs)


@dataclass
class Gate:
    """A tool whose calls block until the test releases them; records starts and cancels."""

    name: str = "slow"
    owner: str = "core"
    started: list[dict[str, Any]] = field(default_factory=list)
    cancelled: int = 0
    finished: int = 0
    release: anyio.Event = field(default_factory=anyio.Event)
    entered: anyio.Event = field(default_factory=anyio.Event)

    @property
    def tool(self) -> FunctionTool:
        async def body(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
            self.started.append(args)
            self.entered.set()
            try:
                await self.release.wait()
            except BaseException:
                self.cancelled += 1
                raise
            self.finished += 1
            return ToolResult.text(f"released {args.get('tag', '')}".strip(), details=args)

        return make_tool(
            self.name,
            body,
            owner=self.owner,
            description="Blocks until released (test tool).",
            parameters={"type": "object", "properties": {"tag": {"type": "string"}}},
        )


def profile(
    workspace: Path,
    *,
    code_mode: bool | CodeModeConfig | None = True,
    tools: AgentToolsConfig | None = None,
    agent_id: str = "main",
) -> AgentProfile:
    """An agent profile with the given (already merged) code-mode setting."""
    return AgentProfile(
        id=agent_id,
        name=agent_id,
        model="local/scripted",
        fallbacks=(),
        workspace=workspace,
        tools=tools,
        code_mode=code_mode,
        compaction=CompactionConfig(),
        instructions=None,
    )


def code_mode(**fields: Any) -> CodeModeConfig:
    """`tools.codeMode: {enabled: true, ...}` with snake_case field names."""
    return CodeModeConfig(enabled=True, **fields)


class StaticTools:
    """A `ToolProvider` (plugin, MCP or client source) with a fixed tool list."""

    def __init__(self, tools: Sequence[Tool]) -> None:
        self._tools = list(tools)

    async def list_tools(self) -> Sequence[Tool]:
        return self._tools


@dataclass
class Harness:
    """One agent turn's code-mode surface, built by `build_run_tools` and driven directly.

    `exec`/`wait` go through the `ToolExecutor` exactly like the agent loop runs them (hooks see
    `code_mode_exec` / `code_mode_wait`), and return the structured result (`details`).
    """

    engine: CodeModeEngine
    tools: RunTools
    session: Session
    executor: ToolExecutor
    hooks: Hooks
    events: list[RunEvent]
    agent: AgentProfile
    run_id: str
    _calls: int = 0

    @property
    def visible_names(self) -> list[str]:
        return [t.spec.name for t in self.tools.visible]

    @property
    def exec_tool(self) -> ExecTool:
        tool = self.tools.by_name["exec"]
        assert isinstance(tool, ExecTool)
        return tool

    @property
    def wait_tool(self) -> WaitTool:
        tool = self.tools.by_name["wait"]
        assert isinstance(tool, WaitTool)
        return tool

    def ctx(self, call_id: str) -> ToolContext:
        return ToolContext(
            agent_id=self.agent.id,
            session_key=self.session.key,
            session_id=self.session.session_id,
            run_id=self.run_id,
            call_id=call_id,
            workspace=self.agent.workspace,
        )

    def next_call_id(self) -> str:
        self._calls += 1
        return f"call_{self._calls}"

    async def exec(
        self, code: str, *, language: str | None = None, call_id: str | None = None, **extra: Any
    ) -> Result:
        args: dict[str, Any] = {"code": code, **extra}
        if language is not None:
            args["language"] = language
        return await self.exec_args(args, call_id=call_id)

    def recorded(self, call_id: str) -> None:
        """What the agent loop does once a result is in the transcript: tell the engine."""
        if self.tools.on_result is not None:
            self.tools.on_result(call_id)

    async def exec_args(self, args: dict[str, Any], *, call_id: str | None = None) -> Result:
        tool = self.exec_tool
        call_id = call_id or self.next_call_id()
        result = await self.executor.run(
            tool,
            args,
            self.ctx(call_id),
            kind="code_mode_exec",
            input_kind=tool.hook_input_kind(args),
        )
        self.recorded(call_id)
        assert isinstance(result.details, dict), result
        # The model reads the compact projection of the same result: no telemetry, no spaces.
        view = model_view(result.details)
        assert "telemetry" not in view
        assert result.text_content == json.dumps(view, ensure_ascii=False, separators=(",", ":"))
        return result.details

    async def wait(self, run_id: Any, *, call_id: str | None = None) -> Result:
        call_id = call_id or self.next_call_id()
        result = await self.executor.run(
            self.wait_tool,
            {"runId": run_id},
            self.ctx(call_id),
            kind="code_mode_wait",
        )
        self.recorded(call_id)
        assert isinstance(result.details, dict), result
        return result.details

    async def run_to_end(self, code: str, *, language: str | None = None) -> list[Result]:
        """`exec`, then `wait` while the result is `waiting`; every result in order."""
        results = [await self.exec(code, language=language)]
        with anyio.fail_after(DEADLINE_S):
            while results[-1]["status"] == "waiting":
                results.append(await self.wait(results[-1]["runId"]))
        return results

    async def value(self, code: str, *, language: str | None = None) -> Any:
        """Run `code` to completion and return its value (fails the test otherwise)."""
        last = (await self.run_to_end(code, language=language))[-1]
        assert last["status"] == "completed", last
        return last["value"]

    def started(self) -> list[ToolCallStarted]:
        return [e for e in self.events if isinstance(e, ToolCallStarted)]

    def finished(self) -> list[ToolCallFinished]:
        return [e for e in self.events if isinstance(e, ToolCallFinished)]


async def build_harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    *,
    code_mode_config: bool | CodeModeConfig | None = True,
    tools_config: ToolsConfig | None = None,
    agent_tools: AgentToolsConfig | None = None,
    extra_tools: Sequence[Tool] = (),
    sources: Sequence[ToolProvider] = (),
    namespaces: Sequence[tuple[str, NamespaceRegistration]] = (),
    plugin_configs: Mapping[str, Mapping[str, Any]] | None = None,
    before_hooks: Sequence[tuple[str, BeforeToolCallHook]] = (),
    hooks: Hooks | None = None,
    mcp: MCPAccess | None = None,
    agent_id: str = "main",
    session_key: str | None = None,
    run_id: str = "run_test",
    disable_tools: bool = False,
    origin: TurnOrigin | None = None,
) -> Harness:
    """Build a run's tools the way `Runtime.run_turn` does, with real executor and session."""
    hooks = hooks if hooks is not None else Hooks()
    for owner, hook in before_hooks:
        hooks.before_tool_call.append(Registered(owner, hook))
    executor = ToolExecutor(hooks)
    agent = profile(workspace, code_mode=code_mode_config, tools=agent_tools, agent_id=agent_id)
    workspace.mkdir(parents=True, exist_ok=True)
    session = sessions.open(session_key or f"agent:{agent_id}:main", workspace=workspace)
    events: list[RunEvent] = []
    tools = await build_run_tools(
        ToolsetInputs(
            tools_config=tools_config or ToolsConfig(),
            agent=agent,
            session=session,
            run_id=run_id,
            emit=events.append,
            executor=executor,
            engine=lambda: engine,
            sources=sources,
            extra_tools=extra_tools,
            namespaces=namespaces,
            plugin_configs=plugin_configs or {},
            mcp=mcp,
            disable_tools=disable_tools,
            origin=origin,
        )
    )
    return Harness(
        engine=engine,
        tools=tools,
        session=session,
        executor=executor,
        hooks=hooks,
        events=events,
        agent=agent,
        run_id=run_id,
    )


def recording_hook(seen: list[ToolCallInfo]) -> BeforeToolCallHook:
    """A `before_tool_call` hook that only records what it saw."""

    async def hook(info: ToolCallInfo) -> None:
        seen.append(info)

    return hook


async def wait_until(check: Callable[[], bool], what: str, timeout: float = DEADLINE_S) -> None:
    """Poll `check` on the event loop until it holds (no fixed sleeps)."""
    with anyio.move_on_after(timeout):
        while not check():
            await anyio.sleep(0.005)
        return
    pytest.fail(f"timed out after {timeout} s waiting for {what}")


def transcript_lines(session: Session) -> list[dict[str, Any]]:
    """The session's JSONL file, decoded (what is persisted, not the in-memory view)."""
    path = session.transcript.path
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@dataclass(frozen=True)
class Resolved:
    provider: Provider
    spec: ModelSpec


class Resolver:
    """Resolves every model ref to one provider (a `FunctionProvider` or a real adapter)."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider

    def resolve(self, ref: str) -> Resolved:
        provider_id, _, model = ref.partition("/")
        return Resolved(self.provider, ModelSpec(provider=provider_id, id=model))


async def run_model_turn(harness: Harness, provider: Provider, text: str = "go") -> TurnResult:
    """One agent turn over the harness's tools and session, through the real loop."""
    deps = TurnDeps(
        models=Resolver(provider),
        executor=harness.executor,
        context=LegacyContextEngine(),
        retry=RetryPolicy(sleep=_no_sleep),
    )
    agent = harness.agent
    request = TurnRequest(
        agent=agent,
        session=harness.session,
        prompt=user_message(text),
        run_id=harness.run_id,
        tools=harness.tools,
        model_refs=("local/scripted",),
    )
    return await run_turn(deps, request, harness.events.append)


async def _no_sleep(seconds: float) -> None:
    return None


async def harness_with(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    *tools: Tool,
    **code_mode_fields: Any,
) -> Harness:
    """A harness with `tools` added and code mode configured by `code_mode_fields`."""
    return await build_harness(
        engine,
        sessions,
        workspace,
        extra_tools=list(tools),
        code_mode_config=code_mode(**code_mode_fields),
    )


async def gated_harness(
    engine: CodeModeEngine,
    sessions: SessionManager,
    workspace: Path,
    *more_tools: Tool,
    **code_mode_fields: Any,
) -> tuple[Gate, Harness]:
    """A harness whose `slow` tool waits on a fresh `Gate` (plus `more_tools`), with code mode
    configured by `code_mode_fields`."""
    gate = Gate()
    harness = await harness_with(
        engine, sessions, workspace, gate.tool, *more_tools, **code_mode_fields
    )
    return gate, harness
