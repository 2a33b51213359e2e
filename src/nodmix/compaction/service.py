"""Compaction as a runtime service: settings per agent and model, hooks, events, engines.

The runtime owns one `CompactionService`. It provides:

- `compact_with_runtime(params)`, the built-in compaction that the legacy engine (and any
  engine calling `delegate_compaction_to_runtime`) delegates to;
- `run(...)`, which runs a compaction through whichever engine is active, wrapped in the
  `before_compaction`/`after_compaction` hooks and `CompactionEvent`s, for every trigger
  (threshold, overflow, byte guard, `/compact`, `sessions compact`);
- `guard(...)`, the per-turn `ContextGuard` the agent loop consults before each request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import anyio
import msgspec

from nodmix.agents import AgentProfile
from nodmix.checkpoints.store import CheckpointStore
from nodmix.compaction.base import CompactionProvider, Summarizer
from nodmix.compaction.settings import CompactionSettings
from nodmix.context.base import CompactionTrigger, CompactParams, CompactResult, ContextEngine
from nodmix.context.tokens import estimate_tokens
from nodmix.errors import NodmixError, SessionError
from nodmix.events import CompactionEvent, EventSink, discard
from nodmix.hooks import CompactionInfo, Hooks
from nodmix.loop.model_call import ModelResolver
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.session import Session
from nodmix.tools.base import Tool, ToolRunner

if TYPE_CHECKING:
    # The pipeline is imported on first use: most turns never compact.
    from nodmix.compaction.compactor import Compactor
    from nodmix.compaction.memory_flush import FlushRunner
    from nodmix.compaction.summarize import SummaryRetry

log = logging.getLogger("nodmix.compaction")

COMPACT_WAIT_SECONDS = 15.0
"""How long a manual compaction waits for a turn running on the same session."""

SummarizerFactory = Callable[[Sequence[str]], Summarizer]
"""Builds the summariser for a model chain (tests inject scripted ones)."""


def flush_runner(models: ModelResolver, executor: ToolRunner, tools: Sequence[Tool]) -> FlushRunner:
    """The memory-flush runner for a runtime (the flush module loads the agent loop)."""
    from nodmix.compaction.memory_flush import FlushRunner

    return FlushRunner(models=models, executor=executor, tools=tools)


class RuntimeCompactionContext(msgspec.Struct, frozen=True, kw_only=True):
    """What the runtime passes through an engine's `compact()` as `runtime_context`."""

    agent: AgentProfile
    session: Session
    model_refs: tuple[str, ...]
    emit: EventSink = discard
    attempt: int = 0


class CompactionService:
    """Compaction for every agent of a runtime.

    Args:
        models: The provider router (resolves `provider/model`).
        sessions: The session manager.
        hooks: The plugin hooks (compaction hooks run around every compaction).
        providers: Plugin compaction providers by id (read on each use).
        agent_for_key: The agent profile that owns a session key.
        model_refs: The model chain of an agent.
        flush: Runs the silent memory-flush turn; `None` disables flushing.
        summarizer_factory: Replaces the model summariser (tests).
        retry: Retry schedule of summariser calls.
        checkpoints: Keeps a checkpoint of the transcript before each compaction.
    """

    def __init__(
        self,
        *,
        models: ModelResolver,
        sessions: SessionManager,
        hooks: Hooks,
        providers: Callable[[], Mapping[str, CompactionProvider]],
        agent_for_key: Callable[[str], AgentProfile],
        model_refs: Callable[[AgentProfile], tuple[str, ...]],
        flush: Callable[[], FlushRunner] | None = None,
        summarizer_factory: SummarizerFactory | None = None,
        retry: SummaryRetry | None = None,
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        self.models = models
        self.sessions = sessions
        self.hooks = hooks
        self._providers = providers
        self._agent_for_key = agent_for_key
        self._model_refs = model_refs
        self._flush_factory = flush
        self._flush: FlushRunner | None = None
        self._summarizer_factory = summarizer_factory
        self._retry = retry
        self.checkpoints = checkpoints
        """Where a transcript is copied before each compaction (`nodmix.checkpoints`)."""

    @property
    def can_flush(self) -> bool:
        """Whether a memory flush is available (without building its runner)."""
        return self._flush_factory is not None

    @property
    def flush_runner(self) -> FlushRunner | None:
        """The memory-flush runner, built on first use (it loads the agent loop's tool set)."""
        if self._flush is None and self._flush_factory is not None:
            self._flush = self._flush_factory()
        return self._flush

    def settings(self, agent: AgentProfile, model_ref: str) -> CompactionSettings:
        """The agent's compaction settings, clamped to the model's window."""
        spec = self.models.resolve(model_ref).spec
        return CompactionSettings.resolve(
            agent.compaction, context_window=spec.context_window, max_tokens=spec.max_tokens
        )

    # ---- the built-in compaction (legacy engine) -----------------------------------------

    async def compact_with_runtime(self, params: CompactParams) -> CompactResult:
        """Nodmix's own summarising compaction of `params.session_key`.

        Configuration problems (an unknown `compaction.model`, a missing API key) come back as
        a failed result rather than an exception: a compaction that cannot run must not take
        the user's turn down with it, and the history is untouched either way.
        """
        from nodmix.compaction.compactor import CompactionRequest

        context = params.runtime_context
        if isinstance(context, RuntimeCompactionContext):
            agent, session, refs = context.agent, context.session, context.model_refs
            attempt = context.attempt
        else:
            agent = self._agent_for_key(params.session_key)
            session = await self.sessions.open_async(params.session_key, create=False)
            refs, attempt = self._model_refs(agent), 0
        request = CompactionRequest(
            trigger=params.trigger,
            instructions=params.instructions,
            attempt=attempt,
            token_budget=params.token_budget,
        )
        try:
            compactor = self.compactor(agent, refs)
        except NodmixError as exc:
            log.warning("cannot compact %s: %s", params.session_key, exc)
            return CompactResult(ok=False, compacted=False, reason=str(exc))
        return await compactor.compact(session, request)

    def compactor(self, agent: AgentProfile, refs: Sequence[str]) -> Compactor:
        """A compactor for an agent whose session runs on `refs`."""
        from nodmix.compaction.compactor import Compactor
        from nodmix.compaction.model import ModelSummarizer

        settings = self.settings(agent, refs[0])
        chain = (settings.model,) if settings.model else tuple(refs)
        if self._summarizer_factory is not None:
            summarizer = self._summarizer_factory(chain)
            window = settings.context_window
        else:
            model = ModelSummarizer(self.models, chain)
            summarizer, window = model, model.spec.context_window
        provider = None
        if settings.provider:
            found = self._providers().get(settings.provider)
            if found is None:
                log.warning(
                    "compaction provider %r is not registered; using the built-in summary",
                    settings.provider,
                )
            else:
                provider = (settings.provider, found)
        return Compactor(
            settings=settings,
            summarizer=summarizer,
            sessions=self.sessions,
            summary_window=window,
            provider=provider,
            retry=self._retry,
            checkpoints=self.checkpoints,
        )

    # ---- on request ----------------------------------------------------------------------

    async def compact_session(
        self,
        engine: ContextEngine,
        *,
        agent: AgentProfile,
        session_key: str,
        refs: tuple[str, ...],
        instructions: str | None = None,
        emit: EventSink = discard,
        prepare: Callable[[Session], Awaitable[None]] | None = None,
    ) -> SessionCompaction:
        """A manual compaction: waits (bounded) for a running turn, then compacts.

        Raises:
            SessionError: the session does not exist, or a turn kept it busy too long.
        """
        lock = self.sessions.turn_lock(session_key)
        with anyio.move_on_after(COMPACT_WAIT_SECONDS):
            await lock.acquire()
        if lock.statistics().owner != anyio.get_current_task():
            raise SessionError(
                f"session {session_key} is busy with a turn; try compacting again when it ends"
            )
        try:
            session = await self.sessions.open_async(session_key, create=False)
            if prepare is not None:
                await prepare(session)
            result = await self.run(
                engine,
                agent=agent,
                session=session,
                refs=refs,
                trigger="manual",
                instructions=instructions,
                emit=emit,
            )
        finally:
            lock.release()
        return SessionCompaction(
            agent_id=agent.id,
            session_key=session_key,
            session_id=session.session_id,
            result=result,
            compaction_count=session.entry.compaction_count,
        )

    # ---- any engine, with hooks and events -----------------------------------------------

    async def run(
        self,
        engine: ContextEngine,
        *,
        agent: AgentProfile,
        session: Session,
        refs: tuple[str, ...],
        trigger: CompactionTrigger,
        instructions: str | None = None,
        attempt: int = 0,
        current_tokens: int | None = None,
        token_budget: int | None = None,
        emit: EventSink = discard,
    ) -> CompactResult:
        """Compact through `engine`, announcing it to hooks and (per `notifyUser`) the user.

        `token_budget` is what the request's messages may use (the guard subtracts the system
        prompt and tools from the prompt budget); the prompt budget when `None`.
        """
        settings = self.settings(agent, refs[0])
        tokens = current_tokens
        if tokens is None:
            tokens = estimate_tokens(session.messages_for_model())
        info = CompactionInfo(
            agent_id=agent.id,
            session_key=session.key,
            session_id=session.session_id,
            trigger=trigger,
            tokens_before=tokens,
        )
        # A requested compaction answers for itself; notices are for the automatic ones.
        notify = settings.notify_user and trigger != "manual"
        log.info("compaction start (%s) on %s at ~%d tokens", trigger, session.key, tokens)
        emit(
            CompactionEvent(
                phase="start",
                trigger=trigger,
                tokens_before=tokens,
                message="Compacting the conversation to free context space…" if notify else None,
            )
        )
        await _run_hooks(self.hooks.before_compaction, info)
        params = CompactParams(
            session_id=session.session_id,
            session_key=session.key,
            trigger=trigger,
            force=trigger == "manual",
            instructions=instructions,
            token_budget=settings.prompt_budget if token_budget is None else token_budget,
            current_tokens=tokens,
            runtime_context=RuntimeCompactionContext(
                agent=agent, session=session, model_refs=refs, emit=emit, attempt=attempt
            ),
        )
        try:
            result = await engine.compact(params)
        except Exception as exc:
            emit(
                CompactionEvent(
                    phase="failed",
                    trigger=trigger,
                    tokens_before=tokens,
                    message=_failed_text(str(exc)) if notify else None,
                )
            )
            raise
        _announce(result, trigger, tokens, notify, emit)
        if result.compacted:
            after = CompactionInfo(
                agent_id=agent.id,
                session_key=session.key,
                session_id=session.session_id,
                trigger=trigger,
                tokens_before=result.tokens_before or tokens,
                summary=result.summary,
                tokens_after=result.tokens_after,
            )
            await _run_hooks(self.hooks.after_compaction, after)
        return result


class SessionCompaction(msgspec.Struct, kw_only=True):
    """The outcome of compacting a session on request (`/compact`, `sessions compact`)."""

    agent_id: str
    session_key: str
    session_id: str
    result: CompactResult
    compaction_count: int

    def to_json(self) -> dict[str, Any]:
        """The `sessions.compact` RPC / `--json` shape."""
        result = self.result
        return {
            "ok": result.ok,
            "key": self.session_key,
            "agentId": self.agent_id,
            "sessionId": self.session_id,
            "compacted": result.compacted,
            "reason": result.reason,
            "compactionCount": self.compaction_count,
            "result": {"tokensBefore": result.tokens_before, "tokensAfter": result.tokens_after},
        }


def compaction_message(done: SessionCompaction) -> str:
    """One line for the user about a requested compaction."""
    result = done.result
    if result.compacted:
        before, after = result.tokens_before or 0, result.tokens_after or 0
        return (
            f"Compacted the conversation (~{before:,} → ~{after:,} tokens; "
            f"compaction #{done.compaction_count} of this session)."
        )
    if result.ok:
        # Reasons read "nothing to compact: <why>"; the line says the first half already.
        why = (result.reason or "").removeprefix("nothing to compact").lstrip(": ")
        return f"Nothing to compact yet ({why or 'the conversation is empty'})."
    return f"Compaction failed: {result.reason or 'unknown error'}. The full history was kept."


def _failed_text(reason: str | None) -> str:
    return f"Compaction did not complete ({reason or 'unknown reason'}); the full history was kept."


def _announce(
    result: CompactResult, trigger: str, tokens: int, notify: bool, emit: EventSink
) -> None:
    if result.compacted:
        before = result.tokens_before or tokens
        text = f"Conversation compacted (~{before:,} → ~{result.tokens_after or 0:,} tokens)."
        log.info("compaction complete (%s): %s", trigger, text)
        emit(
            CompactionEvent(
                phase="end",
                trigger=trigger,
                tokens_before=before,
                tokens_after=result.tokens_after,
                message=text if notify else None,
            )
        )
        return
    reason = result.reason or "nothing to compact"
    log.info("compaction (%s) made no change: %s", trigger, reason)
    text = _failed_text(reason) if not result.ok else f"Nothing to compact ({reason})."
    emit(
        CompactionEvent(
            phase="failed" if not result.ok else "end",
            trigger=trigger,
            tokens_before=tokens,
            tokens_after=tokens,
            message=text if notify else None,
        )
    )


async def _run_hooks(hooks: Sequence[Any], info: CompactionInfo) -> None:
    for registered in list(hooks):
        try:
            await registered.hook(info)
        except Exception:
            log.exception("compaction hook of %r failed", registered.owner)
