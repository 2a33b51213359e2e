"""WebSocket methods that manage sessions: `sessions.rename`, `sessions.delete`, and parts of
`sessions.list`: the job of an isolated cron run's session, and (`all: true`) the sessions no
key points at any more.

A session is named by `sessionKey` (a key or a bare name, with `agentId` as elsewhere) or by
`sessionId` (also a unique prefix), which reaches replaced, archived and deleted transcripts
(`rpc._located`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nodmix.errors import SessionError
from nodmix.gateway.errors import APIError, bad_request, not_found
from nodmix.sessions.admin import delete_session, rename_session
from nodmix.sessions.locate import Located, all_transcripts, locate
from nodmix.sessions.manager import SessionManager

if TYPE_CHECKING:
    from nodmix.gateway.ws import Connection


def job_runs(rows: list[dict[str, Any]], job_names: Callable[[], dict[str, str]]) -> None:
    """Mark the rows of isolated cron-job runs (`agent:<id>:cron:<jobId>:<runId>`) with their
    job, `{"id", "name", "runId"}`, so a client can group them under it (`job_names` is read
    only when there is such a row; a removed job keeps its id as its name)."""
    names: dict[str, str] | None = None
    for row in rows:
        parts = str(row["key"]).split(":")
        if len(parts) != 5 or parts[2] != "cron":
            continue
        if names is None:
            names = job_names()
        row["job"] = {"id": parts[3], "name": names.get(parts[3], parts[3]), "runId": parts[4]}


def other_rows(manager: SessionManager, agent_id: str | None) -> list[dict[str, Any]]:
    """Transcripts that are not the current one of a key, newest first."""
    rows: list[dict[str, Any]] = []
    for agent in [agent_id] if agent_id else manager.agent_ids():
        for found in all_transcripts(manager, agent):
            if found.status == "current":
                continue
            rows.append(
                {
                    "key": found.key,
                    "agentId": found.agent_id,
                    "sessionId": found.session_id,
                    "status": found.status,
                    "updatedAt": found.modified_ms or 0,
                    "messageCount": manager.backend.messages_in(agent, found.path),
                }
            )
    rows.sort(key=lambda r: (-r["updatedAt"], r["sessionId"]))
    return rows


def _describe(found: Located) -> dict[str, Any]:
    return {"key": found.key, "agentId": found.agent_id, "sessionId": found.session_id}


def locate_param(manager: SessionManager, text: str) -> Located:
    """`locate`, with a miss as a 404 `unknown_session`."""
    try:
        return locate(manager, text)
    except SessionError as exc:
        raise not_found(str(exc), code="unknown_session") from None


def rename(conn: Connection, found: Located, title: str) -> dict[str, Any]:
    """`sessions.rename`: set the display title of a current session."""
    try:
        entry = rename_session(conn.gateway.runtime.sessions, found, title)
    except SessionError as exc:
        raise bad_request(str(exc), param="title") from None
    return {**_describe(found), "label": entry.label}


def delete(conn: Connection, found: Located) -> dict[str, Any]:
    """`sessions.delete`: move a session's transcripts to the trash and drop its key (refused
    while it runs)."""
    if found.key is not None and found.key in conn.gateway.busy_sessions():
        raise APIError(
            status=409,
            message=f"session {found.key} is running; abort the run or wait for it first",
            kind="invalid_request_error",
            code="session_busy",
        )
    try:
        moved = delete_session(conn.gateway.runtime.sessions, found)
    except SessionError as exc:
        raise bad_request(str(exc)) from None
    return {**_describe(found), "status": found.status, "moved": [str(p) for p in moved]}
