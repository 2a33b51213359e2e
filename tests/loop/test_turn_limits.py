"""Turns against stalled, failing, filtered and long-winded models: bounded and recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from nodmix.agents import AgentProfile
from nodmix.config.schema import CompactionConfig, ModelTimeouts
from nodmix.context.legacy import LegacyContextEngine
from nodmix.errors import ProviderAuthError, ProviderTimeoutError, TurnError
from nodmix.events import Notice, RunEvent
from nodmix.hooks import Hooks
from nodmix.loop import RunTools, TurnDeps, TurnRequest, TurnResult, run_turn
from nodmix.messages import AssistantMessage, UserMessage, user_message
from nodmix.providers.base import ModelRequest, ModelSpec, Provider
from nodmix.providers.fake import FunctionProvider, ModelError, ModelReply, ModelStall, Respond
from nodmix.providers.limits import CallLimits
from nodmix.providers.openai import OpenAIProvider
from nodmix.providers.retry import RetryPolicy
from nodmix.sessions import Session, SessionManager, messages_for_model
from nodmix.testing.model_server import ScriptedModelServer
from nodmix.testing.scripts import huge, stalls
from nodmix.tools.executor import ToolExecutor

pytestmark = pytest.mark.anyio

MARGIN = 5.0
"""How far past its timeout a stalled turn may end (a loaded 2-core machine)."""


@dataclass(frozen=True)
class Resolved:
    provider: Provider
    spec: ModelSpec


class Resolver:
    def __init__(self, provider: Provider, max_tokens: int = 4096) -> None:
        self.provider = provider
        self.max_tokens = max_tokens

    def resolve(self, ref: str) -> Resolved:
        provider_id, _, model = ref.partition("/")
        spec = ModelSpec(provider=provider_id, id=model, max_tokens=self.max_tokens)
        return Resolved(self.provider, spec)


async def _no_sleep(seconds: float) -> None:
    return None


def _agent(workspace: Path, **limits: Any) -> AgentProfile:
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
        **limits,
    )


def _session(state: Path) -> Session:
    return SessionManager(state).open("agent:main:main")


async def _turn(
    state: Path,
    provider: Provider,
    *,
    text: str = "hi",
    session: Session | None = None,
    events: list[RunEvent] | None = None,
    model_max_tokens: int = 4096,
    **limits: Any,
) -> TurnResult:
    deps = TurnDeps(
        models=Resolver(provider, model_max_tokens),
        executor=ToolExecutor(Hooks()),
        context=LegacyContextEngine(),
        retry=RetryPolicy(attempts=1, sleep=_no_sleep),
    )
    request = TurnRequest(
        agent=_agent(state / "ws", **limits),
        session=session or _session(state),
        prompt=user_message(text),
        run_id="run",
        tools=RunTools(visible=()),
        model_refs=("p/m",),
    )
    sink = events if events is not None else []
    return await run_turn(deps, request, sink.append)


@asynccontextmanager
async def _served(respond: Respond, idle: float = 300) -> AsyncIterator[OpenAIProvider]:
    async with ScriptedModelServer(respond) as server:
        provider = OpenAIProvider(
            name="p", base_url=server.base_url, limits=CallLimits(idle_seconds=idle)
        )
        async with provider:
            yield provider


def _assistants(session: Session) -> list[AssistantMessage]:
    return [
        entry.message
        for entry in session.entries
        if isinstance(getattr(entry, "message", None), AssistantMessage)
    ]


@pytest.mark.parametrize("script", [stalls.hang, stalls.trickle])
async def test_a_stalled_model_ends_the_turn_within_the_idle_timeout(
    isolated_state: Path, script: Respond
) -> None:
    idle = 0.5
    session = _session(isolated_state)
    async with _served(script, idle=idle) as provider:
        with anyio.fail_after(idle + MARGIN), pytest.raises(ProviderTimeoutError) as info:
            await _turn(isolated_state, provider, session=session)
    assert "p/m did not respond within 0.5 s (idle timeout" in str(info.value)
    failed = _assistants(session)[-1]
    assert failed.stop_reason == "error" and failed.error_message == str(info.value)


@pytest.mark.parametrize("script", [stalls.hang, stalls.trickle])
async def test_the_agents_model_timeouts_override_the_providers(
    isolated_state: Path, script: Respond
) -> None:
    async with _served(script, idle=300) as provider:
        with anyio.fail_after(0.5 + MARGIN), pytest.raises(ProviderTimeoutError):
            await _turn(isolated_state, provider, model_timeouts=ModelTimeouts(idle_seconds=0.5))


async def test_the_whole_turn_timeout_ends_a_model_that_streams_but_never_finishes(
    isolated_state: Path,
) -> None:
    provider = FunctionProvider(lambda request: ModelStall(partial="half an ans"))
    session = _session(isolated_state)
    with anyio.fail_after(1 + MARGIN), pytest.raises(TurnError) as info:
        await _turn(isolated_state, provider, session=session, timeout_seconds=1)
    assert str(info.value).startswith("the turn did not finish within 1 s")
    aborted, failed = _assistants(session)[-2:]
    assert aborted.stop_reason == "aborted" and aborted.text == "half an ans"
    assert failed.stop_reason == "error" and failed.content == ()
    assert failed.error_message == str(info.value)


async def test_a_failed_turn_leaves_an_error_entry_and_the_next_turn_is_valid(
    isolated_state: Path,
) -> None:
    session = _session(isolated_state)
    failing = FunctionProvider(lambda request: ModelError(401, "bad key"))
    with pytest.raises(ProviderAuthError):
        await _turn(isolated_state, failing, text="first", session=session)
    failed = _assistants(session)[-1]
    assert failed.stop_reason == "error"
    assert failed.error_message == "scripted: 401 unauthorized: bad key"
    # Replay leaves the empty error entry out: no provider accepts an empty assistant turn.
    assert [m.role for m in messages_for_model(session.entries)] == ["user"]

    working = FunctionProvider(lambda request: ModelReply.text("hello again"))
    result = await _turn(isolated_state, working, text="second", session=session)
    assert result.reply == "hello again"
    sent = working.requests[0].messages
    assert [m.role for m in sent] == ["user", "user"]
    assert [m.text for m in sent if isinstance(m, UserMessage)] == ["first", "second"]


async def test_a_failure_after_partial_text_keeps_the_text_in_the_error_entry(
    isolated_state: Path,
) -> None:
    session = _session(isolated_state)
    provider = FunctionProvider(lambda request: ModelError(500, "boom", partial="so far"))
    with pytest.raises(Exception, match="boom"):
        await _turn(isolated_state, provider, session=session)
    failed = _assistants(session)[-1]
    assert failed.stop_reason == "error" and failed.text == "so far"
    assert [m.role for m in messages_for_model(session.entries)] == ["user", "assistant"]


@pytest.mark.parametrize("stop", ["content_filter", "refusal"])
async def test_a_filtered_or_refused_reply_says_so(isolated_state: Path, stop: Any) -> None:
    provider = FunctionProvider(lambda request: ModelReply(content="I can't", stop_reason=stop))
    events: list[RunEvent] = []
    result = await _turn(isolated_state, provider, events=events)
    assert result.stop_reason == stop
    notices = [e.text for e in events if isinstance(e, Notice)]
    expected = "content filter" if stop == "content_filter" else "refused to answer"
    assert len(notices) == 1 and expected in notices[0]


async def test_a_huge_reply_is_kept_truncated_with_a_note(isolated_state: Path) -> None:
    session = _session(isolated_state)
    events: list[RunEvent] = []
    cap = 200_000
    async with _served(huge.respond) as provider:
        result = await _turn(
            isolated_state,
            provider,
            text="2",
            session=session,
            events=events,
            max_output_bytes=cap,
        )
    assert result.stop_reason == "length"
    assert result.reply == huge.huge_text(cap)
    note = f"the reply was cut off at {cap} bytes (maxOutputBytes); what arrived was kept"
    assert [e.text for e in events if isinstance(e, Notice)] == [note]
    assert _assistants(session)[-1].error_message == note


async def test_max_tokens_comes_from_the_agent_else_the_model(isolated_state: Path) -> None:
    seen: list[ModelRequest] = []

    def respond(request: ModelRequest) -> ModelReply:
        seen.append(request)
        return ModelReply.text("ok")

    async with ScriptedModelServer(respond) as server:
        async with OpenAIProvider(name="p", base_url=server.base_url) as provider:
            await _turn(isolated_state, provider, model_max_tokens=777)
            await _turn(isolated_state, provider, model_max_tokens=777, max_tokens=55)
        bodies = [r.body for r in server.requests]
    assert [b["max_tokens"] for b in bodies] == [777, 55]
    assert [r.max_tokens for r in seen] == [777, 55]
