"""Compaction inside the agent loop: threshold, overflow recovery, pruning, memory flush."""

from __future__ import annotations

from pathlib import Path

import pytest

from nodmix.compaction.accounting import FLUSH_ENTRY_TYPE
from nodmix.compaction.memory_flush import DEFAULT_FLUSH_PROMPT
from nodmix.config.schema import CompactionConfig, MemoryFlushConfig
from nodmix.context.base import (
    AssembleParams,
    AssembleResult,
    CompactParams,
    CompactResult,
    ContextEngineInfo,
    IngestParams,
)
from nodmix.context.overflow import ContextOverflowUnrecoveredError
from nodmix.context.pruning import IMAGE_NOTE
from nodmix.context.tokens import estimate_tokens
from nodmix.errors import RateLimitedError
from nodmix.events import CompactionEvent, TextDeltaEvent
from nodmix.hooks import CompactionInfo, Registered
from nodmix.messages import ToolResultMessage, UserMessage
from nodmix.providers.base import ModelRequest
from nodmix.providers.fake import ModelError, ModelReply
from nodmix.sessions import CompactionEntry, CustomEntry, messages_for_model
from nodmix.sessions.entries import MessageEntry
from nodmix.tools import FunctionTool, ToolContext, ToolResult

from .builders import assistant, headed, result, user, words
from .harness import Harness, is_summary_request

pytestmark = pytest.mark.anyio

OVERFLOW = "This model's maximum context length is 8192 tokens. However, you requested 9000 tokens."


def chat(request: ModelRequest) -> ModelReply:
    if is_summary_request(request):
        return ModelReply.text(headed(f"SUMMARY({len(request.messages[0].text)})"))
    last = request.messages[-1]
    return ModelReply.text("reply to " + getattr(last, "text", "")[:30] + " " + words(600, "r"))


def _user_texts(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if isinstance(m, UserMessage)]


async def test_long_conversation_compacts_automatically_and_keeps_answering(
    isolated_state: Path,
) -> None:
    h = Harness(isolated_state, chat, window=6000)
    for n in range(14):
        reply = await h.turn(f"turn {n}: " + words(900, f"t{n}"))
        assert reply.stop_reason == "stop"
    session = h.session
    assert session.entry.compaction_count >= 2
    last = h.chat_requests[-1]
    texts = _user_texts(last)
    assert "SUMMARY(" in texts[0]  # the summary stands in for the oldest turns
    assert not any(t.startswith("turn 0:") for t in texts)
    assert texts[-1].startswith("turn 13:")
    # Every request stayed inside the budget; nothing was lost on disk.
    budget = 6000 - 3000
    for request in h.chat_requests:
        assert estimate_tokens(request.messages) < budget
    users = [e for e in session.entries if isinstance(e, MessageEntry) and e.message.role == "user"]
    assert len(users) == 14


async def test_a_provider_overflow_error_is_recovered_by_compaction_and_retry(
    isolated_state: Path,
) -> None:
    failed_once = False

    def respond(request: ModelRequest) -> ModelReply | ModelError:
        nonlocal failed_once
        if is_summary_request(request):
            return ModelReply.text(headed("condensed"))
        if len(request.messages) > 6 and not failed_once:
            failed_once = True
            return ModelError(400, OVERFLOW)
        return ModelReply.text("fine")

    h = Harness(isolated_state, respond, window=200_000)
    for n in range(4):
        await h.turn(f"turn {n}: " + words(2000, f"t{n}"))
    assert failed_once and h.session.entry.compaction_count == 1
    retry = h.chat_requests[-1]
    assert "condensed" in _user_texts(retry)[0]
    phases = [(e.phase, e.trigger) for e in h.events if isinstance(e, CompactionEvent)]
    assert ("start", "overflow") in phases and ("end", "overflow") in phases


async def test_overflow_on_every_attempt_stops_after_three_compactions_with_advice(
    isolated_state: Path,
) -> None:
    def respond(request: ModelRequest) -> ModelReply | ModelError:
        if is_summary_request(request):
            return ModelReply.text(headed("condensed"))
        return ModelError(400, "prompt is too long: 208423 tokens > 200000 maximum")

    h = Harness(isolated_state, respond, window=200_000)
    session = h.session
    for n in range(40):
        session.append_message(user(f"old {n}: " + words(3000, f"o{n}")))
        session.append_message(assistant(words(3000, f"a{n}")))
    with pytest.raises(ContextOverflowUnrecoveredError) as caught:
        await h.turn("one more")
    error = caught.value
    assert error.kind == "context_overflow" and error.compactions == 3
    assert "/compact" in str(error) and "/new" in str(error)
    assert len(h.chat_requests) == 4 and h.session.entry.compaction_count == 3


async def test_nothing_left_to_compact_ends_the_turn_with_the_same_advice(
    isolated_state: Path,
) -> None:
    def respond(request: ModelRequest) -> ModelError:
        return ModelError(400, "ollama error: context length exceeded, too many tokens")

    h = Harness(isolated_state, respond, window=200_000)
    with pytest.raises(ContextOverflowUnrecoveredError) as caught:
        await h.turn("a single message that is somehow too large")
    assert caught.value.compactions == 0 and len(h.chat_requests) == 1


async def test_a_providers_own_summarisation_failure_is_not_answered_with_compaction(
    isolated_state: Path,
) -> None:
    def respond(request: ModelRequest) -> ModelError:
        return ModelError(
            400,
            "request_too_large: summarization failed - Request size exceeds model context window",
        )

    h = Harness(isolated_state, respond, window=200_000)
    with pytest.raises(ContextOverflowUnrecoveredError) as caught:
        await h.turn("hi")
    assert caught.value.kind == "compaction_failure" and h.summary_requests == []


async def test_rate_limits_mentioning_tokens_are_not_context_overflow(isolated_state: Path) -> None:
    def respond(request: ModelRequest) -> ModelError:
        return ModelError(429, "Rate limit reached: tokens per minute (TPM) exceeded")

    h = Harness(isolated_state, respond, window=200_000)
    with pytest.raises(RateLimitedError):
        await h.turn("hi")
    assert h.session.entry.compaction_count == 0 and h.summary_requests == []


async def test_mode_off_never_compacts(isolated_state: Path) -> None:
    def respond(request: ModelRequest) -> ModelError:
        return ModelError(400, "context_length_exceeded")

    h = Harness(isolated_state, respond, window=200_000, compaction=CompactionConfig(mode="off"))
    session = h.session
    for n in range(10):
        session.append_message(user(words(2000, f"o{n}")))
        session.append_message(assistant(words(2000, f"a{n}")))
    with pytest.raises(ContextOverflowUnrecoveredError):
        await h.turn("hi")
    assert h.summary_requests == [] and h.session.entry.compaction_count == 0


async def test_old_tool_results_are_trimmed_in_the_request_but_kept_whole_on_disk(
    isolated_state: Path,
) -> None:
    big = words(9000, "log")
    calls = iter(range(100))

    async def fetch(args: dict[str, object], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(big)

    def respond(request: ModelRequest) -> ModelReply:
        results = [m for m in request.messages if isinstance(m, ToolResultMessage)]
        if len(results) < 6:
            return ModelReply.tool_call("fetch", {}, id=f"call_{next(calls)}")
        return ModelReply.text("all fetched")

    tool = FunctionTool.create(fetch, name="fetch", description="fetch a log")
    h = Harness(isolated_state, respond, window=32_000, tools=[tool], flush=False)
    await h.turn("fetch six logs")
    final = h.chat_requests[-1]
    results = [m for m in final.messages if isinstance(m, ToolResultMessage)]
    assert len(results) == 6
    trimmed = [r for r in results if "left out of the request" in r.text]
    assert len(trimmed) == 3 and all(r.text != big for r in trimmed)
    assert [r.text for r in results[-3:]] == [big] * 3
    on_disk = [e.message for e in h.session.entries if isinstance(e, MessageEntry)]
    assert all(m.text == big for m in on_disk if isinstance(m, ToolResultMessage))
    assert h.session.entry.compaction_count == 0
    assert IMAGE_NOTE not in final.messages[0].text


async def test_memory_flush_writes_notes_silently_before_compaction(isolated_state: Path) -> None:
    refusals: list[str] = []

    def respond(request: ModelRequest) -> ModelReply:
        if is_summary_request(request):
            return ModelReply.text(headed("condensed"))
        last = request.messages[-1]
        if isinstance(last, UserMessage) and last.text.startswith("[Housekeeping"):
            return ModelReply.tool_call(
                "write", {"path": "MEMORY.md", "content": "- user likes terse answers\n"}
            )
        if isinstance(last, ToolResultMessage) and not last.is_error:
            # Try to write outside the memory files too: the flush must refuse it.
            return ModelReply.tool_call("write", {"path": "secrets.txt", "content": "x"})
        if isinstance(last, ToolResultMessage):
            refusals.append(last.text)
            return ModelReply.text("saved the preference")
        return ModelReply.text("ok " + words(600, "r"))

    h = Harness(
        isolated_state,
        respond,
        window=6000,
        compaction=CompactionConfig(memory_flush=MemoryFlushConfig(soft_threshold_tokens=1500)),
    )
    for n in range(8):
        await h.turn(f"turn {n}: " + words(700, f"t{n}"))
    workspace = h.agent.workspace
    assert (workspace / "MEMORY.md").read_text(encoding="utf-8") == "- user likes terse answers\n"
    assert not (workspace / "secrets.txt").exists()
    assert refusals and "only MEMORY.md and memory/*.md" in refusals[0]
    session = h.session
    flushes = [
        e
        for e in session.entries
        if isinstance(e, CustomEntry) and e.custom_type == FLUSH_ENTRY_TYPE
    ]
    assert flushes and flushes[0].data["files"] == ["MEMORY.md"]
    # The housekeeping turn is neither in the transcript's messages nor replayed to the model.
    texts = [getattr(e.message, "text", "") for e in session.entries if isinstance(e, MessageEntry)]
    assert not any("Housekeeping" in t or "saved the preference" in t for t in texts)
    assert not any(
        "Housekeeping" in str(r.messages)
        for r in h.chat_requests
        if "turn 7" in str(r.messages[-1])
    )
    # ... and never streamed to the user.
    streamed = "".join(e.text for e in h.events if isinstance(e, TextDeltaEvent))
    assert "saved the preference" not in streamed
    flush_prompt = DEFAULT_FLUSH_PROMPT.split("{date}")[0]
    assert any(flush_prompt[:40] in str(r.messages[-1]) for r in h.provider.requests)


async def test_compaction_hooks_see_the_trigger_the_summary_and_the_sizes(
    isolated_state: Path,
) -> None:
    seen: list[tuple[str, CompactionInfo]] = []

    async def before(info: CompactionInfo) -> None:
        seen.append(("before", info))

    async def after(info: CompactionInfo) -> None:
        seen.append(("after", info))

    async def broken(info: CompactionInfo) -> None:
        raise RuntimeError("hook bug")

    h = Harness(isolated_state, chat, window=6000, compaction=CompactionConfig(notify_user=True))
    h.hooks.before_compaction.extend([Registered("p", before), Registered("q", broken)])
    h.hooks.after_compaction.append(Registered("p", after))
    for n in range(8):
        await h.turn(f"turn {n}: " + words(900, f"t{n}"))
    kinds = [k for k, _ in seen]
    assert kinds[:2] == ["before", "after"]
    _, done = seen[1]
    assert done.trigger == "auto" and done.summary and "SUMMARY(" in done.summary
    assert done.tokens_after is not None and done.tokens_after < done.tokens_before
    notices = [e.message for e in h.events if isinstance(e, CompactionEvent) and e.message]
    assert any("compacted" in n for n in notices)


class OwningEngine:
    """A plugin-style engine that owns compaction and records the calls."""

    info = ContextEngineInfo(id="owner", name="Owner", owns_compaction=True)

    def __init__(self) -> None:
        self.compactions: list[CompactParams] = []

    async def ingest(self, params: IngestParams) -> None:
        return None

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        return AssembleResult(
            messages=params.messages, estimated_tokens=estimate_tokens(params.messages)
        )

    async def compact(self, params: CompactParams) -> CompactResult:
        self.compactions.append(params)
        return CompactResult(ok=True, compacted=False, reason="the engine decides")


async def test_an_engine_that_owns_compaction_is_only_asked_on_overflow(
    isolated_state: Path,
) -> None:
    overflow = iter([False, False, False, True])

    def respond(request: ModelRequest) -> ModelReply | ModelError:
        if next(overflow, False):
            return ModelError(400, "context_length_exceeded")
        return ModelReply.text(words(2000, "r"))

    engine = OwningEngine()
    h = Harness(isolated_state, respond, window=6000, engine=engine)
    for n in range(3):
        await h.turn(f"turn {n}: " + words(1500, f"t{n}"))
    assert engine.compactions == []  # past the threshold, but the engine owns compaction
    with pytest.raises(ContextOverflowUnrecoveredError):
        await h.turn("once more")
    assert [p.trigger for p in engine.compactions] == ["overflow"]


async def test_the_byte_guard_moves_a_large_session_to_a_successor_before_the_turn(
    isolated_state: Path,
) -> None:
    h = Harness(
        isolated_state,
        chat,
        window=200_000,
        compaction=CompactionConfig(
            max_active_transcript_bytes="20kb",
            truncate_after_compaction=True,
            keep_recent_tokens=500,
        ),
    )
    session = h.session
    for n in range(12):
        session.append_message(user(words(1500, f"u{n}")))
        session.append_message(assistant(words(1500, f"a{n}")))
        session.append_message(result("x", "y"))
    old_path = session.transcript.path
    await h.turn("and now?")
    session = h.session
    assert session.transcript.path != old_path and old_path.exists()
    assert session.transcript.size_bytes < 20 * 1024
    assert session.entry.compaction_count == 1
    replay = messages_for_model(session.entries)
    assert "SUMMARY(" in replay[0].text
    assert replay[-2].text == "and now?"
    compactions = [e for e in session.entries if isinstance(e, CompactionEntry)]
    assert compactions and compactions[0].details["trigger"] == "budget"


class WindowingEngine:
    """Sends only the newest message; says whether its window can hide an overflow."""

    def __init__(self, h: Harness, authority: str) -> None:
        self.h = h
        self.authority = authority
        self.info = ContextEngineInfo(id="window", name="Window")

    async def ingest(self, params: IngestParams) -> None:
        return None

    async def assemble(self, params: AssembleParams) -> AssembleResult:
        last = list(params.messages[-1:])
        return AssembleResult(
            messages=last,
            estimated_tokens=estimate_tokens(last),
            prompt_authority=self.authority,  # type: ignore[arg-type]
        )

    async def compact(self, params: CompactParams) -> CompactResult:
        return await self.h.service.compact_with_runtime(params)


@pytest.mark.parametrize(
    ("authority", "compactions"), [("assembled", 0), ("preassembly_may_overflow", 1)]
)
async def test_prompt_authority_decides_whether_the_hidden_history_counts(
    isolated_state: Path, authority: str, compactions: int
) -> None:
    h = Harness(isolated_state, chat, window=8000, flush=False)
    h.engine = WindowingEngine(h, authority)
    session = h.session
    for n in range(12):
        session.append_message(user(words(1200, f"u{n}")))
        session.append_message(assistant(words(1200, f"a{n}")))
    await h.turn("small")
    assert h.session.entry.compaction_count == compactions
    assert [m.role for m in h.chat_requests[-1].messages] == ["user"]


async def test_a_failing_summariser_is_tried_once_per_turn_and_the_turn_still_answers(
    isolated_state: Path,
) -> None:
    steps = iter(range(100))

    async def fetch(args: dict[str, object], ctx: ToolContext) -> ToolResult:
        return ToolResult.text(words(1500, "out"))

    def respond(request: ModelRequest) -> ModelReply | ModelError:
        if is_summary_request(request):
            return ModelError(503, "summariser is down")
        if len([m for m in request.messages if isinstance(m, ToolResultMessage)]) < 6:
            return ModelReply.tool_call("fetch", {}, id=f"call_{next(steps)}")
        return ModelReply.text("done anyway")

    tool = FunctionTool.create(fetch, name="fetch", description="fetch")
    h = Harness(isolated_state, respond, window=6000, tools=[tool], flush=False)
    session = h.session
    for n in range(4):
        session.append_message(user(words(1200, f"u{n}")))
        session.append_message(assistant(words(1200, f"a{n}")))
    result_ = await h.turn("go")
    assert result_.reply == "done anyway"
    assert len(h.summary_requests) <= 3  # one compaction attempt, with its retries
    assert h.session.entry.compaction_count == 0
    failed = [e for e in h.events if isinstance(e, CompactionEvent) and e.phase == "failed"]
    assert len(failed) == 1
