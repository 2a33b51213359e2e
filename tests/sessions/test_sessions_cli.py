from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nodmix.cli.main import main
from nodmix.messages import Usage
from nodmix.sessions.manager import SessionManager
from nodmix.sessions.session import Session
from tests.sessions.sessions_builders import assistant, result, user


def _conversation(state: Path, key: str = "work") -> Session:
    session = SessionManager(state, durable=False).open(key)
    session.append_message(user("find the config"))
    session.append_message(assistant("searching", "exec_1"))
    session.append_message(assistant("", "n1"), parent_tool_call_id="exec_1")
    session.append_message(result("n1", "nested hit"), parent_tool_call_id="exec_1")
    session.append_message(result("exec_1", "program output"))
    first_kept = session.append_message(assistant("it is in nodmix.json"))
    session.transcript.append_compaction(
        summary="user looked for the config", first_kept_entry_id=first_kept.id, tokens_before=900
    )
    session.update_usage(Usage(input=40, output=2))
    session.flush()  # another process (the CLI under test) reads the store
    return session


def test_list_prints_a_table_of_sessions(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _conversation(isolated_state)
    assert main(["sessions", "list"]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["KEY", "SESSION", "ID", "UPDATED", "TOKENS", "MESSAGES"]
    cells = row.split()
    assert cells[:2] == ["agent:main:work", session.session_id]
    assert cells[-2:] == ["42", "4"]


def test_list_json_and_agent_selection(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _conversation(isolated_state)
    SessionManager(isolated_state).open("agent:ops:daily")
    assert main(["sessions", "list", "--json"]) == 0
    (only_main,) = json.loads(capsys.readouterr().out)
    assert only_main["key"] == "agent:main:work"
    assert only_main["messages"] == 4
    assert only_main["totalTokens"] == 42
    assert main(["sessions", "list", "--all-agents", "--json"]) == 0
    keys = {row["key"] for row in json.loads(capsys.readouterr().out)}
    assert keys == {"agent:main:work", "agent:ops:daily"}
    assert main(["sessions", "list", "--agent", "ops"]) == 0
    assert "agent:ops:daily" in capsys.readouterr().out
    assert main(["sessions", "list", "--agent", "nobody"]) == 0
    assert capsys.readouterr().out.strip() == "no sessions for agent nobody"


def test_show_prints_roles_calls_results_compactions_and_indented_nested_calls(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _conversation(isolated_state)
    assert main(["sessions", "show", "work"]) == 0
    out = capsys.readouterr().out
    body = out.splitlines()[4:]
    stamp = len("2026-01-02 03:04:05 ")

    def strip(line: str) -> str:
        indent = len(line) - len(line.lstrip())
        return " " * indent + line.lstrip()[stamp:] if line.lstrip()[:2] == "20" else line

    assert [strip(line) for line in body] == [
        "user:",
        "    find the config",
        "assistant [toolUse]:",
        "    searching",
        '    call tool_exec_1 [exec_1] {"arg": "exec_1"}',
        '    program call tool_n1 [n1] {"arg": "n1"}',
        "    result tool_n1 [n1] (ok):",
        "        nested hit",
        "result tool_exec_1 [exec_1] (ok):",
        "    program output",
        "assistant [stop]:",
        "    it is in nodmix.json",
        "compaction: 900 tokens before; kept from entry " + body[-2].split()[-1],
        "    user looked for the config",
    ]
    assert out.startswith("session agent:main:work  id ")


def test_show_json_prints_the_raw_entries(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    session = _conversation(isolated_state)
    assert main(["sessions", "show", "agent:main:work", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sessionId"] == session.session_id
    assert doc["header"]["version"] == 3
    lines = session.transcript.path.read_text().splitlines()[1:]
    assert doc["entries"] == [json.loads(line) for line in lines]


def test_an_unknown_session_is_a_one_line_error_with_exit_code_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["sessions", "show", "nope"]) == 1
    captured = capsys.readouterr()
    assert captured.err == "nodmix: error: no session agent:main:nope\n"
    assert main(["sessions", "export-trajectory", "--session-key", "agent:Bad"]) == 1
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_reading_commands_do_not_create_anything(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions", "tail"]) == 1
    assert "no session agent:main:main" in capsys.readouterr().err
    assert not (isolated_state / "agents").exists()


def test_tail_prints_the_last_n_entries(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _conversation(isolated_state)
    assert main(["sessions", "tail", "--session-key", "work", "-n", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "assistant [stop]:" in lines[0]
    assert lines[1] == "    it is in nodmix.json"
    assert "compaction: 900 tokens before" in lines[2]
    assert len(lines) == 4


def test_export_trajectory_writes_the_nested_document(
    isolated_state: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _conversation(isolated_state)
    out = tmp_path / "trajectory.json"
    args = ["sessions", "export-trajectory", "--session-key", "work", "--output", str(out)]
    assert main(args) == 0
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert [item["kind"] for item in doc["items"]] == [
        "user",
        "assistant",
        "assistant",
        "compaction",
    ]
    assert doc["items"][1]["toolCalls"][0]["nested"][0]["id"] == "n1"
    assert main(["sessions", "export-trajectory", "--session-key", "work"]) == 0
    assert json.loads(capsys.readouterr().out)["items"] == doc["items"]


def test_repair_store_moves_a_corrupt_store_aside(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _conversation(isolated_state)
    store = isolated_state / "agents/main/sessions/sessions.json"
    store.write_text("{broken")
    assert main(["sessions", "list"]) == 1
    assert str(store) in capsys.readouterr().err
    assert main(["sessions", "repair-store"]) == 0
    out = capsys.readouterr().out
    assert "moved the corrupt session store" in out
    # The session's latest change is in the journal, which is intact: it survives the repair.
    assert "1 session(s) recovered from the journal" in out
    assert main(["sessions", "list"]) == 0
    assert "agent:main:work" in capsys.readouterr().out
    assert len(list(store.parent.glob("sessions.json.corrupt-*"))) == 1


def test_repair_store_moves_a_corrupt_journal_aside_and_keeps_the_store_file(
    isolated_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _conversation(isolated_state)
    journal = isolated_state / "agents/main/sessions/sessions.json.journal"
    with journal.open("ab") as f:
        f.write(b"not a change\n{}\n")
    assert main(["sessions", "list"]) == 1
    err = capsys.readouterr().err
    assert str(journal) in err and "repair-store" in err
    assert main(["sessions", "repair-store"]) == 0
    assert "sessions.json.journal.corrupt-" in capsys.readouterr().out
    assert main(["sessions", "list"]) == 0
    assert "agent:main:work" in capsys.readouterr().out


@pytest.mark.integration
def test_tail_follow_prints_new_entries_and_exits_0_on_ctrl_c(isolated_state: Path) -> None:
    session = _conversation(isolated_state)
    command = [sys.executable, "-m", "nodmix", "sessions", "tail", "--session-key", "work"]
    with subprocess.Popen(
        [*command, "-n", "1", "--follow"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    ) as proc:
        assert proc.stdout is not None
        stdout = proc.stdout
        lines: queue.Queue[str] = queue.Queue()

        def pump() -> None:
            for line in stdout:
                lines.put(line)

        reader = threading.Thread(target=pump)
        reader.start()
        try:
            assert "compaction" in lines.get(timeout=30)
            assert lines.get(timeout=30).strip() == "user looked for the config"
            session.append_message(user("a new question"))
            assert "user:" in lines.get(timeout=30)
            assert lines.get(timeout=30).strip() == "a new question"
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
            reader.join(timeout=10)
        assert proc.stderr is not None
        assert proc.stderr.read() == ""
