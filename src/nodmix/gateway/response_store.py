"""Which session each stored response belongs to, so `previous_response_id` continues it.

A Responses request with `store` (the default) records `response id -> session key` in
`<state>/gateway/responses.jsonl`, one JSON line per response, appended as it finishes. The
transcript is the conversation; this file only points into it, so it survives a restart
without holding any text. The newest `cap` (10 000) responses are kept: when the file holds
twice that many lines it is rewritten (atomically) with the newest `cap`. A torn last line
(a crash mid-append) is skipped on load.
"""

from __future__ import annotations

import json
import logging
import os
from collections import OrderedDict
from pathlib import Path
from typing import Final

from nodmix.assets.files import atomic_write

log = logging.getLogger("nodmix.gateway")

DEFAULT_CAP: Final = 10_000
FILE_NAME: Final = "responses.jsonl"


class ResponseStore:
    """Response ids of this gateway's stored responses, mapped to their sessions."""

    def __init__(self, directory: Path, *, cap: int = DEFAULT_CAP) -> None:
        """Keep the index in `directory` (created 0700 on first write)."""
        self.path = directory / FILE_NAME
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

    def session_of(self, response_id: str) -> str | None:
        """The session of a stored response, or None."""
        return self._load().get(response_id)

    def remember(self, response_id: str, session_key: str) -> None:
        """Record a stored response; never raises (a failed write only loses the pointer)."""
        sessions = self._load()
        sessions[response_id] = session_key
        while len(sessions) > self._cap:
            sessions.popitem(last=False)
        line = json.dumps({"id": response_id, "session": session_key}) + "\n"
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
            log.warning("could not record response %s in %s: %s", response_id, self.path, exc)

    def _rewrite(self, sessions: OrderedDict[str, str]) -> None:
        data = "".join(
            json.dumps({"id": rid, "session": key}) + "\n" for rid, key in sessions.items()
        )
        atomic_write(self.path, data.encode())
        os.chmod(self.path, 0o600)
        self._lines = len(sessions)
