"""`nodmix sessions repair|list --all|rename|delete`, and naming a session by id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from nodmix.cli.main import main
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.session import Session
from nodmix.sessions.transcript import Transcript
from tests.sessions.sessions_builders import assistant, result, user


def _chat(state: Path, key: str = "work") -> Session:
    session = SessionManager(state, durable=False).open(key)
    session.append_message(user("where is the config"))
    session.append_message(assistant("looking", "c1"))
    session.append_message(result("c1", "nodmix.json"))
    session.append_message(assistant("in nodmix.json"))
    return session


def _nodmix(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NODMIX_STATE_DIR": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "nodmix", *args],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        check=False,
    )


def test_a_corrupt_middle_line_is_shown_as_skipped_and_repair_rewrites_the_file(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _chat(isolated_state)
    path = session.transcript.path
    lines = path.read_bytes().splitlines(keepends=True)
    original = b"".join([*lines[:3], b'{"type":"message","id":"zz", torn\n', *lines[3:]])
    path.write_bytes(original)  # line 4 is damaged; line 5 names the entry before it as parent

    assert main(["sessions", "show", "work"]) == 0
    out = capsys.readouterr().out
    assert "warning: line 4 skipped (not valid JSON)" in out
    assert f"nodmix sessions repair {session.session_id}" in out

    assert main(["sessions", "repair", "work"]) == 0
    out = capsys.readouterr().out
    assert "kept 4 entries, dropped line(s) 4, re-linked 0" in out
    (backup,) = path.parent.glob(f"{path.name}.bak-*")
    assert backup.read_bytes() == original
    repaired = Transcript.load(path)
    assert repaired.skipped == [] and len(repaired.entries) == 4
    assert path.read_bytes() == b"".join(lines)  # exactly the readable lines

    assert main(["sessions", "repair", "work"]) == 0
    assert "nothing to repair (4 entries read)" in capsys.readouterr().out


def test_repair_relinks_an_entry_whose_parent_was_lost_and_the_writer_adopts_the_file(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _chat(isolated_state)
    path = session.transcript.path
    lines = path.read_bytes().splitlines(keepends=True)
    lines[3] = b"\x00\x00 zero-filled block\n"  # the tool result; the answer's parent is lost
    path.write_bytes(b"".join(lines))

    assert main(["sessions", "repair", session.session_id]) == 0
    assert "dropped line(s) 4, re-linked 1" in capsys.readouterr().out
    entries = Transcript.load(path).entries
    assert [e.parent_id for e in entries] == [None, entries[0].id, entries[1].id]

    # The session object still open in "the gateway" appends to the new file, not the backup.
    appended = session.append_message(user("thanks"))
    reloaded = Transcript.load(path).entries
    assert reloaded[-1].id == appended.id and appended.parent_id == entries[-1].id


def test_list_all_marks_replaced_sessions_and_show_reaches_them_by_id_prefix(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = _chat(isolated_state)
    SessionManager(isolated_state, durable=False).reset("work")
    assert main(["sessions", "list", "--all", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["key"], r["status"]) for r in rows] == [
        ("agent:main:work", "current"),
        ("agent:main:work", "replaced"),
    ]
    assert rows[1]["sessionId"] == old.session_id and rows[1]["messages"] == 4
    assert main(["sessions", "list", "--all"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:4] == ["KEY", "SESSION", "ID", "STATUS"]
    assert "replaced" in table[2]
    assert main(["sessions", "tail", old.session_id[:6], "-n", "1"]) == 0
    assert "in nodmix.json" in capsys.readouterr().out


def test_rename_sets_the_title_shown_in_list(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _chat(isolated_state)
    assert main(["sessions", "rename", "work", "Config hunt"]) == 0
    assert "title set to 'Config hunt'" in capsys.readouterr().out
    assert main(["sessions", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[1].endswith("Config hunt")


def test_delete_needs_yes_without_a_tty_and_moves_the_transcript_to_the_trash(
    isolated_state: Path,
) -> None:
    session = _chat(isolated_state)
    refused = _nodmix(isolated_state, "sessions", "delete", "work")
    assert refused.returncode == 1
    assert refused.stderr.splitlines() == [
        "nodmix: error: not deleting agent:main:work"
        f" (session {session.session_id}, current): add --yes to confirm (stdin is not a TTY)"
    ]
    done = _nodmix(isolated_state, "sessions", "delete", "work", "--yes")
    assert done.returncode == 0, done.stderr
    trash = session.transcript.path.parent / "trash" / session.transcript.path.name
    assert trash.is_file() and not session.transcript.path.exists()
    listed = _nodmix(isolated_state, "sessions", "list", "--all", "--json")
    assert [r["status"] for r in json.loads(listed.stdout)] == ["deleted"]
    again = _nodmix(isolated_state, "sessions", "show", "work")
    assert again.returncode == 1
    assert again.stderr == "nodmix: error: no session agent:main:work\n"


@pytest.mark.parametrize("action", ["show", "tail", "repair", "delete", "export-trajectory"])
def test_an_unknown_key_or_id_is_one_line_and_exit_1(
    action: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", action, "nope"]) == 1
    assert capsys.readouterr().err == "nodmix: error: no session agent:main:nope\n"
