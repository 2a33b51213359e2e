"""The summarisation pipeline: chunks in, one summary out, never losing what it could not read.

```
chunks ─► pieces (oversized chunk text split) ─► one call per piece (retried) ─► merge call
   │                                        │ a piece fails: stop here; what came before counts
   └ one piece only: a single call, with the previous summary folded in
```

Failure never deletes history. When a piece fails after its retries, the summary covers only
the chunks before it and the compactor keeps everything from the failed chunk on verbatim; when
the first chunk fails there is no summary and nothing is compacted. A failed merge falls back to
the part summaries placed one after another (longer, but complete). A part the summarising
model rejects as too large is halved and tried again.

Transient errors (rate limits, outages, empty answers) are retried three times in all, after
0.5 s and 1 s (with jitter, honouring a provider's `Retry-After` up to 5 s). Cancellation and
timeouts are not retried: they mean the caller gave up.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

import anyio
import msgspec

from nodmix.compaction.base import Summarizer, SummaryRequest
from nodmix.compaction.chunking import Chunk
from nodmix.compaction.prompts import (
    SUMMARIZER_SYSTEM,
    history_prompt,
    merge_prompt,
    retry_note,
    turn_prefix_prompt,
)
from nodmix.compaction.safeguard import missing_headings
from nodmix.compaction.serialize import serialize_conversation, split_text
from nodmix.compaction.units import Item
from nodmix.errors import ContextOverflowError, ProviderError
from nodmix.messages import Message

log = logging.getLogger("nodmix.compaction")

MAX_SPLIT_DEPTH: Final = 3
"""How often a part the model finds too large is halved before it counts as failed."""
MAX_MERGE_DEPTH: Final = 4


class SummaryFailedError(Exception):
    """One summariser call failed for good (after its retries)."""


class SummaryRetry(msgspec.Struct, frozen=True, kw_only=True):
    """Retry schedule of summariser calls."""

    attempts: int = 3
    base_delay: float = 0.5
    max_delay: float = 5.0
    jitter: float = 0.2
    sleep: Callable[[float], Awaitable[Any]] = anyio.sleep
    rand: Callable[[], float] = msgspec.field(default=random.random)

    def delay(self, retry: int, error: BaseException | None) -> float:
        """Seconds before retry number `retry` (0-based)."""
        retry_after = getattr(error, "retry_after", None)
        if isinstance(retry_after, int | float) and retry_after >= 0:
            return float(min(retry_after, self.max_delay))
        backoff = self.base_delay * 2.0**retry
        backoff *= 1 + self.jitter * (2 * self.rand() - 1)
        return max(self.base_delay, min(backoff, self.max_delay))


class SummaryJob(msgspec.Struct, frozen=True, kw_only=True):
    """Everything one compaction needs summarised."""

    items: Sequence[Item]
    """The history to summarise (turn prefix excluded)."""
    chunks: Sequence[Chunk]
    turn_prefix: Sequence[Message] = ()
    """The start of a turn the cut splits; summarised separately."""
    previous_summary: str | None = None
    instructions: str | None = None
    safeguard: bool = True
    max_tokens: int = 4096
    max_chunk_chars: int = 64_000


class SummaryOutcome(msgspec.Struct, kw_only=True):
    """What the pipeline produced."""

    text: str | None = None
    """The history summary, or `None` when not even the first chunk could be summarised."""
    chunks_done: int = 0
    """`chunks[:chunks_done]` are covered by `text`."""
    turn_prefix: str | None = None
    """Summary of the split turn's start; `None` if there was none or it failed."""
    calls: int = 0
    error: str | None = None
    merged: bool = False
    parts: list[str] = msgspec.field(default_factory=list)
    """Summaries of the chunks completed so far, oldest first (kept if the run is cut short)."""
    timed_out: bool = False

    def salvage(self, previous_summary: str | None) -> None:
        """After an interrupted run: the completed chunk summaries, side by side, still count."""
        if self.text is None and self.parts:
            self.text = _side_by_side(previous_summary, self.parts)
            self.chunks_done = len(self.parts)


class SummaryPipeline:
    """Runs a `SummaryJob` against a summariser."""

    def __init__(self, summarizer: Summarizer, retry: SummaryRetry | None = None) -> None:
        self._summarizer = summarizer
        self._retry = retry or SummaryRetry()
        self.outcome = SummaryOutcome()
        """The outcome of the current (or last) run, filled in as it progresses."""

    async def run(self, job: SummaryJob, outcome: SummaryOutcome | None = None) -> SummaryOutcome:
        """Summarise the history, then the split turn's start (if any).

        `outcome` is filled in as the work progresses, so a caller that cancels the run (a
        timeout) can still use the chunks finished so far (`SummaryOutcome.salvage`).
        """
        outcome = outcome if outcome is not None else SummaryOutcome()
        self.outcome = outcome
        if not job.items:
            outcome.text = job.previous_summary or "No earlier conversation."
        else:
            await self._history(job, outcome)
        if outcome.text is not None and job.turn_prefix and outcome.chunks_done == len(job.chunks):
            outcome.turn_prefix = await self._turn_prefix(job, outcome)
        return outcome

    # ---- history -------------------------------------------------------------------------

    async def _history(self, job: SummaryJob, outcome: SummaryOutcome) -> None:
        pieces: list[tuple[int, str]] = []
        for index, chunk in enumerate(job.chunks):
            messages = [i.message for i in job.items[chunk.start : chunk.end]]
            text = serialize_conversation(messages)
            pieces.extend((index, piece) for piece in split_text(text, job.max_chunk_chars))
        if len(pieces) == 1:
            await self._single(job, pieces[0][1], outcome)
            return
        current: list[str] = []
        for number, (chunk_index, piece) in enumerate(pieces, 1):
            part = (number, len(pieces))

            def build(text: str, part: tuple[int, int] = part) -> str:
                return history_prompt(
                    text,
                    previous_summary=None,
                    instructions=job.instructions,
                    safeguard=False,
                    part=part,
                )

            try:
                current.append(await self._ask(piece, build, job.max_tokens, "chunk"))
            except SummaryFailedError as exc:
                outcome.error = str(exc)
                log.warning(
                    "summarised %d of %d chunks; keeping the rest verbatim: %s",
                    len(outcome.parts),
                    len(job.chunks),
                    exc,
                )
                break
            last_piece = number == len(pieces) or pieces[number][0] != chunk_index
            if last_piece:
                outcome.parts.append("\n\n".join(current))
                current = []
        if not outcome.parts:
            return
        outcome.chunks_done = len(outcome.parts)
        outcome.text = await self._merge(job, list(outcome.parts))
        outcome.merged = True

    async def _single(self, job: SummaryJob, conversation: str, outcome: SummaryOutcome) -> None:
        async def attempt(note: str | None) -> str:
            def build(text: str) -> str:
                return history_prompt(
                    text,
                    previous_summary=job.previous_summary,
                    instructions=_join(job.instructions, note),
                    safeguard=job.safeguard,
                )

            return await self._ask(conversation, build, job.max_tokens, "history")

        try:
            outcome.text = await self._guarded(job, attempt)
        except SummaryFailedError as exc:
            outcome.error = str(exc)
            return
        outcome.chunks_done = len(job.chunks)

    async def _merge(self, job: SummaryJob, summaries: list[str], depth: int = 0) -> str:
        if len(summaries) == 1 and not job.previous_summary and not job.safeguard:
            return summaries[0]
        total = sum(len(s) for s in summaries) + len(job.previous_summary or "")
        if total > job.max_chunk_chars and len(summaries) > 2 and depth < MAX_MERGE_DEPTH:
            # Too much for one call: merge neighbours first, then merge the results.
            half = len(summaries) // 2
            inner = SummaryJob(items=(), chunks=(), instructions=job.instructions, safeguard=False)
            left = await self._merge(inner, summaries[:half], depth + 1)
            right = await self._merge(inner, summaries[half:], depth + 1)
            summaries = [left, right]

        async def attempt(note: str | None) -> str:
            prompt = merge_prompt(
                summaries,
                previous_summary=job.previous_summary,
                instructions=_join(job.instructions, note),
                safeguard=job.safeguard,
            )
            return await self._ask_once(prompt, job.max_tokens, "merge")

        try:
            return await self._guarded(job, attempt)
        except SummaryFailedError as exc:
            log.warning("merging partial summaries failed (%s); keeping them side by side", exc)
            return _side_by_side(job.previous_summary, summaries)

    async def _guarded(
        self, job: SummaryJob, attempt: Callable[[str | None], Awaitable[str]]
    ) -> str:
        """One summary call, repeated once when safeguard headings are missing."""
        text = await attempt(None)
        if not job.safeguard:
            return text
        missing = missing_headings(text)
        if not missing:
            return text
        log.info("summary lacks headings %s; asking once more", ", ".join(missing))
        try:
            again = await attempt(retry_note(missing))
        except SummaryFailedError:
            return text
        return again if len(missing_headings(again)) < len(missing) else text

    # ---- turn prefix ---------------------------------------------------------------------

    async def _turn_prefix(self, job: SummaryJob, outcome: SummaryOutcome) -> str | None:
        conversation = serialize_conversation(list(job.turn_prefix))
        parts: list[str] = []
        budget = max(256, job.max_tokens // 2)

        def build(text: str) -> str:
            return turn_prefix_prompt(text, instructions=job.instructions)

        for piece in split_text(conversation, job.max_chunk_chars):
            try:
                parts.append(await self._ask(piece, build, budget, "turn_prefix"))
            except SummaryFailedError as exc:
                outcome.error = str(exc)
                return None
        return "\n\n".join(parts)

    # ---- one call ------------------------------------------------------------------------

    async def _ask(
        self,
        conversation: str,
        build: Callable[[str], str],
        max_tokens: int,
        purpose: str,
        depth: int = 0,
    ) -> str:
        """Summarise `conversation`, halving it when the model finds it too large."""
        request = SummaryRequest(
            system=SUMMARIZER_SYSTEM,
            prompt=build(conversation),
            max_tokens=max_tokens,
            purpose=purpose,
        )
        try:
            return await self._call(request)
        except ContextOverflowError as exc:
            if depth >= MAX_SPLIT_DEPTH or len(conversation) < 2000:
                raise SummaryFailedError(f"summary request too large: {exc}") from exc
            halves = split_text(conversation, len(conversation) // 2 + 1)
            parts = [
                await self._ask(half, build, max_tokens, purpose, depth + 1) for half in halves
            ]
            return "\n\n".join(parts)

    async def _ask_once(self, prompt: str, max_tokens: int, purpose: str) -> str:
        """A call whose input cannot be split (merging): too large simply fails."""
        request = SummaryRequest(
            system=SUMMARIZER_SYSTEM, prompt=prompt, max_tokens=max_tokens, purpose=purpose
        )
        try:
            return await self._call(request)
        except ContextOverflowError as exc:
            raise SummaryFailedError(f"summary request too large: {exc}") from exc

    async def _call(self, request: SummaryRequest) -> str:
        retry = self._retry
        last: BaseException | None = None
        for attempt in range(max(1, retry.attempts)):
            self.outcome.calls += 1
            try:
                text = (await self._summarizer(request)).strip()
            except (ContextOverflowError, TimeoutError):
                raise
            except ProviderError as exc:
                if not exc.retryable:
                    raise SummaryFailedError(str(exc)) from exc
                last = exc
            except Exception as exc:  # a plugin or scripted summariser: treat as transient
                last = exc
            else:
                if text:
                    return text
                last = None
            if attempt < retry.attempts - 1:
                await retry.sleep(retry.delay(attempt, last))
        reason = f"{type(last).__name__}: {last}" if last is not None else "empty summary"
        raise SummaryFailedError(reason)


def _join(*parts: str | None) -> str | None:
    text = "\n\n".join(p for p in parts if p)
    return text or None


def _side_by_side(previous: str | None, summaries: list[str]) -> str:
    sections = [f"Earlier record:\n{previous}"] if previous else []
    sections += [f"Part {i}:\n{text}" for i, text in enumerate(summaries, 1)]
    return "\n\n".join(sections)
