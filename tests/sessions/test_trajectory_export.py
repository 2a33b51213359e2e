from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from nodmix.sessions.export import TRAJECTORY_FORMAT, build_trajectory, export_trajectory
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.session import Session
from tests.sessions.sessions_builders import assistant, result, user


def _session(state: Path) -> Session:
    return SessionManager(state, durable=False).open("work")


def test_code_mode_calls_appear_under_the_call_that_ran_them(isolated_state: Path) -> None:
    session = _session(isolated_state)
    session.append_message(user("find x"))
    session.append_message(assistant("running code", "exec_1"))
    session.append_message(assistant("", "n1"), parent_tool_call_id="exec_1")
    session.append_message(assistant("", "n1a"), parent_tool_call_id="n1")
    session.append_message(result("n1a", "deep"), parent_tool_call_id="n1")
    session.append_message(result("n1", "search hits"), parent_tool_call_id="exec_1")
    session.append_message(result("exec_1", "program output"))
    session.append_message(assistant("x is 3"))

    doc = export_trajectory(session)
    assert doc["format"] == TRAJECTORY_FORMAT
    assert (doc["sessionKey"], doc["agentId"]) == ("agent:main:work", "main")
    assert doc["sessionId"] == session.session_id
    assert [item["kind"] for item in doc["items"]] == ["user", "assistant", "assistant"]

    (exec_call,) = doc["items"][1]["toolCalls"]
    assert doc["items"][1]["content"] == [{"type": "text", "text": "running code"}]
    assert (exec_call["name"], exec_call["arguments"]) == ("tool_exec_1", {"arg": "exec_1"})
    assert exec_call["result"]["content"] == [{"type": "text", "text": "program output"}]
    (nested,) = exec_call["nested"]
    assert (nested["id"], nested["result"]["content"][0]["text"]) == ("n1", "search hits")
    (deeper,) = nested["nested"]
    assert (deeper["id"], deeper["result"]["content"][0]["text"]) == ("n1a", "deep")
    assert deeper["nested"] == []


def test_compactions_stay_in_place_with_their_summary(isolated_state: Path) -> None:
    session = _session(isolated_state)
    first = session.append_message(user("old"))
    session.transcript.append_compaction(
        summary="they said old",
        first_kept_entry_id=first.id,
        tokens_before=5000,
        details={"readFiles": []},
    )
    session.append_message(user("new"))
    items = export_trajectory(session)["items"]
    assert [i["kind"] for i in items] == ["user", "compaction", "user"]
    assert items[1]["summary"] == "they said old"
    assert items[1]["firstKeptEntryId"] == first.id
    assert items[1]["tokensBefore"] == 5000
    assert items[1]["details"] == {"readFiles": []}


def test_results_without_a_recorded_call_and_other_entries_are_kept(
    isolated_state: Path,
) -> None:
    session = _session(isolated_state)
    session.append_message(result("ghost", "orphan"))
    session.append_message(result("n9", "lost nested"), parent_tool_call_id="missing")
    session.transcript.append_model_change("openai", "gpt-5")
    session.transcript.append_custom_message("note", "remember this", display=False)
    items = export_trajectory(session)["items"]
    assert [i["kind"] for i in items] == [
        "toolResult",
        "toolResult",
        "model_change",
        "custom_message",
    ]
    assert items[0]["toolCallId"] == "ghost"
    assert items[1]["parentToolCallId"] == "missing"
    assert items[2]["modelId"] == "gpt-5"
    assert items[3]["content"] == "remember this"


def test_unanswered_calls_export_with_no_result(isolated_state: Path) -> None:
    session = _session(isolated_state)
    session.append_message(assistant("", "c1"))
    doc = build_trajectory(session.transcript.header, session.entries)
    assert doc["items"][0]["toolCalls"][0]["result"] is None


def test_export_is_plain_json(isolated_state: Path) -> None:
    session = _session(isolated_state)
    session.append_message(user("hi"))
    doc: dict[str, Any] = export_trajectory(session)
    assert json.loads(json.dumps(doc)) == doc
