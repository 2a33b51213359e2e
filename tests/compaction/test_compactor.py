"""The built-in compaction on real transcripts: what is recorded, replayed and kept on disk."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import msgspec
import pytest

from nodmix.compaction.base import ProviderRequest, SummaryRequest
from nodmix.compaction.compactor import CompactionRequest, Compactor
from nodmix.compaction.prompts import STRICT_IDENTIFIERS
from nodmix.compaction.settings import CompactionSettings
from nodmix.compaction.summarize import SummaryRetry
from nodmix.config.schema import CompactionConfig
from nodmix.errors import ProviderAuthError
from nodmix.messages import UserMessage
from nodmix.sessions import CompactionEntry, Session, SessionManager, messages_for_model
from nodmix.sessions.entries import MessageEntry

from .builders import ScriptedSummarizer, assistant, headed, no_sleep, result, user, words

pytestmark = pytest.mark.anyio


def _settings(**config: object) -> CompactionSettings:
    return CompactionSettings.resolve(CompactionConfig(**config), context_window=100_000)  # type: ignore[arg-type]


def _conversation(session: Session, turns: int = 10, size: int = 800) -> None:
    for n in range(turns):
        session.append_message(user(f"question {n}: " + words(size, f"q{n}")))
        session.append_message(
            assistant("", f"c{n}", name="read", args={"path": f"src/file{n}.py"})
        )
        session.append_message(result(f"c{n}", words(size, f"r{n}"), name="read"))
        session.append_message(assistant(f"answer {n}: " + words(size, f"a{n}")))


def _compactor(
    manager: SessionManager, summarizer: ScriptedSummarizer, **config: object
) -> Compactor:
    return Compactor(
        settings=_settings(**config),
        summarizer=summarizer,
        sessions=manager,
        retry=SummaryRetry(sleep=no_sleep),
    )


def _file_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


async def test_compaction_appends_an_entry_and_the_replay_shows_summary_then_tail(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session)
    before = len(session.entries)
    summarizer = ScriptedSummarizer()
    result_ = await _compactor(manager, summarizer, keep_recent_tokens=1500).compact(
        session, CompactionRequest(trigger="auto")
    )
    assert result_.ok and result_.compacted
    assert result_.tokens_after is not None and result_.tokens_before is not None
    assert result_.tokens_after < result_.tokens_before
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry) and len(session.entries) == before + 1
    assert entry.summary.startswith("summary 1")
    assert entry.details["readFiles"][0] == "src/file0.py" and entry.details["modifiedFiles"] == []
    replay = messages_for_model(session.entries)
    first = replay[0]
    assert isinstance(first, UserMessage) and "summary 1" in first.text
    kept_ids = [e.id for e in session.entries if isinstance(e, MessageEntry)]
    assert entry.first_kept_entry_id in kept_ids
    assert replay[1].role == "user" and "question" in replay[1].text
    assert session.entry.compaction_count == 1
    # The full history is still on disk, untouched.
    lines = _file_lines(session.transcript.path)
    assert sum(1 for line in lines if line.get("type") == "message") == 40


async def test_a_failed_summary_records_nothing(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session)
    size = session.transcript.size_bytes

    def fail(request: SummaryRequest) -> str:
        raise ProviderAuthError("bad key")

    outcome = await _compactor(manager, ScriptedSummarizer(fail), keep_recent_tokens=1500).compact(
        session, CompactionRequest(trigger="auto")
    )
    assert not outcome.ok and not outcome.compacted and outcome.reason
    assert session.transcript.size_bytes == size and session.entry.compaction_count == 0


async def test_a_partial_summary_moves_the_cut_back_so_nothing_is_hidden_unsummarised(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session, turns=30, size=2000)
    calls = 0

    def second_fails(request: SummaryRequest) -> str:
        nonlocal calls
        calls += 1
        if request.purpose == "chunk" and calls > 1:
            raise ProviderAuthError("quota for this key is used up")
        return headed(f"part {calls}")

    settings = CompactionSettings.resolve(
        CompactionConfig(keep_recent_tokens=2000), context_window=20_000
    )
    compactor = Compactor(
        settings=settings, summarizer=ScriptedSummarizer(second_fails), sessions=manager
    )
    plan = compactor.plan(session, CompactionRequest(trigger="auto"))
    assert not isinstance(plan, str) and len(plan.chunks) > 2
    outcome = await compactor.compact(session, CompactionRequest(trigger="auto"))
    assert outcome.compacted
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry) and entry.details["partial"] is True
    first_kept = next(i for i in plan.items if i.entry_id == entry.first_kept_entry_id)
    assert first_kept.position == plan.items[plan.chunks[1].start].position


async def test_manual_compaction_without_a_tail_budget_is_a_clean_checkpoint(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session, turns=2)
    outcome = await _compactor(manager, ScriptedSummarizer()).compact(
        session, CompactionRequest(trigger="manual", instructions="Focus on file names")
    )
    assert outcome.compacted
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry) and entry.first_kept_entry_id == entry.id
    assert len(messages_for_model(session.entries)) == 1
    session.append_message(user("next"))
    assert [m.role for m in messages_for_model(session.entries)] == ["user", "user"]


async def test_instructions_reach_the_summariser(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session, turns=2)
    summarizer = ScriptedSummarizer()
    await _compactor(manager, summarizer, custom_instructions="Config focus").compact(
        session, CompactionRequest(trigger="manual", instructions="Focus on API design")
    )
    prompt = summarizer.requests[0].prompt
    assert "Additional focus:\nConfig focus\nFocus on API design" in prompt


async def test_a_second_compaction_folds_in_the_first_summary(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session)
    summarizer = ScriptedSummarizer()
    compactor = _compactor(manager, summarizer, keep_recent_tokens=1500)
    await compactor.compact(session, CompactionRequest(trigger="auto"))
    _conversation(session, turns=6)
    await compactor.compact(session, CompactionRequest(trigger="auto"))
    assert "<previous-summary>\nsummary 1" in summarizer.requests[-1].prompt
    assert session.entry.compaction_count == 2
    compactions = [e for e in session.entries if isinstance(e, CompactionEntry)]
    assert compactions[-1].details["readFiles"][0] == "src/file0.py"  # carried over


async def test_safeguard_appends_the_latest_user_requests_and_missing_identifiers(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    session.append_message(user("deploy build 3f9a1c2e to 10.0.0.7:8443 for ticket OPS-42"))
    session.append_message(assistant("Deploying."))
    _conversation(session, turns=4)
    await _compactor(manager, ScriptedSummarizer(lambda r: headed("plain"))).compact(
        session, CompactionRequest(trigger="manual")
    )
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry)
    for ident in ("3f9a1c2e", "10.0.0.7:8443", "OPS-42"):
        assert ident in entry.summary
    assert "Latest user messages" in entry.summary and "question 3" in entry.summary


async def test_a_plugin_provider_summary_is_used_and_marked(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session)
    seen: list[ProviderRequest] = []

    class Provider:
        async def summarize(self, request: ProviderRequest) -> str | None:
            seen.append(request)
            return headed("from the plugin")

    builtin = ScriptedSummarizer()
    compactor = Compactor(
        settings=_settings(keep_recent_tokens=1500, provider="mine"),
        summarizer=builtin,
        sessions=manager,
        provider=("mine", Provider()),
    )
    await compactor.compact(session, CompactionRequest(trigger="auto"))
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry)
    assert entry.summary.startswith("from the plugin") and entry.from_hook is True
    assert entry.details["provider"] == "mine" and builtin.requests == []
    assert seen[0].instructions == STRICT_IDENTIFIERS and seen[0].trigger == "auto"
    assert seen[0].messages[0].role == "user"


@pytest.mark.parametrize("failure", ["raise", "empty"])
async def test_a_failing_or_empty_provider_falls_back_to_the_builtin_summary(
    isolated_state: Path, failure: str
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session)

    class Provider:
        async def summarize(self, request: ProviderRequest) -> str | None:
            if failure == "raise":
                raise RuntimeError("plugin bug")
            return "   "

    builtin = ScriptedSummarizer()
    compactor = Compactor(
        settings=_settings(keep_recent_tokens=1500, provider="mine"),
        summarizer=builtin,
        sessions=manager,
        provider=("mine", Provider()),
    )
    outcome = await compactor.compact(session, CompactionRequest(trigger="auto"))
    assert outcome.compacted and len(builtin.requests) == 1
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry) and entry.from_hook is None


async def test_successor_transcript_carries_summary_and_tail_and_the_store_follows(
    isolated_state: Path,
) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    session.transcript.append_custom("plugin-state", {"cursor": 7})
    _conversation(session)
    duplicate = "please retry this long request again " * 2
    session.append_message(user(duplicate, ts=1000))
    session.append_message(user(duplicate, ts=2000))  # a channel retry storm
    session.append_message(assistant("done"))
    old_path = session.transcript.path
    old_id = session.session_id
    outcome = await _compactor(
        manager, ScriptedSummarizer(), keep_recent_tokens=1500, truncate_after_compaction=True
    ).compact(session, CompactionRequest(trigger="auto"))
    assert outcome.compacted and outcome.session_id == session.session_id != old_id
    assert outcome.session_file == str(session.transcript.path)
    # The store points at the successor; the old file keeps everything plus the checkpoint.
    stored = manager.store("main").get("agent:main:main")
    assert stored is not None and stored.session_file == session.transcript.path.name
    assert stored.compaction_count == 1
    old_lines = _file_lines(old_path)
    assert old_lines[-1]["type"] == "compaction"
    new_lines = _file_lines(session.transcript.path)
    assert new_lines[0]["parentSession"] == old_path.name
    assert new_lines[-1]["type"] == "compaction"
    assert any(line.get("customType") == "plugin-state" for line in new_lines)
    replay = messages_for_model(session.entries)
    assert "summary 1" in replay[0].text
    texts = [m.text for m in replay if isinstance(m, UserMessage)]
    assert texts.count(duplicate) == 1
    # Reopening through the manager finds the same active transcript.
    reopened = SessionManager(isolated_state, durable=False).open("agent:main:main")
    assert reopened.session_id == session.session_id
    assert messages_for_model(reopened.entries) == replay


async def test_a_timeout_keeps_the_chunks_summarised_so_far(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    _conversation(session, turns=30, size=2000)

    async def hangs_after_first(request: SummaryRequest) -> str:
        if summarizer_calls:
            await anyio.sleep_forever()
        summarizer_calls.append(request)
        return "first part"

    summarizer_calls: list[SummaryRequest] = []
    settings = msgspec.structs.replace(
        CompactionSettings.resolve(
            CompactionConfig(keep_recent_tokens=2000), context_window=20_000
        ),
        timeout_seconds=0.01,
    )
    compactor = Compactor(settings=settings, summarizer=hangs_after_first, sessions=manager)
    with anyio.fail_after(5):
        outcome = await compactor.compact(session, CompactionRequest(trigger="auto"))
    assert outcome.compacted
    entry = session.entries[-1]
    assert isinstance(entry, CompactionEntry)
    assert entry.details["timedOut"] is True and entry.details["partial"] is True
    assert entry.summary.startswith("Part 1:\nfirst part")


async def test_a_code_mode_exec_wait_chain_is_never_split_by_the_cut(isolated_state: Path) -> None:
    manager = SessionManager(isolated_state, durable=False)
    session = manager.open("agent:main:main")
    for n in range(8):
        session.append_message(user(f"task {n}"))
        session.append_message(assistant("", f"x{n}", name="exec", args={"code": words(600)}))
        session.append_message(assistant("", f"r{n}", name="read"), parent_tool_call_id=f"x{n}")
        session.append_message(
            result(f"r{n}", words(600), name="read"), parent_tool_call_id=f"x{n}"
        )
        session.append_message(result(f"x{n}", '{"status": "waiting"}', name="exec"))
        session.append_message(assistant("", f"w{n}", name="wait"))
        session.append_message(result(f"w{n}", words(600, "done"), name="wait"))
        session.append_message(assistant(f"finished {n}"))
    compactor = _compactor(
        manager, ScriptedSummarizer(), keep_recent_tokens=500, truncate_after_compaction=True
    )
    for keep in (300, 450, 600, 700):
        plan = compactor.plan(session, CompactionRequest(trigger="auto", token_budget=keep * 2))
        assert not isinstance(plan, str)
        first = plan.items[plan.cut].message
        assert not any(c.name == "wait" for c in getattr(first, "tool_calls", ()))
    outcome = await compactor.compact(session, CompactionRequest(trigger="auto"))
    assert outcome.compacted
    replay = messages_for_model(session.entries)
    assert "no result was recorded" not in str(replay)  # pairs intact, nothing repaired
    nested = [e for e in session.entries if isinstance(e, MessageEntry) and e.parent_tool_call_id]
    assert nested and all(str(e.parent_tool_call_id) in str(replay) for e in nested)


def _roles_and_texts(entries: list[object]) -> list[tuple[str, str]]:
    return [
        (e.message.role, e.message.text)  # type: ignore[attr-defined]
        for e in entries
        if isinstance(e, MessageEntry)
    ]


def test_retry_duplicates_keep_user_and_assistant_messages_alternating(
    isolated_state: Path,
) -> None:
    from nodmix.compaction.successor import drop_retry_duplicates

    long = "please retry this long request again " * 2
    session = SessionManager(isolated_state, durable=False).open("agent:main:main")
    for message in (
        user(long, ts=1000),
        assistant("first answer"),
        user(long, ts=2000),  # answered again: dropped with its turn
        assistant("", "c1", name="read"),
        result("c1", "file", name="read"),
        assistant("second answer"),
        user(long, ts=3000),  # the kept copy has its answer: these go with theirs
        user(long, ts=4000),
        assistant("third answer"),
        user("a new question that is long enough", ts=4500),
        user("a new question that is long enough", ts=4600),  # unanswered copy: dropped alone
        assistant("answer to the new question"),
        user("something else entirely, also long enough", ts=5000),
        assistant("fourth answer"),
        user("something else entirely, also long enough", ts=6000),  # the last turn: kept
        assistant("fifth answer"),
    ):
        session.append_message(message)
    kept = _roles_and_texts(drop_retry_duplicates(session.entries))
    assert kept == [
        ("user", long),
        ("assistant", "first answer"),
        ("user", "a new question that is long enough"),
        ("assistant", "answer to the new question"),
        ("user", "something else entirely, also long enough"),
        ("assistant", "fourth answer"),
        ("user", "something else entirely, also long enough"),
        ("assistant", "fifth answer"),
    ]
