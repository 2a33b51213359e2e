"""Small persistent maps from an id the gateway handed out to the session it belongs to.

Two of them live in `<state>/gateway/`:

- `responses.jsonl`: stored Responses API responses, so `previous_response_id` continues
  their session;
- `client_calls.jsonl`: client tool calls handed to apps, so a stateless client's tool results
  find the session that made the calls.

Each is one JSON line per id, appended as it is handed out. The transcript is the
conversation; these files only point into it, so they survive a restart without holding any
text. The newest `cap` (10 000) ids are kept: when a file holds twice that many lines it is
rewritten (atomically) with the newest `cap`. A torn last line (a crash mid-append) is
skipped on load.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Final

from nodmix.assets.files import atomic_write
from nodmix.stores import provided

log = logging.getLogger("nodmix.gateway")

DEFAULT_CAP: Final = 10_000
RESPONSES_FILE: Final = "responses.jsonl"
CLIENT_CALLS_FILE: Final = "client_calls.jsonl"


def open_session_pointers(state_dir: Path, file_name: str) -> SessionPointers:
    """The map of the backend serving `state_dir` (`<state>/gateway/<file>` by default; with
    replicas, shared, so any replica continues a response another one stored)."""
    found = provided(state_dir, "gateway.pointers", file_name)
    if isinstance(found, SessionPointers):
        return found
    return SessionPointers(state_dir / "gateway", file_name)


class SessionPointers:
    """Ids handed out by the gateway, mapped to their sessions, kept in one file."""

    def __init__(self, directory: Path, file_name: str, *, cap: int = DEFAULT_CAP) -> None:
        """Keep the map in `directory/file_name` (the directory is created 0700 on first
        write)."""
        self.path = directory / file_name
        self._cap = cap
        self._sessions: OrderedDict[str, str] | None = None
        self._lines = 0

    def _load(self) -> OrderedDict[str, str]:
        if self._sessions is not None:
            return self._sessions
        sessions: OrderedDict[str, str] = OrderedDict()
        lines = 0
        try:
            with self.path.open(encoding="utf-8") as handle:
                for line in handle:
                    lines += 1
                    try:
                        record = json.loads(line)
                        sessions[str(record["id"])] = str(record["session"])
                    except (ValueError, KeyError, TypeError):
                        continue  # a torn or foreign line
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("could not read %s: %s", self.path, exc)
        while len(sessions) > self._cap:
            sessions.popitem(last=False)
        self._sessions, self._lines = sessions, lines
        return sessions

    def session_of(self, item_id: str) -> str | None:
        """The session of an id, or None."""
        return self._load().get(item_id)

    def remember(self, item_id: str, session_key: str) -> None:
        """Record an id; never raises (a failed write only loses the pointer)."""
        sessions = self._load()
        sessions[item_id] = session_key
        sessions.move_to_end(item_id)
        while len(sessions) > self._cap:
            sessions.popitem(last=False)
        line = json.dumps({"id": item_id, "session": session_key}) + "\n"
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            if self._lines >= 2 * self._cap:
                self._rewrite(sessions)
                return
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            with os.fdopen(fd, "a", encoding="utf-8") as handle:
                handle.write(line)
            self._lines += 1
        except OSError as exc:
            log.warning("could not record %s in %s: %s", item_id, self.path, exc)

    def _rewrite(self, sessions: OrderedDict[str, str]) -> None:
        data = "".join(
            json.dumps({"id": rid, "session": key}) + "\n" for rid, key in sessions.items()
        )
        atomic_write(self.path, data.encode())
        os.chmod(self.path, 0o600)
        self._lines = len(sessions)
