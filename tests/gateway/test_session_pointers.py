"""Id -> session maps: survive a new process, skip a torn line, stay bounded."""

from __future__ import annotations

import stat
from pathlib import Path

from nodmix.gateway.session_pointers import RESPONSES_FILE, SessionPointers


def test_a_new_store_on_the_same_directory_finds_earlier_responses(tmp_path: Path) -> None:
    first = SessionPointers(tmp_path / "gateway", RESPONSES_FILE)
    first.remember("resp_a", "agent:main:openai:1")
    first.remember("resp_b", "agent:main:alice")
    again = SessionPointers(tmp_path / "gateway", RESPONSES_FILE)
    assert again.session_of("resp_a") == "agent:main:openai:1"
    assert again.session_of("resp_b") == "agent:main:alice"
    assert again.session_of("resp_c") is None
    assert stat.S_IMODE(again.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(again.path.parent.stat().st_mode) == 0o700


def test_a_torn_last_line_is_skipped_and_appending_goes_on(tmp_path: Path) -> None:
    store = SessionPointers(tmp_path, RESPONSES_FILE)
    store.remember("resp_a", "agent:main:a")
    with store.path.open("a", encoding="utf-8") as handle:
        handle.write('{"id": "resp_torn", "sess')  # a crash mid-append
    reopened = SessionPointers(tmp_path, RESPONSES_FILE)
    assert reopened.session_of("resp_a") == "agent:main:a"
    assert reopened.session_of("resp_torn") is None


def test_only_the_newest_are_kept_and_the_file_is_compacted(tmp_path: Path) -> None:
    store = SessionPointers(tmp_path, RESPONSES_FILE, cap=3)
    for n in range(7):
        store.remember(f"resp_{n}", f"agent:main:s{n}")
    lines = store.path.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 6  # rewritten when it reached twice the cap
    reopened = SessionPointers(tmp_path, RESPONSES_FILE, cap=3)
    assert [reopened.session_of(f"resp_{n}") for n in range(7)] == [
        None,
        None,
        None,
        None,
        "agent:main:s4",
        "agent:main:s5",
        "agent:main:s6",
    ]
