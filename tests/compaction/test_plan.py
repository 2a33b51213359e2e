"""Planning a compaction over real transcripts: cut, split turns, boundaries, size."""

from __future__ import annotations

from pathlib import Path

from nodmix.compaction.accounting import flushed_since_compaction, reported_context_tokens
from nodmix.compaction.plan import CompactionPlan, plan_compaction
from nodmix.messages import Usage

from .builders import assistant, result, session, user, words


def _plan(
    state: Path, turns: int, *, keep: int, **kwargs: bool
) -> tuple[CompactionPlan | str, list[str]]:
    s = session(state)
    ids = []
    for n in range(turns):
        ids.append(s.append_message(user(words(400, f"u{n}"))).id)
        s.append_message(assistant(words(400, f"a{n}")))
    return plan_compaction(s.entries, keep_tokens=keep, summary_window=100_000, **kwargs), ids


def test_plan_summarises_the_head_and_keeps_a_tail_starting_at_a_user_turn(
    isolated_state: Path,
) -> None:
    plan, user_ids = _plan(isolated_state, 10, keep=500)
    assert isinstance(plan, CompactionPlan)
    assert plan.first_kept_entry_id(plan.cut) in user_ids
    assert plan.history_end == plan.cut and not plan.turn_prefix
    turn = plan.items[0].tokens + plan.items[1].tokens
    assert 500 - turn <= sum(i.tokens for i in plan.items[plan.cut :]) <= 500 + turn
    assert plan.chunks[0].start == 0 and plan.chunks[-1].end == plan.history_end


def test_a_short_conversation_has_nothing_to_compact_unless_forced(isolated_state: Path) -> None:
    plan, _ = _plan(isolated_state, 2, keep=10_000)
    assert isinstance(plan, str) and "nothing to compact" in plan
    s = session(isolated_state)
    forced = plan_compaction(s.entries, keep_tokens=10_000, summary_window=100_000, force=True)
    assert isinstance(forced, CompactionPlan)
    assert forced.items[forced.cut].message.role == "user" and forced.cut == 2


def test_hard_checkpoint_keeps_nothing(isolated_state: Path) -> None:
    plan, _ = _plan(isolated_state, 3, keep=10_000, hard_checkpoint=True)
    assert isinstance(plan, CompactionPlan)
    assert plan.cut == len(plan.items) and plan.first_kept_entry_id(plan.cut) is None


def test_a_cut_inside_a_long_tool_loop_summarises_the_turn_start_separately(
    isolated_state: Path,
) -> None:
    s = session(isolated_state)
    s.append_message(user("earlier question"))
    s.append_message(assistant("earlier answer"))
    s.append_message(user("please fix every file"))
    for n in range(12):
        s.append_message(assistant("", f"c{n}"))
        s.append_message(result(f"c{n}", words(800, f"r{n}")))
    plan = plan_compaction(s.entries, keep_tokens=600, summary_window=100_000)
    assert isinstance(plan, CompactionPlan)
    assert plan.history_end == 2  # the earlier exchange
    assert plan.turn_prefix[0].message.role == "user"
    assert plan.items[plan.cut].message.role == "assistant"


def test_planning_starts_after_the_latest_compaction(isolated_state: Path) -> None:
    s = session(isolated_state)
    for n in range(6):
        s.append_message(user(words(400, f"u{n}")))
        s.append_message(assistant(words(400, f"a{n}")))
    kept = s.entries[8].id
    s.transcript.append_compaction(summary="old summary", first_kept_entry_id=kept, tokens_before=9)
    s.append_message(user(words(400, "new")))
    s.append_message(assistant(words(400, "newer")))
    plan = plan_compaction(s.entries, keep_tokens=300, summary_window=100_000)
    assert isinstance(plan, CompactionPlan)
    assert plan.previous is not None and plan.previous.summary == "old summary"
    assert plan.items[0].entry_id == kept


def test_context_size_comes_from_the_last_usage_plus_an_estimate_of_what_followed(
    isolated_state: Path,
) -> None:
    s = session(isolated_state)
    s.append_message(user("hi"))
    s.append_message(assistant("hello", usage=Usage(input=5000, output=100, total_tokens=5100)))
    s.append_message(user("x" * 400))
    assert reported_context_tokens(s.entries) == 5100 + (400 + 16 + 3) // 4
    s.transcript.append_compaction(
        summary="s", first_kept_entry_id=s.entries[2].id, tokens_before=1
    )
    assert reported_context_tokens(s.entries) is None  # usage from before a compaction is stale


def test_a_memory_flush_counts_until_the_next_compaction(isolated_state: Path) -> None:
    s = session(isolated_state)
    s.append_message(user("hi"))
    assert not flushed_since_compaction(s.entries)
    s.transcript.append_custom("nodmix.memory-flush", {"ok": True})
    assert flushed_since_compaction(s.entries)
    s.transcript.append_compaction(
        summary="s", first_kept_entry_id=s.entries[0].id, tokens_before=1
    )
    assert not flushed_since_compaction(s.entries)
