"""Per-chat spoken replies (`/tts on|off`): a small store protocol and its file implementation.

`FileSpeechPrefs` keeps `{"<channel>:<chat id>": true|false}` in `<state>/media/tts.json`,
replaced atomically under a lock file, so a crash mid-write leaves the old or the new file and
two processes never lose each other's change. Another backend (a database) implements the same
two methods.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from nodmix.assets.files import atomic_write, ensure_private_dir

log = logging.getLogger("nodmix.media")

MAX_CHATS = 10_000
"""Chats remembered at most (the oldest settings are dropped first)."""


class SpeechPrefs(Protocol):
    """Whether a chat wants replies spoken: True, False, or None (the config decides)."""

    def get(self, channel: str, chat_id: str) -> bool | None: ...

    def set(self, channel: str, chat_id: str, value: bool | None) -> None: ...


class MemorySpeechPrefs:
    """In memory (tests, one-off runs)."""

    def __init__(self) -> None:
        self._values: dict[str, bool] = {}

    def get(self, channel: str, chat_id: str) -> bool | None:
        """The chat's setting."""
        return self._values.get(f"{channel}:{chat_id}")

    def set(self, channel: str, chat_id: str, value: bool | None) -> None:
        """Set (None: forget) the chat's setting."""
        key = f"{channel}:{chat_id}"
        if value is None:
            self._values.pop(key, None)
        else:
            self._values[key] = value


class FileSpeechPrefs:
    """`<state>/media/tts.json`."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "media" / "tts.json"
        self._cache: tuple[int, dict[str, bool]] | None = None

    def _load(self) -> dict[str, bool]:
        try:
            mtime = self.path.stat().st_mtime_ns
        except FileNotFoundError:
            return {}
        if self._cache is not None and self._cache[0] == mtime:
            return self._cache[1]
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            log.warning("ignoring unreadable %s: %s", self.path, exc)
            return {}
        values = (
            {k: v for k, v in raw.items() if isinstance(k, str) and isinstance(v, bool)}
            if isinstance(raw, dict)
            else {}
        )
        self._cache = (mtime, values)
        return values

    def get(self, channel: str, chat_id: str) -> bool | None:
        """The chat's setting."""
        return self._load().get(f"{channel}:{chat_id}")

    def set(self, channel: str, chat_id: str, value: bool | None) -> None:
        """Set (None: forget) the chat's setting, durably."""
        key = f"{channel}:{chat_id}"
        with self._locked():
            self._cache = None
            values = dict(self._load())
            values.pop(key, None)
            if value is not None:
                values[key] = value
            while len(values) > MAX_CHATS:
                values.pop(next(iter(values)))
            atomic_write(self.path, json.dumps(values, indent=1).encode("utf-8"))
            self._cache = None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        ensure_private_dir(self.path.parent)
        fd = os.open(self.path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        with os.fdopen(fd, "r+b") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
