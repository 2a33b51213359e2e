"""Where history may be cut, and how it is chunked: tool pairs and code-mode chains stay whole."""

from __future__ import annotations

import pytest

from nodmix.compaction.chunking import (
    adaptive_chunk_ratio,
    chunk_items,
    is_oversized,
    max_chunk_tokens,
    split_by_token_share,
)
from nodmix.compaction.units import Item, build_items, find_cut, turn_start_before
from nodmix.messages import Message
from nodmix.sessions.entries import Entry, MessageEntry

from .builders import assistant, result, user, words

TS = "2026-01-02T03:04:05.000Z"


def entries(*messages: Message, nested: dict[int, str] | None = None) -> list[Entry]:
    nested = nested or {}
    out: list[Entry] = []
    for i, message in enumerate(messages, 1):
        out.append(
            MessageEntry(
                id=f"e{i}",
                parent_id=f"e{i - 1}" if i > 1 else None,
                timestamp=TS,
                message=message,
                parent_tool_call_id=nested.get(i),
            )
        )
    return out


def groups(items: list[Item], chunks: list[tuple[int, int]]) -> list[list[str]]:
    return [[items[i].entry_id for i in range(s, e)] for s, e in chunks]


def share(*messages: Message, parts: int = 2) -> list[list[str]]:
    items = build_items(entries(*messages))
    return groups(items, [(c.start, c.end) for c in split_by_token_share(items, parts)])


def test_equal_user_messages_split_into_equal_shares() -> None:
    big = words(4000)
    assert share(user(big), user(big), user(big), user(big)) == [["e1", "e2"], ["e3", "e4"]]


def test_six_messages_in_three_parts_keep_their_order() -> None:
    msgs = [user(words(2000, str(i))) for i in range(6)]
    flat = [e for g in share(*msgs, parts=3) for e in g]
    assert flat == [f"e{i}" for i in range(1, 7)]


def test_assistant_tool_call_stays_in_the_chunk_of_its_result() -> None:
    big = words(4000)
    got = share(
        user(big), assistant(big, "call_split"), result("call_split", words(800)), user(big)
    )
    assert any({"e2", "e3"} <= set(g) for g in got)
    assert sorted(e for g in got for e in g) == ["e1", "e2", "e3", "e4"]


def test_two_calls_keep_both_results_with_their_assistant() -> None:
    big = words(4000)
    got = share(
        user(big), assistant("", "call_a", "call_b"), result("call_a"), result("call_b"), user(big)
    )
    holder = next(g for g in got if "e2" in g)
    assert {"e3", "e4"} <= set(holder)


def test_a_late_result_pulls_the_message_in_between_into_its_unit() -> None:
    items = build_items(entries(assistant("", "c1"), user(words(800)), result("c1")))
    assert [i.cut for i in items] == [True, False, False]


def test_split_comes_after_a_completed_pair() -> None:
    big = words(4000)
    assert share(assistant(big, "c1"), result("c1", big), user(big)) == [["e1", "e2"], ["e3"]]


def test_split_comes_before_a_trailing_pair() -> None:
    big = words(4000)
    assert share(user(big), assistant(words(200), "c1"), result("c1", big)) == [
        ["e1"],
        ["e2", "e3"],
    ]


def test_an_aborted_call_does_not_hold_the_split() -> None:
    big = words(4000)
    got = share(assistant(big, "c1", stop="aborted"), user(big), user(big))
    assert got == [["e1"], ["e2", "e3"]]


def test_a_call_that_never_got_a_result_holds_the_cut_until_the_next_assistant() -> None:
    items = build_items(entries(user("a"), assistant("", "c1"), user("b"), assistant("x")))
    assert [i.cut for i in items] == [True, True, False, True]


def test_code_mode_exec_wait_chain_and_nested_calls_form_one_unit() -> None:
    msgs: list[Message] = [
        user("go"),
        assistant("", "x1", name="exec"),
        assistant("", "n1", name="read"),  # nested inside exec
        result("n1", name="read"),  # nested
        result("x1", '{"status": "waiting"}', name="exec"),
        assistant("", "w1", name="wait"),
        result("w1", '{"status": "completed"}', name="wait"),
        assistant("done"),
    ]
    items = build_items(entries(*msgs, nested={3: "x1", 4: "x1"}))
    assert [i.entry_id for i in items] == ["e1", "e2", "e5", "e6", "e7", "e8"]
    assert [i.entry_id for i in items if i.cut] == ["e1", "e2", "e8"]


def test_cut_keeps_about_the_tail_budget_and_lands_on_a_valid_item() -> None:
    msgs: list[Message] = []
    for n in range(10):
        msgs += [
            user(words(400, f"u{n}")),
            assistant("", f"c{n}"),
            result(f"c{n}", words(400)),
            assistant(words(400)),
        ]
    items = build_items(entries(*msgs))
    cut = find_cut(items, keep_tokens=600)
    assert cut is not None and items[cut].cut
    assert items[cut].turn_start  # a whole user turn starts the tail
    kept = sum(i.tokens for i in items[cut:])
    turn = sum(i.tokens for i in items[:4])
    assert 600 - turn <= kept <= 600 + max(i.tokens for i in items)


def test_history_that_fits_the_tail_budget_has_no_cut() -> None:
    items = build_items(entries(user("hi"), assistant("hello")))
    assert find_cut(items, keep_tokens=10_000) is None


def test_a_cut_inside_a_turn_knows_where_the_turn_started() -> None:
    items = build_items(
        entries(
            user("a"), assistant("b"), user("c"), assistant("", "c1"), result("c1"), assistant("d")
        )
    )
    assert turn_start_before(items, 5) == 2
    assert turn_start_before(items, 2) is None


def test_chunks_respect_the_token_limit_and_an_oversized_unit_is_its_own_chunk() -> None:
    msgs = [user(words(400, str(i))) for i in range(10)] + [user(words(20_000))]
    items = build_items(entries(*msgs))
    chunks = chunk_items(items, 400)
    assert chunks[-1].end - chunks[-1].start == 1 and chunks[-1].tokens > 400
    assert all(c.tokens * 1.2 <= 400 + items[c.start].tokens * 1.2 for c in chunks[:-1])
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)


def test_chunk_ratio_shrinks_when_messages_are_large_for_the_window() -> None:
    small = build_items(entries(user("tiny")))
    large = build_items(entries(user(words(40_000))))
    assert adaptive_chunk_ratio(small, 100_000) == 0.4
    assert adaptive_chunk_ratio(large, 20_000) == pytest.approx(0.15)
    assert max_chunk_tokens(large, 20_000) < max_chunk_tokens(small, 20_000)


def test_oversized_means_more_than_half_the_window() -> None:
    assert is_oversized(5_000, 8_000) and not is_oversized(3_000, 8_000)
