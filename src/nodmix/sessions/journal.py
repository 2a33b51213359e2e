"""The session store's change journal: `sessions.json.journal`, one JSON line per changed key.

Rewriting `sessions.json` on every change costs O(sessions) and, on ext4, a rename over an
existing file flushes the data like an fsync (~1 ms). A gateway serving stateless clients
creates a session per request, so changes are appended here instead (a few microseconds), and
the store folds the journal into `sessions.json` now and then (`SessionStore.compact`).

Line format: `{"key": "<session key>", "entry": {...SessionEntry...}}`, or `"entry": null` for
a removed key. Every line carries the whole entry, so replaying a line twice changes nothing:
after a crash between rewriting `sessions.json` and removing the journal, the leftover journal
replays harmlessly over the new file.

A writer appends under the store lock and first cuts off a torn last line (a crash mid-append),
so a bad line can only ever be the last one. Readers take no lock and ignore an incomplete last
line (an append in progress).
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from nodmix.errors import SessionError
from nodmix.invocation import nodmix_command
from nodmix.sessions.store_entry import SessionEntry, StoreData


class JournalLine(msgspec.Struct, frozen=True):
    """One change: the key's new entry, or None when the key was removed."""

    key: str
    entry: SessionEntry | None


_ENCODER = msgspec.json.Encoder()
_LINE_DECODER = msgspec.json.Decoder(JournalLine)


class JournalState(msgspec.Struct):
    """How far a reader has applied the journal: the file's inode and the end of the last
    complete line."""

    inode: int
    offset: int


def encode(changes: dict[str, SessionEntry | None]) -> bytes:
    """The journal lines for `changes` (one write, so a crash tears at most the last line)."""
    return b"".join(_ENCODER.encode(JournalLine(k, e)) + b"\n" for k, e in changes.items())


def read(path: Path, start: JournalState | None) -> tuple[bytes, JournalState] | None:
    """The journal's complete lines after `start` (from the beginning if the file is not the
    one `start` describes), and where they end; None when there is no journal. An incomplete
    last line is an append still in progress (or torn by a crash) and is left out."""
    try:
        with open(path, "rb") as f:
            inode = os.fstat(f.fileno()).st_ino
            offset = start.offset if start is not None and start.inode == inode else 0
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return None
    end = chunk.rfind(b"\n") + 1
    return chunk[:end], JournalState(inode, offset + end)


def apply(path: Path, chunk: bytes, data: StoreData) -> None:
    """Apply the lines of `chunk` (from `read`) to `data` in order.

    Raises:
        SessionError: a line is not a valid change (names the file).
    """
    if not chunk:
        return
    try:
        lines = _LINE_DECODER.decode_lines(chunk)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise SessionError(_bad_line(path, chunk)) from None
    for line in lines:
        if line.entry is None:
            data.pop(line.key, None)
        else:
            data[line.key] = line.entry


def replay(path: Path, data: StoreData, start: JournalState | None) -> JournalState | None:
    """`read` then `apply`: bring `data` up to date with the journal."""
    found = read(path, start)
    if found is None:
        return None
    apply(path, found[0], data)
    return found[1]


def _bad_line(path: Path, chunk: bytes) -> str:
    for line in chunk.split(b"\n")[:-1]:
        try:
            _LINE_DECODER.decode(line)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return (
                f"{path}: a line of the session store journal is not a valid change; run "
                f"`{nodmix_command()} sessions repair-store --agent {path.parent.parent.name}` "
                "to move it "
                "aside (transcripts are kept)"
            )
    return f"{path}: the session store journal is not valid"  # pragma: no cover


def append(path: Path, payload: bytes, state: JournalState | None, *, sync: bool) -> JournalState:
    """Append `payload` (under the store lock), first cutting off a torn last line left by a
    crashed writer. `state` is where the complete lines end, as the caller just replayed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        st = os.fstat(fd)
        if state is not None and state.inode == st.st_ino and st.st_size > state.offset:
            os.truncate(fd, state.offset)
        elif state is None or state.inode != st.st_ino:
            state = JournalState(st.st_ino, 0)  # a journal we have not read: it was empty
        written = os.write(fd, payload)
        if written != len(payload):
            raise SessionError(f"{path}: short write to the session store journal")
        if sync:
            os.fsync(fd)
        return JournalState(state.inode, state.offset + written)
    finally:
        os.close(fd)
