"""The file checkpoint store: what it keeps, what it drops, and what it refuses."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from nodmix.checkpoints import CheckpointError, CheckpointInfo, FileCheckpointStore, take_checkpoint
from nodmix.checkpoints.store import new_checkpoint_id
from nodmix.messages import user_message
from nodmix.sessions import SessionManager


def _info(n: int, *, key: str = "agent:main:main", size: int = 10) -> CheckpointInfo:
    return CheckpointInfo(
        id=new_checkpoint_id(1_800_000_000 + n),
        agent_id="main",
        session_key=key,
        session_id=f"s{n}",
        created_at=1_800_000_000_000 + n,
        trigger="auto",
        transcript="s.jsonl",
        transcript_bytes=size,
        entries=1,
        messages=1,
    )


def test_a_saved_checkpoint_reads_back_and_its_file_is_private(isolated_state: Path) -> None:
    store = FileCheckpointStore(isolated_state)
    saved = store.save(_info(1), b'{"type":"session"}\n' * 100)
    assert saved.stored_bytes > 0
    info, data = store.read("main", saved.id)
    assert info == saved and data == b'{"type":"session"}\n' * 100
    path = store.folder("main") / f"{saved.id}.ckpt"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.folder("main").stat().st_mode) == 0o700
    assert store.list_checkpoints("main") == [saved]


def test_each_session_keeps_its_newest_five(isolated_state: Path) -> None:
    store = FileCheckpointStore(isolated_state)
    for n in range(8):
        store.save(_info(n), b"x" * 10)
    store.save(_info(100, key="agent:main:other"), b"x" * 10)
    mine = store.list_checkpoints("main", "agent:main:main")
    assert [i.session_id for i in mine] == ["s7", "s6", "s5", "s4", "s3"]
    assert len(store.list_checkpoints("main", "agent:main:other")) == 1


def test_an_agent_keeps_at_most_its_byte_and_count_caps(isolated_state: Path) -> None:
    store = FileCheckpointStore(isolated_state, max_agent_count=3)
    for n in range(5):
        store.save(_info(n, key=f"agent:main:k{n}"), b"y")
    assert [i.session_id for i in store.list_checkpoints("main")] == ["s4", "s3", "s2"]
    small = FileCheckpointStore(isolated_state / "b", max_agent_bytes=60)
    first = small.save(_info(1, key="agent:main:a"), os.urandom(40))
    small.save(_info(2, key="agent:main:b"), os.urandom(40))
    assert [i.id for i in small.list_checkpoints("main")] != [first.id]
    assert len(small.list_checkpoints("main")) == 1


def test_unknown_malformed_and_damaged_checkpoints_are_refused(isolated_state: Path) -> None:
    store = FileCheckpointStore(isolated_state)
    with pytest.raises(CheckpointError, match="no checkpoint"):
        store.read("main", "../../sessions/sessions")
    with pytest.raises(CheckpointError, match="no checkpoint"):
        store.read("main", new_checkpoint_id())
    saved = store.save(_info(1), b"z" * 50)
    path = store.folder("main") / f"{saved.id}.ckpt"
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(CheckpointError, match="damaged checkpoint"):
        store.read("main", saved.id)
    (store.folder("main") / f"{new_checkpoint_id()}.ckpt").write_bytes(b"garbage")
    assert [i.id for i in store.list_checkpoints("main")] == [saved.id]  # unreadable: skipped


def test_take_checkpoint_copies_the_transcript_or_skips_one_over_the_cap(
    isolated_state: Path,
) -> None:
    session = SessionManager(isolated_state, durable=False).open("agent:main:main")
    session.append_message(user_message("hello there"))
    store = FileCheckpointStore(isolated_state)
    info = take_checkpoint(store, session, trigger="manual", tokens_before=42)
    assert info is not None and info.messages == 1 and info.tokens_before == 42
    assert store.read("main", info.id)[1] == session.transcript.path.read_bytes()
    tiny = FileCheckpointStore(isolated_state, max_transcript_bytes=16)
    assert take_checkpoint(tiny, session, trigger="auto") is None
    assert len(tiny.list_checkpoints("main")) == 1  # (the first one, nothing new)
