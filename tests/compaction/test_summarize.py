"""The summarisation pipeline with a scripted summariser: staging, retries, partial failure."""

from __future__ import annotations

import pytest

from nodmix.compaction.base import SummaryRequest
from nodmix.compaction.chunking import Chunk
from nodmix.compaction.prompts import STRICT_IDENTIFIERS, SUMMARIZER_SYSTEM
from nodmix.compaction.summarize import SummaryJob, SummaryPipeline, SummaryRetry
from nodmix.compaction.units import Item, build_items
from nodmix.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderUnavailableError,
    RateLimitedError,
)
from nodmix.sessions.entries import Entry, MessageEntry

from .builders import ScriptedSummarizer, headed, user, words

pytestmark = pytest.mark.anyio


def _items(count: int, size: int = 4000) -> list[Item]:
    entries: list[Entry] = [
        MessageEntry(
            id=f"e{i}",
            parent_id=None,
            timestamp="2026-01-01T00:00:00.000Z",
            message=user(words(size, f"m{i}")),
        )
        for i in range(count)
    ]
    return build_items(entries)


def _job(items: list[Item], chunks: list[Chunk], **kwargs: object) -> SummaryJob:
    return SummaryJob(items=items, chunks=chunks, max_chunk_chars=100_000, **kwargs)  # type: ignore[arg-type]


class Delays:
    def __init__(self) -> None:
        self.seen: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seen.append(seconds)


def _retry(delays: Delays) -> SummaryRetry:
    return SummaryRetry(sleep=delays, rand=lambda: 0.5)


async def test_a_history_that_fits_one_chunk_is_summarised_in_one_call() -> None:
    items = _items(2)
    summarizer = ScriptedSummarizer()
    outcome = await SummaryPipeline(summarizer).run(
        _job(items, [Chunk(0, 2, 2000)], previous_summary="OLD", instructions=STRICT_IDENTIFIERS)
    )
    assert outcome.text == headed("summary 1") and outcome.chunks_done == 1
    (request,) = summarizer.requests
    assert request.system == SUMMARIZER_SYSTEM and request.purpose == "history"
    assert "<previous-summary>\nOLD" in request.prompt and STRICT_IDENTIFIERS in request.prompt


async def test_staged_summary_calls_each_chunk_then_merges_with_the_focus_once() -> None:
    items = _items(4)
    summarizer = ScriptedSummarizer()
    instructions = f"{STRICT_IDENTIFIERS}\n\nAdditional focus:\nTrack blockers."
    outcome = await SummaryPipeline(summarizer).run(
        _job(items, [Chunk(0, 2, 2000), Chunk(2, 4, 2000)], instructions=instructions)
    )
    assert [r.purpose for r in summarizer.requests] == ["chunk", "chunk", "merge"]
    assert all(STRICT_IDENTIFIERS in r.prompt for r in summarizer.requests)
    merge = summarizer.requests[-1].prompt
    assert merge.count("Additional focus:") == 1 and "summary 1" in merge and "summary 2" in merge
    assert outcome.merged and outcome.chunks_done == 2


async def test_a_failed_later_chunk_keeps_the_earlier_summary_and_reports_how_far_it_got() -> None:
    items = _items(3)

    def answer(request: SummaryRequest) -> str:
        if "part 3 of 3" in request.prompt:
            raise ProviderAuthError("bad key")
        return headed("ok")

    summarizer = ScriptedSummarizer(answer)
    outcome = await SummaryPipeline(summarizer).run(
        _job(items, [Chunk(0, 1, 1000), Chunk(1, 2, 1000), Chunk(2, 3, 1000)])
    )
    assert outcome.chunks_done == 2 and outcome.text is not None
    assert outcome.error is not None and "bad key" in outcome.error


async def test_a_failed_first_chunk_produces_no_summary() -> None:
    def answer(request: SummaryRequest) -> str:
        raise ProviderAuthError("bad key")

    outcome = await SummaryPipeline(ScriptedSummarizer(answer)).run(
        _job(_items(2), [Chunk(0, 1, 1000), Chunk(1, 2, 1000)])
    )
    assert outcome.text is None and outcome.chunks_done == 0


async def test_transient_errors_are_retried_with_backoff_then_succeed() -> None:
    failures = [RateLimitedError("slow down"), ProviderUnavailableError("503")]

    def answer(request: SummaryRequest) -> str:
        if failures:
            raise failures.pop(0)
        return headed("fine")

    delays = Delays()
    summarizer = ScriptedSummarizer(answer)
    outcome = await SummaryPipeline(summarizer, _retry(delays)).run(
        _job(_items(1), [Chunk(0, 1, 1)])
    )
    assert outcome.text == headed("fine") and len(summarizer.requests) == 3
    assert delays.seen == [0.5, 1.0]


async def test_retry_honours_retry_after_up_to_five_seconds() -> None:
    failures = [RateLimitedError("wait", retry_after=30.0)]

    def answer(request: SummaryRequest) -> str:
        if failures:
            raise failures.pop(0)
        return headed("fine")

    delays = Delays()
    await SummaryPipeline(ScriptedSummarizer(answer), _retry(delays)).run(
        _job(_items(1), [Chunk(0, 1, 1)])
    )
    assert delays.seen == [5.0]


async def test_errors_that_are_not_transient_are_not_retried() -> None:
    def answer(request: SummaryRequest) -> str:
        raise ProviderAuthError("no key")

    delays = Delays()
    summarizer = ScriptedSummarizer(answer)
    outcome = await SummaryPipeline(summarizer, _retry(delays)).run(
        _job(_items(1), [Chunk(0, 1, 1)])
    )
    assert outcome.text is None and len(summarizer.requests) == 1 and delays.seen == []


async def test_an_empty_answer_is_retried_and_three_empties_fail() -> None:
    delays = Delays()
    summarizer = ScriptedSummarizer(lambda r: "  ")
    outcome = await SummaryPipeline(summarizer, _retry(delays)).run(
        _job(_items(1), [Chunk(0, 1, 1)])
    )
    assert outcome.text is None and len(summarizer.requests) == 3
    assert outcome.error == "empty summary"


async def test_a_part_the_model_finds_too_large_is_halved() -> None:
    def answer(request: SummaryRequest) -> str:
        if len(request.prompt) > 4500:
            raise ContextOverflowError("prompt is too long")
        return "half"

    summarizer = ScriptedSummarizer(answer)
    outcome = await SummaryPipeline(summarizer).run(
        _job(_items(2, 2500), [Chunk(0, 2, 1300)], safeguard=False)
    )
    assert outcome.text == "half\n\nhalf"
    assert len(summarizer.requests) == 3


async def test_a_failed_merge_keeps_the_part_summaries_side_by_side() -> None:
    def answer(request: SummaryRequest) -> str:
        if request.purpose == "merge":
            raise ProviderAuthError("nope")
        return f"part-{len(summarizer.requests)}"

    summarizer = ScriptedSummarizer(answer)
    outcome = await SummaryPipeline(summarizer).run(
        _job(_items(2), [Chunk(0, 1, 1), Chunk(1, 2, 1)], previous_summary="EARLIER")
    )
    assert outcome.text == "Earlier record:\nEARLIER\n\nPart 1:\npart-1\n\nPart 2:\npart-2"


async def test_safeguard_asks_again_once_when_headings_are_missing() -> None:
    answers = ["no headings here", headed("better")]
    summarizer = ScriptedSummarizer(lambda r: answers.pop(0))
    outcome = await SummaryPipeline(summarizer).run(_job(_items(1), [Chunk(0, 1, 1)]))
    assert outcome.text == headed("better")
    assert "missing these required headings" in summarizer.requests[1].prompt


async def test_an_oversized_single_message_is_split_by_text_across_calls() -> None:
    items = _items(1, 30_000)
    summarizer = ScriptedSummarizer(lambda r: "piece")
    outcome = await SummaryPipeline(summarizer).run(
        SummaryJob(items=items, chunks=[Chunk(0, 1, 7500)], max_chunk_chars=8000, safeguard=False)
    )
    chunk_calls = [r for r in summarizer.requests if r.purpose == "chunk"]
    assert len(chunk_calls) == 4 and "part 4 of 4" in chunk_calls[-1].prompt
    assert outcome.text is not None and outcome.chunks_done == 1


async def test_the_split_turn_start_is_summarised_separately() -> None:
    items = _items(2)
    summarizer = ScriptedSummarizer(lambda r: f"{r.purpose} summary")
    outcome = await SummaryPipeline(summarizer).run(
        _job(items, [Chunk(0, 2, 2000)], turn_prefix=[user("fix the build")], safeguard=False)
    )
    assert outcome.turn_prefix == "turn_prefix summary"
    assert "fix the build" in summarizer.requests[-1].prompt
