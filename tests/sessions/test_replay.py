from __future__ import annotations

import copy

from nodmix.messages import AssistantMessage, Message, TextBlock, ToolResultMessage, UserMessage
from nodmix.sessions.entries import OpaqueEntry
from nodmix.sessions.replay import (
    COMPACTION_SUMMARY_INTRO,
    MISSING_RESULT_TEXT,
    context_entries,
    messages_for_model,
    repair_tool_pairing,
)
from tests.sessions.sessions_builders import TS, EntryChain, assistant, result, user


def _shape(messages: list[Message]) -> list[str]:
    """A compact picture of a message list: role plus text or tool-call ids."""
    out: list[str] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(f"user:{m.text}")
        elif isinstance(m, AssistantMessage):
            calls = ",".join(c.id for c in m.tool_calls)
            out.append(f"assistant:{m.text}" + (f"[{calls}]" if calls else ""))
        else:
            tag = "synthetic" if m.details == {"synthetic": "missing_result"} else m.text
            out.append(f"result:{m.tool_call_id}:{tag}")
    return out


def test_a_complete_conversation_is_replayed_unchanged() -> None:
    chain = EntryChain()
    messages = [user("hi"), assistant("", "c1", "c2"), result("c1"), result("c2"), assistant("ok")]
    for m in messages:
        chain.message(m)
    assert messages_for_model(chain.entries) == messages


def test_tool_call_without_result_gets_a_synthetic_error_right_after_its_message() -> None:
    chain = EntryChain()
    chain.message(user("run it"))
    chain.message(assistant("trying", "c1"))
    chain.message(user("hello? (the turn was interrupted)"))
    replayed = messages_for_model(chain.entries)
    assert _shape(replayed) == [
        "user:run it",
        "assistant:trying[c1]",
        "result:c1:synthetic",
        "user:hello? (the turn was interrupted)",
    ]
    synthetic = replayed[2]
    assert isinstance(synthetic, ToolResultMessage)
    assert synthetic.is_error
    assert synthetic.tool_name == "tool_c1"
    assert synthetic.content == (TextBlock(text=MISSING_RESULT_TEXT),)


def test_results_follow_call_order_with_recorded_ones_kept_and_gaps_filled() -> None:
    chain = EntryChain()
    chain.message(assistant("", "c1", "c2", "c3"))
    chain.message(result("c3", "third"))
    chain.message(result("c1", "first"))
    assert _shape(messages_for_model(chain.entries)) == [
        "assistant:[c1,c2,c3]",
        "result:c1:first",
        "result:c2:synthetic",
        "result:c3:third",
    ]


def test_interrupted_call_at_the_very_end_is_repaired() -> None:
    chain = EntryChain()
    chain.message(user("go"))
    chain.message(assistant("", "c1", stop="aborted"))
    assert _shape(messages_for_model(chain.entries)) == [
        "user:go",
        "assistant:[c1]",
        "result:c1:synthetic",
    ]


def test_results_whose_call_is_not_in_the_preceding_assistant_message_are_dropped() -> None:
    chain = EntryChain()
    chain.message(result("ghost"))  # before any assistant message
    chain.message(user("hi"))
    chain.message(assistant("", "c1"))
    chain.message(result("c1"))
    chain.message(assistant("next", "c2"))
    chain.message(result("c1", "late result for an older call"))
    chain.message(result("c2"))
    chain.message(assistant("plain"))
    chain.message(result("c2", "after a message without calls"))
    assert _shape(messages_for_model(chain.entries)) == [
        "user:hi",
        "assistant:[c1]",
        "result:c1:ok",
        "assistant:next[c2]",
        "result:c2:ok",
        "assistant:plain",
    ]


def test_a_repeated_result_for_one_call_is_dropped() -> None:
    chain = EntryChain()
    chain.message(assistant("", "c1"))
    chain.message(result("c1", "first"))
    chain.message(result("c1", "again"))
    assert _shape(messages_for_model(chain.entries)) == ["assistant:[c1]", "result:c1:first"]


def test_a_result_recorded_after_another_message_moves_up_to_its_call() -> None:
    chain = EntryChain()
    chain.message(assistant("", "c1"))
    chain.message(user("steer: also check b"))
    chain.message(result("c1"))
    assert _shape(messages_for_model(chain.entries)) == [
        "assistant:[c1]",
        "result:c1:ok",
        "user:steer: also check b",
    ]


def test_failed_assistant_message_without_content_is_dropped() -> None:
    chain = EntryChain()
    chain.message(user("hi"))
    failed = AssistantMessage(content=(), stop_reason="error", error_message="HTTP 500")
    chain.message(failed)
    chain.message(user("try again"))
    errored_with_text = assistant("partial", stop="error")
    chain.message(errored_with_text)
    assert _shape(messages_for_model(chain.entries)) == [
        "user:hi",
        "user:try again",
        "assistant:partial",
    ]


def test_consecutive_user_messages_are_kept_as_they_are() -> None:
    chain = EntryChain()
    chain.message(user("a"))
    chain.message(user("b"))
    assert _shape(messages_for_model(chain.entries)) == ["user:a", "user:b"]


def test_calls_made_inside_a_code_mode_program_are_not_replayed() -> None:
    chain = EntryChain()
    chain.message(user("search"))
    chain.message(assistant("", "exec_1"))
    chain.message(assistant("", "n1"), nested_in="exec_1")
    chain.message(result("n1", "nested result"), nested_in="exec_1")
    chain.message(assistant("", "n2"), nested_in="n1")
    chain.message(result("exec_1", "program output"))
    assert _shape(messages_for_model(chain.entries)) == [
        "user:search",
        "assistant:[exec_1]",
        "result:exec_1:program output",
    ]


def test_compaction_summary_replaces_history_before_the_first_kept_entry() -> None:
    chain = EntryChain()
    chain.message(user("old question"))
    chain.message(assistant("old answer"))
    kept = chain.message(user("recent question"))
    chain.message(assistant("recent answer"))
    chain.compaction("they discussed X", first_kept=kept)
    chain.message(user("new question"))
    replayed = messages_for_model(chain.entries)
    assert _shape(replayed)[1:] == [
        "user:recent question",
        "assistant:recent answer",
        "user:new question",
    ]
    summary = replayed[0]
    assert isinstance(summary, UserMessage)
    assert summary.text == (
        f"{COMPACTION_SUMMARY_INTRO}\n\n<summary>\nthey discussed X\n</summary>"
    )
    assert summary.timestamp == 1767323045000  # the compaction entry's time


def test_only_the_latest_compaction_counts() -> None:
    chain = EntryChain()
    chain.message(user("one"))
    first_kept = chain.message(user("two"))
    chain.compaction("summary A", first_kept=first_kept)
    chain.message(user("three"))
    chain.compaction("summary B", first_kept=first_kept)  # keeps entries across compaction A
    chain.message(user("four"))
    replayed = messages_for_model(chain.entries)
    texts = _shape(replayed)
    assert "summary B" in texts[0]
    assert texts[1:] == ["user:two", "user:three", "user:four"]
    assert not any("summary A" in t for t in texts)


def test_compaction_that_keeps_nothing_continues_from_the_summary_alone() -> None:
    chain = EntryChain()
    chain.message(user("old"))
    chain.compaction("everything so far", first_kept="not-an-entry")
    chain.message(user("after"))
    compaction, kept = context_entries(chain.entries)
    assert compaction is not None
    assert [e.id for e in kept] == ["e3"]
    assert _shape(messages_for_model(chain.entries))[1:] == ["user:after"]


def test_a_kept_tail_that_starts_mid_tool_call_is_still_valid() -> None:
    chain = EntryChain()
    chain.message(assistant("", "c1"))
    first_kept = chain.message(result("c1"))  # its call was summarised away
    chain.message(user("next"))
    chain.compaction("s", first_kept=first_kept)
    assert _shape(messages_for_model(chain.entries))[1:] == ["user:next"]


def test_custom_messages_are_user_text_and_other_entries_are_not_context() -> None:
    chain = EntryChain()
    chain.message(user("hi"))
    chain.custom({"cursor": 1})
    chain.custom_message("reminder: be brief")
    entries = [
        *chain.entries,
        OpaqueEntry(type="future", id="f", parent_id="e3", timestamp=TS, raw={"type": "future"}),
    ]
    assert _shape(messages_for_model(entries)) == ["user:hi", "user:reminder: be brief"]


def test_replay_leaves_its_input_untouched() -> None:
    chain = EntryChain()
    chain.message(assistant("", "c1"))
    chain.message(result("orphan"))
    before = copy.deepcopy(chain.entries)
    messages_for_model(chain.entries)
    assert chain.entries == before


def test_repair_accepts_any_iterable_of_messages() -> None:
    repaired = repair_tool_pairing(iter([assistant("", "c1", "c1")]))
    assert _shape(repaired) == ["assistant:[c1,c1]", "result:c1:synthetic"]
