"""The built-in compaction of one session: plan, summarise, record.

This is what the legacy engine's `compact()` delegates to (the runtime's `compact_with_runtime`
service). History is never rewritten: the summary goes into a new `compaction` entry that names
the first entry kept verbatim, and the replay shows the summary followed by that tail. With
`truncateAfterCompaction` the session then continues in a successor transcript.

Nothing is recorded unless a summary exists for everything the new entry hides: a summary that
failed part-way moves the cut back to where it stopped, and one that failed outright records
nothing (the result says why).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence
from typing import Any

import anyio
import msgspec

from nodmix.checkpoints import CheckpointStore, take_checkpoint
from nodmix.compaction.base import CompactionProvider, ProviderRequest, Summarizer
from nodmix.compaction.chunking import SAFETY_MARGIN
from nodmix.compaction.plan import CompactionPlan, plan_compaction
from nodmix.compaction.prompts import focus_instructions
from nodmix.compaction.safeguard import SUMMARY_CAP_CHARS, cap_summary, supplement
from nodmix.compaction.serialize import collect_file_ops
from nodmix.compaction.settings import MAX_HISTORY_SHARE, CompactionSettings
from nodmix.compaction.successor import continue_in_successor
from nodmix.compaction.summarize import SummaryJob, SummaryOutcome, SummaryPipeline, SummaryRetry
from nodmix.context.base import CompactionTrigger, CompactResult
from nodmix.context.tokens import CHARS_PER_TOKEN, estimate_message_tokens
from nodmix.messages import Message
from nodmix.sessions.entries import (
    CompactionEntry,
    CustomEntry,
    Entry,
    ModelChangeEntry,
    OpaqueEntry,
    SessionInfoEntry,
    iso_now,
    new_entry_id,
)
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.replay import compaction_summary_message
from nodmix.sessions.session import Session

log = logging.getLogger("nodmix.compaction")

MIN_SUMMARY_CAP_CHARS = 2000
TURN_PREFIX_HEADING = "\n\n---\n\nThe exchange in progress, so far:\n\n"


class CompactionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One compaction to run."""

    trigger: CompactionTrigger
    instructions: str | None = None
    """Extra focus from `/compact <text>` or `sessions compact --instructions`."""
    attempt: int = 0
    """Overflow attempt number: each one keeps half the tail of the one before."""
    token_budget: int | None = None
    """Tokens the messages of a request may use (prompt budget minus system prompt and tools);
    the kept tail and the summary are sized to fit it with room to spare."""


class _Summary(msgspec.Struct, frozen=True, kw_only=True):
    text: str
    cut: int
    from_hook: bool
    outcome: SummaryOutcome | None = None
    provider: str | None = None


class Compactor:
    """Compacts sessions with one agent's settings.

    Args:
        settings: Effective compaction settings (already clamped to the model).
        summarizer: Answers summary requests (a model call in production).
        sessions: The session manager (for successor transcripts).
        summary_window: Context window of the summarising model.
        provider: A plugin compaction provider to try first, with its id.
        retry: Retry schedule of summariser calls.
        checkpoints: Where the transcript is copied before each compaction changes it.
    """

    def __init__(
        self,
        *,
        settings: CompactionSettings,
        summarizer: Summarizer,
        sessions: SessionManager,
        summary_window: int | None = None,
        provider: tuple[str, CompactionProvider] | None = None,
        retry: SummaryRetry | None = None,
        checkpoints: CheckpointStore | None = None,
    ) -> None:
        self.settings = settings
        self._summarizer = summarizer
        self._sessions = sessions
        self._window = summary_window or settings.context_window
        self._provider = provider
        self._retry = retry
        self._checkpoints = checkpoints

    def plan(self, session: Session, request: CompactionRequest) -> CompactionPlan | str:
        """The plan for `request`, or why there is nothing to compact."""
        settings = self.settings
        manual = request.trigger == "manual"
        keep = settings.keep_recent_tokens
        if request.token_budget is not None:
            keep = min(keep, int(max(0, request.token_budget) * MAX_HISTORY_SHARE))
        return plan_compaction(
            session.entries,
            keep_tokens=keep >> max(0, request.attempt),
            summary_window=self._window,
            force=True,
            # A manual compaction without a configured tail budget is a clean checkpoint.
            hard_checkpoint=manual and not settings.keep_recent_explicit,
        )

    async def compact(self, session: Session, request: CompactionRequest) -> CompactResult:
        """Compact `session`; the result says whether anything changed and why not."""
        plan = self.plan(session, request)
        if isinstance(plan, str):
            return CompactResult(ok=True, compacted=False, reason=plan)
        summary, error = await self._summarize(session, plan, request)
        if summary is None:
            return CompactResult(
                ok=False,
                compacted=False,
                reason=f"no summary ({error or 'unknown error'}); the history was left as it was",
                tokens_before=plan.tokens_before,
            )
        if self._checkpoints is not None:  # the transcript as it was, for a rollback
            await anyio.to_thread.run_sync(
                functools.partial(
                    take_checkpoint,
                    self._checkpoints,
                    session,
                    trigger=request.trigger,
                    tokens_before=plan.tokens_before,
                )
            )
        return self._record(session, plan, summary, request)

    # ---- summarising ---------------------------------------------------------------------

    async def _summarize(
        self, session: Session, plan: CompactionPlan, request: CompactionRequest
    ) -> tuple[_Summary | None, str | None]:
        """The summary and where it lets the tail start, or `None` and why not."""
        settings = self.settings
        instructions = focus_instructions(
            settings.identifier_policy,
            settings.identifier_instructions,
            settings.custom_instructions,
            request.instructions,
        )
        previous = plan.previous.summary if plan.previous is not None else None
        timeout = settings.timeout_seconds
        if self._provider is not None:
            with anyio.move_on_after(timeout):
                text = await self._ask_provider(session, plan, request, instructions, previous)
                if text:
                    provider = self._provider[0]
                    return _Summary(
                        text=text, cut=plan.cut, from_hook=True, provider=provider
                    ), None
        job = SummaryJob(
            items=plan.history,
            chunks=plan.chunks,
            turn_prefix=[i.message for i in plan.turn_prefix],
            previous_summary=previous,
            instructions=instructions,
            safeguard=settings.mode == "safeguard",
            max_tokens=settings.summary_max_tokens,
            max_chunk_chars=int(plan.chunk_tokens / SAFETY_MARGIN) * CHARS_PER_TOKEN,
        )
        outcome = SummaryOutcome()
        # A timeout keeps what is done: the chunks summarised so far still count.
        with anyio.move_on_after(timeout) as scope:
            await SummaryPipeline(self._summarizer, self._retry).run(job, outcome)
        if scope.cancelled_caught:
            outcome.timed_out = True
            outcome.error = f"summarising timed out after {timeout:.0f}s"
            outcome.salvage(previous)
        if outcome.text is None:
            log.warning("compaction failed: %s", outcome.error)
            return None, outcome.error
        cut, text = plan.cut, outcome.text
        if outcome.chunks_done < len(plan.chunks):
            cut = plan.chunks[outcome.chunks_done].start
        elif plan.turn_prefix:
            if outcome.turn_prefix is None:
                cut = plan.history_end  # keep the unsummarised start of the turn verbatim
            else:
                text += TURN_PREFIX_HEADING + outcome.turn_prefix
        if cut <= 0:
            return None, outcome.error or "nothing could be summarised"
        return _Summary(text=text, cut=cut, from_hook=False, outcome=outcome), None

    async def _ask_provider(
        self,
        session: Session,
        plan: CompactionPlan,
        request: CompactionRequest,
        instructions: str | None,
        previous: str | None,
    ) -> str | None:
        assert self._provider is not None
        provider_id, provider = self._provider
        messages = [i.message for i in plan.items[: plan.cut]]
        try:
            text = await provider.summarize(
                ProviderRequest(
                    session_key=session.key,
                    messages=messages,
                    previous_summary=previous,
                    instructions=instructions or "",
                    max_tokens=self.settings.summary_max_tokens,
                    trigger=request.trigger,
                )
            )
        except Exception as exc:  # a plugin failing must not block compaction
            log.warning(
                "compaction provider %r failed (%s); using the built-in summary", provider_id, exc
            )
            return None
        if not isinstance(text, str) or not text.strip():
            log.warning(
                "compaction provider %r returned nothing; using the built-in summary", provider_id
            )
            return None
        return text.strip()

    # ---- recording -----------------------------------------------------------------------

    def _record(
        self, session: Session, plan: CompactionPlan, summary: _Summary, request: CompactionRequest
    ) -> CompactResult:
        settings = self.settings
        cut = summary.cut
        hidden = [i.message for i in plan.items[:cut]]
        text = summary.text
        cap = _summary_cap(request.token_budget)
        extra = ""
        if settings.mode == "safeguard":
            policy_on = settings.identifier_policy != "off"
            extra = supplement(hidden, text, identifiers=policy_on, cap_chars=cap)
        ops = collect_file_ops(plan.entries[: plan.position(cut)], plan.previous)
        text = cap_summary(text, extra, cap) + ops.render()
        details: dict[str, Any] = {
            **ops.details(),
            "trigger": request.trigger,
            "summarizedMessages": cut,
            "keptMessages": len(plan.items) - cut,
        }
        if summary.outcome is not None:
            details["chunks"] = len(plan.chunks)
            details["summaryCalls"] = summary.outcome.calls
            if cut < plan.cut:
                details["partial"] = True
            if summary.outcome.timed_out:
                details["timedOut"] = True
        if summary.provider is not None:
            details["provider"] = summary.provider
        first_kept = plan.first_kept_entry_id(cut)
        entry = _append_compaction(
            session, text, first_kept, plan.tokens_before, details, summary.from_hook or None
        )
        rotated = False
        if settings.truncate_after_compaction:
            kept = _state_entries(session, plan, cut) + list(plan.entries[plan.position(cut) :])
            entry = continue_in_successor(
                self._sessions,
                session,
                kept=kept,
                summary=text,
                tokens_before=plan.tokens_before,
                details={**details, "continuesFrom": entry.id},
                from_hook=summary.from_hook or None,
            )
            rotated = True
        tokens_after = _tokens_after(entry, [i.message for i in plan.items[cut:]])
        session.record_compaction(context_tokens=tokens_after)
        log.info(
            "compacted %s (%s): %d -> ~%d tokens, %d messages summarised",
            session.key,
            request.trigger,
            plan.tokens_before,
            tokens_after,
            cut,
        )
        return CompactResult(
            ok=True,
            compacted=True,
            tokens_before=plan.tokens_before,
            tokens_after=tokens_after,
            summary=text,
            session_id=session.session_id if rotated else None,
            session_file=str(session.transcript.path) if rotated else None,
        )


def _append_compaction(
    session: Session,
    summary: str,
    first_kept: str | None,
    tokens_before: int,
    details: Any,
    from_hook: bool | None,
) -> CompactionEntry:
    transcript = session.transcript
    if first_kept is not None:
        return transcript.append_compaction(
            summary=summary,
            first_kept_entry_id=first_kept,
            tokens_before=tokens_before,
            details=details,
            from_hook=from_hook,
        )
    # Nothing kept: the entry names itself, so the replay starts right after it.
    entry_id = new_entry_id()
    entry = CompactionEntry(
        id=entry_id,
        parent_id=transcript.leaf_id,
        timestamp=iso_now(),
        summary=summary,
        first_kept_entry_id=entry_id,
        tokens_before=tokens_before,
        details=details,
        from_hook=from_hook,
    )
    transcript.append(entry)
    return entry


_STATE_ENTRIES = (CustomEntry, ModelChangeEntry, SessionInfoEntry, OpaqueEntry)


def _state_entries(session: Session, plan: CompactionPlan, cut: int) -> list[Entry]:
    """Plugin state, titles and model switches from before the tail (kept in a successor)."""
    tail_ids = {e.id for e in plan.entries[plan.position(cut) :]}
    return [e for e in session.entries if isinstance(e, _STATE_ENTRIES) and e.id not in tail_ids]


def _summary_cap(token_budget: int | None) -> int:
    """Characters a summary may take: 16,000, or a quarter of a small message budget."""
    if token_budget is None:
        return SUMMARY_CAP_CHARS
    return min(SUMMARY_CAP_CHARS, max(MIN_SUMMARY_CAP_CHARS, token_budget * CHARS_PER_TOKEN // 4))


def _tokens_after(entry: CompactionEntry, kept: Sequence[Message]) -> int:
    summary = estimate_message_tokens(compaction_summary_message(entry))
    return summary + sum(estimate_message_tokens(m) for m in kept)
