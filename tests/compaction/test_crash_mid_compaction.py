"""A process killed mid-compaction keeps the session's context.

With `truncateAfterCompaction` the session index moves to a successor transcript. The process is
killed (`NODMIX_CRASH_AT`, a real SIGKILL) right after that switch: the next turn must still
send the summary and the kept turns. A successor left without them by an earlier version is
put right when the session is opened, or by `nodmix sessions repair`.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from nodmix.sessions import SessionManager
from nodmix.sessions.entries import CompactionEntry, MessageEntry, iso_now
from nodmix.sessions.jsonl import encode_line
from nodmix.sessions.replay import messages_for_model
from nodmix.testing.model_server import ScriptedModelServer
from tests.support.cli import run_nodmix

from ..context.runtime_support import write_config
from .builders import assistant, user
from .test_cli_compaction import chat_lines, chat_requests, respond

pytestmark = pytest.mark.integration

SUMMARY = "EARLIER: the user sent numbered notes"


def _sent_texts(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [json.dumps(m["content"]) for m in messages]


def test_a_kill_right_after_the_successor_switch_keeps_summary_and_recent_turns(
    isolated_state: Path,
) -> None:
    with ScriptedModelServer(respond) as server:
        write_config(isolated_state, server.base_url, compaction={"truncateAfterCompaction": True})
        crashed = run_nodmix(
            isolated_state,
            "agent",
            "--local",
            "--chat",
            stdin=chat_lines(12),
            env={"NODMIX_CRASH_AT": "sessions.successor-switched"},
        )
        assert crashed.returncode == -signal.SIGKILL, crashed.stderr
        after = run_nodmix(isolated_state, "agent", "--local", "-m", "what came before?")
        assert after.returncode == 0, after.stderr
        sent = _sent_texts(chat_requests(server)[-1])
    assert SUMMARY in sent[1]  # the summary, right after the system prompt
    assert any("note " in text for text in sent[2:-1])  # and the turns kept verbatim
    assert "what came before?" in sent[-1]
    listed = json.loads(run_nodmix(isolated_state, "sessions", "list", "--all", "--json").stdout)
    assert sorted(row["status"] for row in listed) == ["continued", "current"]


def _broken_successor(state: Path) -> Path:
    """What a crash right after the switch left behind before the seed came first: the old
    file ends with the compaction, the index names a successor holding only its header."""
    manager = SessionManager(state, durable=False)
    session = manager.open("agent:main:main")
    for n in range(4):
        session.append_message(user(f"question {n}"))
        session.append_message(assistant(f"answer {n}"))
    kept = session.entries[-2].id
    session.transcript.append_compaction(
        summary="SUMMARY of questions 0-2", first_kept_entry_id=kept, tokens_before=900
    )
    old = session.transcript.path
    manager.rotate("agent:main:main")
    manager.close()
    return old


def test_repairing_the_old_file_restores_its_successor(isolated_state: Path) -> None:
    old = _broken_successor(isolated_state)
    done = run_nodmix(isolated_state, "sessions", "repair", old.stem)
    assert done.returncode == 0, done.stderr
    assert f"restored the compaction summary and 2 kept entries from {old.name}" in done.stdout


def test_opening_a_successor_without_its_seed_restores_it_from_the_old_file(
    isolated_state: Path,
) -> None:
    old = _broken_successor(isolated_state)
    later = SessionManager(isolated_state, durable=False)
    broken = later.open("agent:main:main")
    # (opening already restored it; a turn that ran on the bare file is kept after the seed)
    assert broken.transcript.header.parent_session == old.name
    replay = messages_for_model(broken.entries)
    assert "SUMMARY of questions 0-2" in replay[0].text
    assert [m.text for m in replay[1:]] == ["question 3", "answer 3"]
    assert list(broken.transcript.path.parent.glob(f"{broken.transcript.path.name}.bak-*"))


def test_turns_run_on_a_bare_successor_stay_after_the_restored_seed(isolated_state: Path) -> None:
    _broken_successor(isolated_state)
    bare = SessionManager(isolated_state, durable=False, read_only=True).open("agent:main:main")
    # A turn that ran without its context (an earlier version opened the file as it was).
    path = bare.transcript.path
    parent = None
    with path.open("ab") as fh:
        for n, message in enumerate((user("question 4"), assistant("answer 4, without context"))):
            entry = MessageEntry(
                id=f"late{n}", parent_id=parent, timestamp=iso_now(), message=message
            )
            fh.write(encode_line(path, entry))
            parent = entry.id
    done = run_nodmix(isolated_state, "sessions", "repair", "main")
    assert done.returncode == 0, done.stderr
    assert "restored the compaction summary and 2 kept entries" in done.stdout
    assert "(2 later entries kept after them)" in done.stdout
    reopened = SessionManager(isolated_state, durable=False).open("agent:main:main")
    kinds = [type(e).__name__ for e in reopened.entries]
    assert kinds == ["MessageEntry"] * 2 + ["CompactionEntry"] + ["MessageEntry"] * 2
    assert isinstance(reopened.entries[2], CompactionEntry)
    replay = [m.text for m in messages_for_model(reopened.entries)]
    assert replay[1:] == ["question 3", "answer 3", "question 4", "answer 4, without context"]
    again = run_nodmix(isolated_state, "sessions", "repair", "main")
    assert "nothing to repair" in again.stdout
