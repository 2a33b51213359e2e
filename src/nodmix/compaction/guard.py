"""`TurnGuard`: the `ContextGuard` of one turn, backed by the compaction service.

Per request it (1) estimates the request (engine estimate, system prompt and tools, or the
provider's last usage plus what came after, whichever is larger), (2) trims old tool results
once the request passes half the prompt budget, (3) runs the silent memory flush once per
compaction cycle when the context comes within `memoryFlush.softThresholdTokens` of the
budget, and (4) asks the loop to compact when the request would eat into the reserve.

Who compacts automatically:

| mode / engine             | threshold (window − reserve) | overflow error | byte guard |
|---------------------------|------------------------------|----------------|------------|
| `off`                     | no                           | no             | no         |
| engine owns compaction    | only past the whole window   | engine         | engine     |
| otherwise                 | yes                          | yes            | yes        |

Every compaction goes through the active engine's `compact()`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from nodmix.agents import AgentProfile
from nodmix.compaction.accounting import flushed_since_compaction, reported_context_tokens
from nodmix.compaction.service import CompactionService
from nodmix.compaction.settings import CompactionSettings
from nodmix.context.base import CompactionTrigger, ContextEngine
from nodmix.context.guard import RequestDraft, RequestPlan
from nodmix.context.pruning import PruneSettings, prune_tool_results
from nodmix.context.tokens import estimate_text_tokens, estimate_tokens, estimate_tool_tokens
from nodmix.events import EventSink
from nodmix.origin import TurnOrigin
from nodmix.sessions.session import Session
from nodmix.tools.base import ToolSpec

log = logging.getLogger("nodmix.compaction")


class TurnGuard:
    """Keeps one turn's requests inside the window (see the module docstring)."""

    def __init__(
        self,
        *,
        service: CompactionService,
        engine: ContextEngine,
        agent: AgentProfile,
        session: Session,
        refs: tuple[str, ...],
        emit: EventSink,
        settings: CompactionSettings | None = None,
        prune: PruneSettings | None = None,
        origin: TurnOrigin | None = None,
    ) -> None:
        self._service = service
        self._origin = origin
        self._engine = engine
        self._agent = agent
        self._session = session
        self._refs = refs
        self._emit = emit
        self.settings = settings or service.settings(agent, refs[0])
        self._prune = prune or PruneSettings()
        self._owns = bool(getattr(engine.info, "owns_compaction", False))
        self._tool_tokens: tuple[tuple[str, ...], int] | None = None
        self.last_tokens: int | None = None
        self._fixed_tokens = 0
        self._auto_failed = False
        """A threshold compaction failed this turn: do not retry it before every step."""

    @property
    def token_budget(self) -> int:
        """Window minus reserve."""
        return self.settings.prompt_budget

    @property
    def context_window(self) -> int:
        """The model's context window."""
        return self.settings.context_window

    async def before_turn(self) -> None:
        """Compact first when the active transcript has grown past `maxActiveTranscriptBytes`."""
        settings = self.settings
        limit = settings.max_active_transcript_bytes
        if not limit or not settings.enabled:
            return
        size = self._session.transcript.size_bytes
        if size < limit:
            return
        if not settings.byte_guard_active:
            log.info(
                "%s: transcript is %d bytes (limit %d) but maxActiveTranscriptBytes needs "
                "truncateAfterCompaction: true; not compacting",
                self._session.key,
                size,
                limit,
            )
            return
        await self.compact("budget", attempt=0)

    async def review(self, draft: RequestDraft, *, may_compact: bool) -> RequestPlan:
        """Estimate, trim, maybe flush; say whether to compact first."""
        settings = self.settings
        budget = settings.prompt_budget
        fixed = estimate_text_tokens(draft.system) + self._tools_tokens(draft.tools)
        self._fixed_tokens = fixed
        estimated = max(0, draft.assembled.estimated_tokens) + fixed
        auto = settings.enabled and not self._owns
        pruned = prune_tool_results(
            draft.assembled.messages,
            estimated_tokens=estimated,
            budget_tokens=budget,
            settings=self._prune,
            hard=not (may_compact and auto),
        )
        tokens = estimated - pruned.saved_tokens
        reported = reported_context_tokens(self._session.entries)
        if reported is not None:
            tokens = max(tokens, reported)
        if draft.assembled.prompt_authority == "preassembly_may_overflow":
            tokens = max(tokens, estimate_tokens(draft.unwindowed) + fixed)
        self.last_tokens = tokens
        if pruned.trimmed:
            log.debug(
                "trimmed %d old tool results (~%d tokens)", pruned.trimmed, pruned.saved_tokens
            )
        if auto and self._flush_due(tokens):
            await self._flush()
        limit = budget if auto else settings.context_window
        compact = may_compact and settings.enabled and not self._auto_failed and tokens > limit
        return RequestPlan(messages=pruned.messages, tokens=tokens, compact=compact)

    async def compact(
        self, trigger: CompactionTrigger, *, attempt: int, error: str | None = None
    ) -> bool:
        """Compact through the engine (flushing memory first for threshold compactions)."""
        if not self.settings.enabled:
            return False
        if trigger in ("auto", "budget") and not self._owns and self._flush_due(None):
            await self._flush()
        if error:
            log.info("compacting %s after: %s", self._session.key, error)
        result = await self._service.run(
            self._engine,
            agent=self._agent,
            session=self._session,
            refs=self._refs,
            trigger=trigger,
            attempt=attempt,
            current_tokens=self.last_tokens,
            token_budget=max(0, self.settings.prompt_budget - self._fixed_tokens),
            emit=self._emit,
        )
        if result.compacted:
            self.last_tokens = result.tokens_after
        elif not result.ok and trigger == "auto":
            self._auto_failed = True
        return result.compacted

    def _tools_tokens(self, tools: Sequence[ToolSpec]) -> int:
        # The tool list rarely changes within a turn; estimating it costs a JSON encode each.
        names = tuple(t.name for t in tools)
        if self._tool_tokens is None or self._tool_tokens[0] != names:
            self._tool_tokens = (names, estimate_tool_tokens(tools))
        return self._tool_tokens[1]

    def _flush_due(self, tokens: int | None) -> bool:
        flush = self.settings.memory_flush
        if not flush.enabled or not self._service.can_flush:
            return False
        if tokens is not None:
            threshold = self.settings.prompt_budget - max(0, flush.soft_threshold_tokens)
            if tokens <= threshold:
                return False
        return not flushed_since_compaction(self._session.entries)

    async def _flush(self) -> None:
        runner = self._service.flush_runner
        assert runner is not None
        log.info("memory flush before compaction on %s", self._session.key)
        await runner.flush(
            self._session, self._agent, self._refs, self.settings.memory_flush, self._origin
        )
