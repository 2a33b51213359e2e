"""The agent loop: one user message in, model steps and tool calls until the model stops.

```
append user message ─► ┌ assemble context (engine) ─► model (fallbacks, retries, streaming)
                        │ append assistant message
                        │ no tool calls? ─► done
                        └ run tool calls in parallel ─► append results ─► next step
```

Cancellation (Ctrl-C, a client hanging up) leaves the transcript valid: a partial answer is kept
with `stopReason: "aborted"`, and every tool call that has no result gets an error result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import anyio

from nodmix.agents import AgentProfile
from nodmix.context.base import AssembleParams, ContextEngine, IngestParams
from nodmix.events import (
    AssistantMessageEvent,
    EventSink,
    ToolCallFinished,
    ToolCallStarted,
    TurnFinished,
    TurnStarted,
)
from nodmix.loop.model_call import ModelCall, ModelResolver
from nodmix.loop.prompt import build_system_prompt
from nodmix.messages import (
    AssistantMessage,
    Message,
    TextBlock,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from nodmix.providers.base import ModelRequest, ModelSpec
from nodmix.providers.retry import RetryPolicy
from nodmix.tools.base import Tool, ToolContext, ToolResult, ToolRunner

ABORTED_RESULT = "The turn was cancelled before this tool call finished."


class SessionLike(Protocol):
    """What the loop needs from a session."""

    @property
    def key(self) -> str: ...

    @property
    def session_id(self) -> str: ...

    @property
    def agent_id(self) -> str: ...

    def messages_for_model(self) -> list[Message]:
        """The replayed messages the model should see (repaired, compaction applied)."""
        ...

    def append_message(self, message: Message, *, parent_tool_call_id: str | None = None) -> Any:
        """Append one message to the transcript."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class RunTools:
    """The tools of one run, as the model sees them."""

    visible: Sequence[Tool]
    expected_tool_names: frozenset[str] | None = None
    """Code mode: the provider payload must carry exactly these names."""
    code_mode: bool = False
    context_extra: Mapping[str, Any] = field(default_factory=dict)
    """Extra values every `ToolContext` of the run carries (e.g. the code-mode run scope)."""

    @property
    def by_name(self) -> dict[str, Tool]:
        """Visible tools by model-facing name."""
        return {t.spec.name: t for t in self.visible}


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnDeps:
    """Collaborators of a turn (built by the runtime)."""

    models: ModelResolver
    executor: ToolRunner
    context: ContextEngine
    retry: RetryPolicy | None = None
    clock: Callable[[], datetime] = field(default=lambda: datetime.now().astimezone())


@dataclass(frozen=True, slots=True, kw_only=True)
class TurnRequest:
    """One turn to run."""

    agent: AgentProfile
    session: SessionLike
    prompt: UserMessage
    run_id: str
    tools: RunTools
    model_refs: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class TurnResult:
    """How a turn ended."""

    reply: str
    stop_reason: str
    usage: Usage
    steps: int
    model: str
    last_message: AssistantMessage | None = None
    tool_calls: list[ToolCallBlock] = field(default_factory=list)


async def run_turn(deps: TurnDeps, req: TurnRequest, emit: EventSink) -> TurnResult:
    """Run one turn to completion (or cancellation) and return its outcome."""
    turn = _Turn(deps, req, emit)
    return await turn.run()


class _Turn:
    def __init__(self, deps: TurnDeps, req: TurnRequest, emit: EventSink) -> None:
        self.deps, self.req, self.emit = deps, req, emit
        self.usage = Usage()
        self.steps = 0
        self.last: AssistantMessage | None = None
        self.calls: list[ToolCallBlock] = []
        self.model_call = ModelCall(deps.models, emit, deps.retry)
        self.model_label = req.model_refs[0]
        self.pending_calls: dict[str, ToolCallBlock] = {}

    async def run(self) -> TurnResult:
        req = self.req
        self.emit(
            TurnStarted(
                run_id=req.run_id,
                agent_id=req.agent.id,
                session_key=req.session.key,
                session_id=req.session.session_id,
                model=self.model_label,
            )
        )
        await self._append(req.prompt)
        try:
            stop = await self._steps()
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._finish_aborted()
            raise
        reply = self.last.text if self.last else ""
        self.emit(
            TurnFinished(
                reply=reply,
                stop_reason=stop,
                usage=self.usage,
                steps=self.steps,
                session_id=req.session.session_id,
                model=self.model_label,
            )
        )
        return TurnResult(
            reply=reply,
            stop_reason=stop,
            usage=self.usage,
            steps=self.steps,
            model=self.model_label,
            last_message=self.last,
            tool_calls=self.calls,
        )

    async def _steps(self) -> str:
        while self.steps < self.req.agent.max_steps:
            self.steps += 1
            assistant = await self._model_step()
            if assistant.stop_reason in ("error", "aborted") or not assistant.tool_calls:
                return assistant.stop_reason
            await self._tool_step(assistant.tool_calls)
        return "max_steps"

    async def _model_step(self) -> AssistantMessage:
        req, deps = self.req, self.deps
        tools = req.tools
        assembled = await deps.context.assemble(
            AssembleParams(
                session_id=req.session.session_id,
                session_key=req.session.key,
                messages=req.session.messages_for_model(),
                token_budget=0,
                available_tools=frozenset(t.spec.name for t in tools.visible),
                model=self.model_label,
            )
        )
        specs = [t.spec for t in tools.visible]
        system = build_system_prompt(
            agent_name=req.agent.name,
            workspace=req.agent.workspace,
            tools=specs,
            now=deps.clock(),
            instructions=req.agent.instructions,
            addition=assembled.system_prompt_addition,
            code_mode=tools.code_mode,
        )

        def build(spec: ModelSpec) -> ModelRequest:
            return ModelRequest(
                model=spec,
                system=system,
                messages=list(assembled.messages),
                tools=specs,
                expected_tool_names=tools.expected_tool_names,
            )

        assistant = await self.model_call.run(req.model_refs, build)
        model = self.model_call.model
        if model is not None:
            self.model_label = model.ref
        self.model_call.builder = None
        self.last = assistant
        self.usage = self.usage + assistant.usage
        await self._append(assistant)
        self.emit(AssistantMessageEvent(message=assistant))
        return assistant

    async def _tool_step(self, calls: Sequence[ToolCallBlock]) -> None:
        # Results are appended as each call finishes, so a crash or cancel mid-batch keeps the
        # ones that completed; replay orders them after their assistant message either way.
        self.calls.extend(calls)
        self.pending_calls = {c.id: c for c in calls}

        async def one(call: ToolCallBlock) -> None:
            result = await self._run_call(call)
            self.pending_calls.pop(call.id, None)
            await self._append(result)

        async with anyio.create_task_group() as group:
            for call in calls:
                group.start_soon(one, call)

    async def _run_call(self, call: ToolCallBlock) -> ToolResultMessage:
        req = self.req
        tool = req.tools.by_name.get(call.name)
        started = time.perf_counter()
        tool_id = tool.origin.id if tool else None
        self.emit(
            ToolCallStarted(
                call_id=call.id, tool_name=call.name, arguments=call.arguments, tool_id=tool_id
            )
        )
        if tool is None:
            names = ", ".join(sorted(req.tools.by_name)) or "none"
            result = ToolResult.error(f"Unknown tool {call.name!r}. Available tools: {names}.")
        else:
            ctx = ToolContext(
                agent_id=req.agent.id,
                session_key=req.session.key,
                session_id=req.session.session_id,
                run_id=req.run_id,
                call_id=call.id,
                workspace=req.agent.workspace,
                extra=dict(req.tools.context_extra),
            )
            args = dict(call.arguments)
            input_kind = getattr(tool, "hook_input_kind", None)
            result = await self.deps.executor.run(
                tool,
                args,
                ctx,
                kind=getattr(tool, "hook_kind", "tool"),
                input_kind=input_kind(args) if input_kind else None,
            )
        message = ToolResultMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=result.content,
            details=result.details,
            is_error=result.is_error,
        )
        duration = (time.perf_counter() - started) * 1000
        self.emit(ToolCallFinished(result=message, duration_ms=duration))
        return message

    async def _append(self, message: Message) -> None:
        session = self.req.session
        session.append_message(message)
        await self.deps.context.ingest(
            IngestParams(session_id=session.session_id, session_key=session.key, message=message)
        )

    async def _finish_aborted(self) -> None:
        partial = self.model_call.partial() if self.model_call.builder is not None else None
        if partial is not None:
            aborted = AssistantMessage(
                content=partial.content,
                provider=partial.provider,
                model=partial.model,
                usage=partial.usage,
                stop_reason="aborted",
            )
            self.req.session.append_message(aborted)
            self.last = aborted
            calls = aborted.tool_calls
            self.pending_calls = {c.id: c for c in calls}
        for call in list(self.pending_calls.values()):
            self.req.session.append_message(
                ToolResultMessage(
                    tool_call_id=call.id,
                    tool_name=call.name,
                    content=(TextBlock(text=ABORTED_RESULT),),
                    is_error=True,
                )
            )
        self.pending_calls.clear()
