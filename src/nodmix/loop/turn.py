"""The agent loop: one user message in, model steps and tool calls until the model stops.

```
append user message ─► ┌ assemble context (engine) ─► guard: fits? ─► model (fallbacks, retries)
                        │     ▲        compact ◄─ no ┘    context overflow ─► compact, retry
                        │ append assistant message
                        │ no tool calls? ─► done
                        └ run tool calls in parallel ─► append results ─► next step
```

The context guard (`nodmix.context.guard`) keeps every request inside the model's window: it
trims old tool results, asks for compaction before a request that would not leave the reserved
headroom (at most once per step), and the loop compacts and retries when the provider still
answers with a context-overflow error (at most `MAX_OVERFLOW_COMPACTIONS` times per turn).

Cancellation (Ctrl-C, a client hanging up) leaves the transcript valid: a partial answer is kept
with `stopReason: "aborted"`, and every tool call that has no result gets an error result.
A turn that fails (every model failed, or the agent's `timeoutSeconds` ran out) also leaves an
assistant entry with `stopReason: "error"` and the error line, so history shows what happened;
replay drops it when it has no content, so the next request stays valid for every provider.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import anyio
import msgspec

from nodmix.agents import AgentProfile
from nodmix.context.base import (
    AfterTurnParams,
    AssembleParams,
    ContextEngine,
    IngestBatchParams,
    IngestParams,
)
from nodmix.context.guard import ContextGuard, RequestDraft
from nodmix.context.overflow import recover_from_overflow
from nodmix.errors import ContextOverflowError, NodmixError, TurnError
from nodmix.events import (
    AssistantMessageEvent,
    EventSink,
    ToolCallFinished,
    ToolCallStarted,
    ToolProgress,
    TurnFinished,
    TurnStarted,
)
from nodmix.loop.endings import record_abort, record_failure
from nodmix.loop.model_call import (
    MediaView,
    ModelCall,
    ModelResolver,
    ReplyLimits,
    request_builder,
)
from nodmix.loop.prompt import build_system_prompt
from nodmix.loop.window import ensure_prompt_fits
from nodmix.messages import (
    AssistantMessage,
    Message,
    ToolCallBlock,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from nodmix.origin import TurnOrigin, sees_owner_memory
from nodmix.providers.retry import RetryPolicy
from nodmix.tools.base import PROGRESS, Tool, ToolContext, ToolResult, ToolRunner
from nodmix.tools.deferred import partition_deferred

TERMINAL_STOPS = frozenset({"error", "aborted", "length", "content_filter", "refusal"})
"""Stop reasons that end the turn even when the reply carries tool calls."""

log = logging.getLogger("nodmix.loop")


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


class RunTools(msgspec.Struct, frozen=True, kw_only=True):
    """The tools of one run, as the model sees them."""

    visible: Sequence[Tool]
    expected_tool_names: frozenset[str] | None = None
    """Code mode: the provider payload must carry exactly these names."""
    code_mode: bool = False
    context_extra: Mapping[str, Any] = msgspec.field(default_factory=dict)
    """Extra values every `ToolContext` of the run carries (e.g. the code-mode run scope)."""
    tool_choice: str | None = None
    """For the turn's first model call: `required`, a tool name, or `None` (the model picks)."""
    held: Callable[[], Sequence[ToolCallBlock]] | None = None
    """Client tool calls the run's code-mode programs are waiting for (code mode)."""
    on_result: Callable[[str], None] | None = None
    """Told the call id of each tool result once it is in the transcript (code mode: a run
    that `wait` resumed need not survive a restart any more)."""

    @property
    def by_name(self) -> dict[str, Tool]:
        """Visible tools by model-facing name."""
        return {t.spec.name: t for t in self.visible}


class TurnDeps(msgspec.Struct, frozen=True, kw_only=True):
    """Collaborators of a turn (built by the runtime)."""

    models: ModelResolver
    executor: ToolRunner
    context: ContextEngine
    retry: RetryPolicy | None = None
    clock: Callable[[], datetime] = msgspec.field(default=lambda: datetime.now().astimezone())
    guard: ContextGuard | None = None
    """Keeps requests inside the context window; without one, nothing is trimmed or compacted."""
    media: MediaView | None = None
    """Gives each model the request's images in the form it takes; without one, image
    references reach the provider as one-line notes."""


class TurnRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One turn to run."""

    agent: AgentProfile
    session: SessionLike
    prompt: UserMessage | None
    """`None` continues the session after client tool results (`resume`) instead."""
    run_id: str
    tools: RunTools
    model_refs: tuple[str, ...]
    origin: TurnOrigin | None = None
    """The chat the turn answers (channel turns); tools see it in their context."""
    skills_prompt: str | None = None
    """The skills section of the system prompt (one line per offered skill)."""
    resume: Sequence[ToolResultMessage] = ()
    """Results of client tool calls, appended before the first model step."""
    seed: Callable[[], Awaitable[None]] | None = None
    """Records what the turn brings along before its prompt (an API client's earlier
    conversation); runs only once the prompt is known to fit the window, so a refused turn
    records nothing."""


class TurnResult(msgspec.Struct, kw_only=True):
    """How a turn ended."""

    reply: str
    stop_reason: str
    usage: Usage
    steps: int
    model: str
    last_message: AssistantMessage | None = None
    tool_calls: list[ToolCallBlock] = msgspec.field(default_factory=list)
    client_calls: list[ToolCallBlock] = msgspec.field(default_factory=list)
    """Calls of client tools the turn stopped for (`stop_reason` `tool_calls`): the client
    runs them and continues the turn with their results."""


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
        agent = req.agent
        waits = agent.model_timeouts
        self.limits = ReplyLimits(
            max_tokens=agent.max_tokens,
            max_output_bytes=agent.max_output_bytes,
            connect_timeout=waits.connect_seconds if waits else None,
            idle_timeout=waits.idle_seconds if waits else None,
        )
        self.model_label = req.model_refs[0]
        self.pending_calls: dict[str, ToolCallBlock] = {}
        self.client_calls: list[ToolCallBlock] = []
        self.added: list[Message] = []
        self.overflow_compactions = 0
        # An engine with `ingest_batch` receives the turn's messages at once, at the end.
        self.batch_ingest = getattr(deps.context, "ingest_batch", None)

    async def run(self) -> TurnResult:
        req, guard = self.req, self.deps.guard
        if guard is not None and req.prompt is not None:
            # Refused before anything is recorded or sent, compaction included.
            ensure_prompt_fits(
                req.prompt,
                context_window=guard.context_window,
                tools=[t.spec for t in req.tools.visible],
                model=self.model_label,
                system=lambda: self._system_prompt(None),
            )
            # The transcript byte guard may move the session to a successor transcript.
            await guard.before_turn()
        if req.seed is not None:
            await req.seed()
        self.emit(
            TurnStarted(
                run_id=req.run_id,
                agent_id=req.agent.id,
                session_key=req.session.key,
                session_id=req.session.session_id,
                model=self.model_label,
            )
        )
        for message in [req.prompt] if req.prompt is not None else req.resume:
            await self._append(message)
        timeout = req.agent.timeout_seconds
        try:
            with anyio.move_on_after(timeout) as deadline:
                try:
                    stop = await self._steps()
                except anyio.get_cancelled_exc_class():
                    with anyio.CancelScope(shield=True):
                        await self._finish_aborted()
                    raise
            if deadline.cancelled_caught:
                raise TurnError(
                    f"the turn did not finish within {timeout} s (agents.defaults.timeoutSeconds"
                    " or the agent's timeoutSeconds)"
                )
        except NodmixError as exc:
            self._finish_failed(exc)
            raise
        await self._engine_after_turn()
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
            client_calls=self.client_calls,
        )

    async def _steps(self) -> str:
        while self.steps < self.req.agent.max_steps:
            self.steps += 1
            assistant = await self._model_step()
            if assistant.stop_reason in TERMINAL_STOPS or not assistant.tool_calls:
                return assistant.stop_reason
            by_name = self.req.tools.by_name
            ours, theirs = partition_deferred(assistant.tool_calls, by_name)
            if ours:
                await self._tool_step(ours)
            held = self.req.tools.held
            self.client_calls = [*theirs, *(held() if held is not None else ())]
            if self.client_calls:
                self.calls.extend(theirs)
                return "tool_calls"
        return "max_steps"

    async def _model_step(self) -> AssistantMessage:
        req, deps, guard = self.req, self.deps, self.deps.guard
        tools = req.tools
        specs = [t.spec for t in tools.visible]
        may_compact = True
        while True:
            history = req.session.messages_for_model()
            assembled = await deps.context.assemble(
                AssembleParams(
                    session_id=req.session.session_id,
                    session_key=req.session.key,
                    messages=history,
                    token_budget=guard.token_budget if guard is not None else 0,
                    available_tools=frozenset(t.spec.name for t in tools.visible),
                    model=self.model_label,
                )
            )
            system = self._system_prompt(assembled.system_prompt_addition)
            messages = assembled.messages
            if guard is not None:
                draft = RequestDraft(
                    assembled=assembled, unwindowed=history, system=system, tools=specs
                )
                plan = await guard.review(draft, may_compact=may_compact)
                if plan.compact and may_compact:
                    # One precheck compaction per step; if the request still does not fit,
                    # the next review trims harder and the provider has the final word.
                    may_compact = False
                    await guard.compact("auto", attempt=0)
                    continue
                messages = plan.messages
            for_model = None
            if deps.media is not None:
                for_model = await deps.media.prepare(
                    messages, agent_id=req.agent.id, workspace=req.agent.workspace
                )
            try:
                build = request_builder(
                    system,
                    messages,
                    specs,
                    tools.expected_tool_names,
                    self.limits,
                    tool_choice=tools.tool_choice if self.steps == 1 else None,
                    for_model=for_model,
                )
                assistant = await self.model_call.run(req.model_refs, build)
            except ContextOverflowError as exc:
                if guard is None:
                    raise
                self.overflow_compactions = await recover_from_overflow(
                    guard, exc, self.overflow_compactions
                )
                may_compact = False
                continue
            break
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
                extra={
                    **req.tools.context_extra,
                    PROGRESS: lambda text: self.emit(
                        ToolProgress(call_id=call.id, tool_name=call.name, text=text)
                    ),
                },
                origin=req.origin,
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

    def _system_prompt(self, addition: str | None) -> str:
        """The system prompt of a model step (`addition`: the context engine's)."""
        req, tools = self.req, self.req.tools
        return build_system_prompt(
            agent_name=req.agent.name,
            workspace=req.agent.workspace,
            tools=[t.spec for t in tools.visible],
            now=self.deps.clock(),
            instructions=req.agent.instructions,
            addition=addition,
            code_mode=tools.code_mode,
            skills=req.skills_prompt,
            memory=sees_owner_memory(req.origin, req.agent.id, req.session.key),
        )

    async def _append(self, message: Message) -> None:
        session = self.req.session
        session.append_message(message)
        on_result = self.req.tools.on_result
        if on_result is not None and isinstance(message, ToolResultMessage):
            on_result(message.tool_call_id)
        self.added.append(message)
        if self.batch_ingest is None:
            await self.deps.context.ingest(
                IngestParams(
                    session_id=session.session_id, session_key=session.key, message=message
                )
            )

    async def _engine_after_turn(self) -> None:
        """The engine's optional end-of-turn members; their failures never undo the turn."""
        session, engine = self.req.session, self.deps.context
        after_turn = getattr(engine, "after_turn", None)
        added = tuple(self.added)
        ids = {"session_id": session.session_id, "session_key": session.key}
        try:
            if self.batch_ingest is not None:
                await self.batch_ingest(IngestBatchParams(**ids, messages=added))
            if after_turn is not None:
                await after_turn(AfterTurnParams(**ids, messages=added))
        except Exception:
            log.exception("context engine %s failed after the turn", engine.info.id)

    def _finish_failed(self, error: Exception) -> None:
        self.pending_calls = record_failure(
            self.req.session, self.model_call, self.pending_calls, error
        )

    async def _finish_aborted(self) -> None:
        aborted = record_abort(self.req.session, self.model_call, self.pending_calls)
        self.last = aborted or self.last
        self.pending_calls = {}
