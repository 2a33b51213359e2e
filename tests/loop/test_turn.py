"""The agent loop, driven by in-process scripted models and real tools and transcripts."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.agents import AgentProfile
from nodmix.config.schema import CompactionConfig
from nodmix.context.legacy import LegacyContextEngine
from nodmix.errors import ProviderAuthError
from nodmix.events import ModelFallback, RunEvent, TextDeltaEvent, ToolCallFinished
from nodmix.hooks import Hooks
from nodmix.loop import RunTools, TurnDeps, TurnRequest, run_turn
from nodmix.messages import (
    AssistantMessage,
    ToolCallBlock,
    ToolResultMessage,
    UserMessage,
    user_message,
)
from nodmix.providers.base import ModelRequest, ModelSpec, Provider
from nodmix.providers.fake import FunctionProvider, ModelError, ModelReply, ReplyToolCall
from nodmix.providers.retry import RetryPolicy
from nodmix.sessions import Session, SessionManager, messages_for_model
from nodmix.tools import FunctionTool, Tool, ToolContext, ToolResult
from nodmix.tools.executor import ToolExecutor


@dataclass(frozen=True)
class Resolved:
    provider: Provider
    spec: ModelSpec


class Resolver:
    def __init__(self, providers: dict[str, Provider]) -> None:
        self.providers = providers

    def resolve(self, ref: str) -> Resolved:
        provider_id, _, model = ref.partition("/")
        return Resolved(self.providers[ref], ModelSpec(provider=provider_id, id=model))


async def _no_sleep(seconds: float) -> None:
    return None


def _agent(workspace: Path, max_steps: int = 10) -> AgentProfile:
    return AgentProfile(
        id="main",
        name="Test",
        model="p/m",
        fallbacks=(),
        workspace=workspace,
        tools=None,
        code_mode=None,
        compaction=CompactionConfig(),
        instructions=None,
        max_steps=max_steps,
    )


def _session(state: Path) -> Session:
    return SessionManager(state).open("agent:main:main")


async def _turn(
    state: Path,
    providers: dict[str, Provider],
    tools: Sequence[Tool] = (),
    *,
    text: str = "hi",
    refs: tuple[str, ...] = ("p/m",),
    max_steps: int = 10,
    session: Session | None = None,
) -> tuple[Any, list[RunEvent], Session]:
    events: list[RunEvent] = []
    session = session or _session(state)
    deps = TurnDeps(
        models=Resolver(providers),
        executor=ToolExecutor(Hooks()),
        context=LegacyContextEngine(),
        retry=RetryPolicy(sleep=_no_sleep),
    )
    request = TurnRequest(
        agent=_agent(state / "ws", max_steps),
        session=session,
        prompt=user_message(text),
        run_id="run",
        tools=RunTools(visible=tuple(tools)),
        model_refs=refs,
    )
    result = await run_turn(deps, request, events.append)
    return result, events, session


def _tool(name: str, fn: Callable[[dict[str, Any]], Any]) -> FunctionTool:
    async def call(args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(str(await fn(args)))

    return FunctionTool.create(call, name=name, description=f"{name} tool")


def _roles(session: Session) -> list[str]:
    return [m.role for m in messages_for_model(session.entries)]


@pytest.mark.anyio
async def test_plain_answer_streams_text_and_is_recorded(isolated_state: Path) -> None:
    provider = FunctionProvider(lambda req: ModelReply.text("Hello there, friend."))
    result, events, session = await _turn(isolated_state, {"p/m": provider})
    assert result.reply == "Hello there, friend." and result.stop_reason == "stop"
    deltas = [e.text for e in events if isinstance(e, TextDeltaEvent)]
    assert len(deltas) > 1 and "".join(deltas) == "Hello there, friend."
    assert _roles(session) == ["user", "assistant"]


@pytest.mark.anyio
async def test_tool_result_is_fed_back_and_transcript_holds_the_round_trip(
    isolated_state: Path,
) -> None:
    async def add(args: dict[str, Any]) -> int:
        return int(args["a"]) + int(args["b"])

    def respond(req: ModelRequest) -> ModelReply:
        results = [m for m in req.messages if isinstance(m, ToolResultMessage)]
        if not results:
            return ModelReply.tool_call("add", {"a": 2, "b": 3})
        return ModelReply.text(f"The sum is {results[-1].text}.")

    provider = FunctionProvider(respond)
    result, _, session = await _turn(isolated_state, {"p/m": provider}, [_tool("add", add)])
    assert result.reply == "The sum is 5."
    assert result.steps == 2
    assert _roles(session) == ["user", "assistant", "toolResult", "assistant"]
    assert [t.name for t in provider.requests[0].tools] == ["add"]
    assert "add" in provider.requests[0].system


@pytest.mark.anyio
async def test_parallel_tool_calls_run_concurrently(isolated_state: Path) -> None:
    both_started = anyio.Event()
    started: list[str] = []

    async def slow(args: dict[str, Any]) -> str:
        started.append(args["id"])
        if len(started) == 2:
            both_started.set()
        with anyio.fail_after(5):
            await both_started.wait()  # deadlocks unless both calls run at the same time
        return args["id"]

    def respond(req: ModelRequest) -> ModelReply:
        if isinstance(req.messages[-1], UserMessage):
            calls = (ReplyToolCall("slow", {"id": "a"}), ReplyToolCall("slow", {"id": "b"}))
            return ModelReply(tool_calls=calls)
        return ModelReply.text("done")

    provider = FunctionProvider(respond)
    result, events, session = await _turn(isolated_state, {"p/m": provider}, [_tool("slow", slow)])
    assert result.reply == "done"
    assert sorted(e.result.text for e in events if isinstance(e, ToolCallFinished)) == ["a", "b"]
    second = provider.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "toolResult", "toolResult"]


@pytest.mark.anyio
async def test_unknown_tool_becomes_an_error_result_the_model_can_read(
    isolated_state: Path,
) -> None:
    def respond(req: ModelRequest) -> ModelReply:
        last = req.messages[-1]
        if isinstance(last, ToolResultMessage):
            return ModelReply.text("sorry: " + last.text)
        return ModelReply.tool_call("nope", {})

    result, _, _ = await _turn(isolated_state, {"p/m": FunctionProvider(respond)})
    assert "Unknown tool 'nope'" in result.reply


@pytest.mark.anyio
async def test_retryable_failure_falls_back_to_next_model(isolated_state: Path) -> None:
    down = FunctionProvider(lambda req: ModelError(503, "overloaded"))
    backup = FunctionProvider(lambda req: ModelReply.text("from backup"))
    result, events, _ = await _turn(
        isolated_state, {"p/m": down, "q/n": backup}, refs=("p/m", "q/n")
    )
    assert result.reply == "from backup" and result.model == "q/n"
    assert len(down.requests) == 4  # retried with backoff before falling back
    assert any(isinstance(e, ModelFallback) for e in events)


@pytest.mark.anyio
async def test_auth_failure_does_not_fall_back(isolated_state: Path) -> None:
    bad = FunctionProvider(lambda req: ModelError(401, "bad key"))
    backup = FunctionProvider(lambda req: ModelReply.text("never"))
    with pytest.raises(ProviderAuthError):
        await _turn(isolated_state, {"p/m": bad, "q/n": backup}, refs=("p/m", "q/n"))
    assert backup.requests == []


@pytest.mark.anyio
async def test_step_cap_stops_a_model_that_never_stops_calling_tools(
    isolated_state: Path,
) -> None:
    async def ping(args: dict[str, Any]) -> str:
        return "pong"

    provider = FunctionProvider(lambda req: ModelReply.tool_call("ping", {}))
    result, _, _ = await _turn(
        isolated_state, {"p/m": provider}, [_tool("ping", ping)], max_steps=3
    )
    assert result.stop_reason == "max_steps" and result.steps == 3
    assert len(provider.requests) == 3


@pytest.mark.anyio
async def test_cancelled_tool_call_leaves_a_valid_transcript(isolated_state: Path) -> None:
    entered = anyio.Event()

    async def hang(args: dict[str, Any]) -> str:
        entered.set()
        await anyio.sleep_forever()
        return "unreachable"

    provider = FunctionProvider(lambda req: ModelReply.tool_call("hang", {}))
    session = _session(isolated_state)
    async with anyio.create_task_group() as group:
        group.start_soon(_turn, isolated_state, {"p/m": provider}, [_tool("hang", hang)])
        with anyio.fail_after(5):
            await entered.wait()
        group.cancel_scope.cancel()
    reloaded = SessionManager(isolated_state).open("agent:main:main")
    messages = messages_for_model(reloaded.entries)
    assert [m.role for m in messages] == ["user", "assistant", "toolResult"]
    assert isinstance(messages[2], ToolResultMessage) and messages[2].is_error
    assert session.session_id == reloaded.session_id


@pytest.mark.anyio
async def test_cancel_while_streaming_keeps_partial_answer_marked_aborted(
    isolated_state: Path,
) -> None:
    release = anyio.Event()
    got_text = anyio.Event()

    async def respond(req: ModelRequest) -> ModelReply:
        return ModelReply.text("partial words streaming out slowly")

    provider = FunctionProvider(respond)
    events: list[RunEvent] = []

    async def run() -> None:
        session = _session(isolated_state)
        deps = TurnDeps(
            models=Resolver({"p/m": provider}),
            executor=ToolExecutor(Hooks()),
            context=LegacyContextEngine(),
        )
        request = TurnRequest(
            agent=_agent(isolated_state / "ws"),
            session=session,
            prompt=user_message("hi"),
            run_id="r",
            tools=RunTools(visible=()),
            model_refs=("p/m",),
        )

        def sink(event: RunEvent) -> None:
            events.append(event)
            if isinstance(event, TextDeltaEvent):
                got_text.set()

        await run_turn(deps, request, sink)
        release.set()

    async with anyio.create_task_group() as group:
        group.start_soon(run)
        with anyio.fail_after(5):
            await got_text.wait()
        group.cancel_scope.cancel()
    assert not release.is_set()
    entries = SessionManager(isolated_state).open("agent:main:main").entries
    messages = messages_for_model(entries)
    assert [m.role for m in messages] == ["user", "assistant"]
    last = messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "aborted"
    assert last.text and "partial".startswith(last.text[:7])


@pytest.mark.anyio
async def test_second_turn_sends_first_turn_history(isolated_state: Path) -> None:
    provider = FunctionProvider(lambda req: ModelReply.text(f"seen {len(req.messages)}"))
    _, _, session = await _turn(isolated_state, {"p/m": provider}, text="first")
    result, _, _ = await _turn(isolated_state, {"p/m": provider}, text="second", session=session)
    assert result.reply == "seen 3"
    sent = provider.requests[1].messages
    assert isinstance(sent[0], UserMessage) and sent[0].text == "first"
    assert isinstance(sent[2], UserMessage) and sent[2].text == "second"


def test_tool_call_block_round_trips_in_transcripts() -> None:
    call = ToolCallBlock(id="c1", name="read", arguments={"path": "x"})
    assert call.arguments == {"path": "x"}
