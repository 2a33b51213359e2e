"""The WebSocket methods: `agent`, `agent.abort`, `sessions.*`, `runs.list`, `health`
(`sessions.rename` and `sessions.delete` are in `rpc_sessions.py`).

Each method takes the connection, the request id and the params object and returns the
`payload` of its response; raising `APIError` (or any runtime error, see `errors.classify`)
answers `ok: false`. Methods that start a run (`agent`, `sessions.compact`) stream its events
as `agent` event frames tagged with the request id, and answer when the run has finished.
"""

from __future__ import annotations

import functools
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from nodmix.agents import AgentProfile
from nodmix.errors import NodmixError
from nodmix.events import EventSink, RunEvent
from nodmix.gateway import channel_turns, rpc_sessions, rpc_skills
from nodmix.gateway.approvals import approvals_list, approvals_resolve
from nodmix.gateway.errors import APIError, bad_request, classify, not_found
from nodmix.gateway.media_parts import attachment_files
from nodmix.gateway.runs import ActiveRun
from nodmix.gateway.wire import event_json, outcome_json
from nodmix.sessions import SessionSummary, parse_session_key
from nodmix.sessions.entries import entry_to_builtins
from nodmix.sessions.keys import is_stateless_key, session_kind
from nodmix.sessions.locate import Located

if TYPE_CHECKING:
    from nodmix.gateway.ws import Connection, Method

T = TypeVar("T")

DEFAULT_HISTORY_LIMIT = 500
DEFAULT_LIST_LIMIT = 200


def _param(params: dict[str, Any], name: str, kind: type[T], *, required: bool = False) -> T | None:
    value = params.get(name)
    if value is None:
        if required:
            raise bad_request(f"params.{name} is required", param=name)
        return None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise bad_request(f"params.{name} must be a {kind.__name__}", param=name)
    return value


def _agent_and_key(conn: Connection, params: dict[str, Any]) -> tuple[AgentProfile, str]:
    """The agent (from `agentId`, else the key's own agent) and the full session key."""
    agent_id = _param(params, "agentId", str)
    key = _param(params, "sessionKey", str)
    if agent_id is None and key and key.startswith("agent:"):
        try:
            agent_id = parse_session_key(key).agent_id
        except Exception as exc:
            raise bad_request(str(exc), param="sessionKey") from None
    agent = conn.gateway.agent(agent_id)
    return agent, conn.gateway.session_key(agent, key)


def _streamer(conn: Connection, req_id: str | int) -> tuple[EventSink, Callable[[ActiveRun], None]]:
    """An event sink forwarding to the connection, and how to tell it the run id."""
    state: dict[str, Any] = {"run_id": None, "seq": 0}

    def emit(event: RunEvent) -> None:
        state["seq"] += 1
        data = event_json(event)
        if "runId" in data:  # `turn_started` carries the runtime's own id for the turn
            data["turnId"] = data.pop("runId")
        conn.event(
            "agent", {"reqId": req_id, "runId": state["run_id"], "seq": state["seq"], **data}
        )

    def bind(run: ActiveRun) -> None:
        state["run_id"] = run.run_id

    return emit, bind


# ---- runs ---------------------------------------------------------------------------------------


async def agent(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Run a chat message on a session; stream its events; answer with the outcome."""
    message = _param(params, "message", str, required=True)
    assert message is not None
    profile, key = _agent_and_key(conn, params)
    files = attachment_files(profile, _param(params, "attachments", list) or [])
    if not message.strip() and not files:
        raise bad_request("params.message is empty", param="message")
    emit, bind = _streamer(conn, req_id)
    gateway = conn.gateway
    queued = gateway.runtime.sessions.turn_lock(key).locked()
    run = gateway.start_turn(
        message,
        agent=profile,
        session_key=key,
        emit=emit,
        origin="ws",
        model=_param(params, "model", str),
        disable_tools=bool(_param(params, "disableTools", bool)),
        files=files,
    )
    bind(run)
    accepted = {"kind": "accepted", "sessionKey": key, "agentId": profile.id, "queued": queued}
    conn.event("agent", {"reqId": req_id, "runId": run.run_id, "seq": 0, **accepted})
    return {"runId": run.run_id, **outcome_json(await run.result())}


async def agent_abort(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Cancel a run in flight (started by any client)."""
    run_id = _param(params, "runId", str, required=True)
    run = conn.gateway.runs.get(run_id or "")
    if run is None:
        return {"runId": run_id, "aborted": False}
    run.cancel()
    return {"runId": run_id, "aborted": True}


async def runs_list(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Runs in flight."""
    return {"runs": [run.describe() for run in conn.gateway.runs.active]}


# ---- sessions -----------------------------------------------------------------------------------


def session_row(summary: SessionSummary, busy: set[str]) -> dict[str, Any]:
    """One session as `sessions.list` reports it."""
    entry = summary.entry
    return {
        "key": summary.key,
        "agentId": summary.agent_id,
        "name": summary.key.split(":", 2)[2],
        "sessionId": entry.session_id,
        "label": entry.label,
        "model": entry.model,
        "createdAt": entry.created_at,
        "updatedAt": entry.updated_at,
        "messageCount": summary.message_count,
        "totalTokens": entry.total_tokens,
        "contextTokens": entry.context_tokens,
        "compactionCount": entry.compaction_count,
        "running": summary.key in busy,
        "kind": session_kind(summary.key),
        "spawnedBy": entry.spawned_by,
    }


async def sessions_list(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Sessions, most recently updated first (`agentId` limits to one agent; `oneShot: false`
    leaves out the one-shot sessions of stateless API clients, and counts them instead)."""
    agent_id = _param(params, "agentId", str)
    limit = max(1, _param(params, "limit", int) or DEFAULT_LIST_LIMIT)
    with_one_shot = _param(params, "oneShot", bool) is not False
    if agent_id is not None:
        conn.gateway.agent(agent_id)
    counts = {"shown": 0, "hidden": 0}

    def keep(key: str) -> bool:
        if with_one_shot or not is_stateless_key(key):
            counts["shown"] += 1
            return True
        counts["hidden"] += 1
        return False

    sessions = conn.gateway.runtime.sessions
    listing = functools.partial(sessions.list_sessions, agent_id, limit=limit, where=keep)
    # (with a database, the index and message counts are round trips: off the event loop)
    rows = await anyio.to_thread.run_sync(listing) if sessions.backend.round_trips else listing()
    busy = conn.gateway.busy_sessions()
    listed = [session_row(row, busy) for row in rows]
    rpc_sessions.job_runs(
        listed, lambda: {job.id: job.name for job in conn.gateway.runtime.automation.store.load()}
    )
    result = {
        "sessions": listed,
        "total": counts["shown"],
        "oneShotHidden": counts["hidden"],
    }
    if _param(params, "all", bool):  # also sessions replaced by /new, archived or deleted
        result["others"] = rpc_sessions.other_rows(conn.gateway.runtime.sessions, agent_id)
    return result


async def sessions_create(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Open a new (empty) session; `name` defaults to a timestamped `web-...` name."""
    name = _param(params, "name", str)
    if name is None:
        name = time.strftime("web-%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:4]
    profile, key = _agent_and_key(conn, {**params, "sessionKey": name})
    session = conn.gateway.runtime.open_session(profile, key)
    summary = SessionSummary(
        key=session.key,
        agent_id=session.agent_id,
        entry=session.entry,
        path=session.transcript.path,
        message_count=0,
    )
    return session_row(summary, conn.gateway.busy_sessions())


async def sessions_history(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """The transcript entries of a session (the newest `limit`, in file order).

    `sessionId` (or a unique prefix) reads any transcript, also one `/new` replaced or one in
    the archive or trash; those answers carry `readOnly: true` and the transcript's `status`.
    """
    limit = max(1, _param(params, "limit", int) or DEFAULT_HISTORY_LIMIT)
    if _param(params, "sessionId", str) is not None:
        return await _history_by_id(conn, params, limit)
    profile, key = _agent_and_key(conn, params)
    try:
        session = await conn.gateway.runtime.sessions.open_async(key, create=False)
    except Exception as exc:
        raise not_found(str(exc), code="unknown_session") from None
    entries = list(session.entries)
    return {
        "sessionKey": key,
        "sessionId": session.session_id,
        "agentId": profile.id,
        "total": len(entries),
        "running": key in conn.gateway.busy_sessions(),
        "entries": [entry_to_builtins(e) for e in entries[-limit:]],
    }


async def _history_by_id(conn: Connection, params: dict[str, Any], limit: int) -> Any:
    found = _located(conn, params)
    try:
        transcript = await anyio.to_thread.run_sync(
            lambda: conn.gateway.runtime.sessions.backend.read(found.agent_id, found.path)
        )
    except (OSError, NodmixError) as exc:
        raise not_found(f"cannot read session {found.session_id}: {exc}") from None
    entries = list(transcript.entries)
    return {
        "sessionKey": found.key,
        "sessionId": found.session_id,
        "agentId": found.agent_id,
        "status": found.status,
        "readOnly": found.status != "current",
        "total": len(entries),
        "running": False,
        "entries": [entry_to_builtins(e) for e in entries[-limit:]],
    }


async def sessions_reset(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Start a fresh transcript under the key (the old file is kept on disk)."""
    profile, key = _agent_and_key(conn, params)
    outcome = conn.gateway.runtime.new_session(agent_id=profile.id, session_key=key)
    return outcome_json(outcome)


async def sessions_compact(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Compact a session now, streaming its `compaction` events (`Runtime.compact_session`)."""
    profile, key = _agent_and_key(conn, params)
    compact = getattr(conn.gateway.runtime, "compact_session", None)
    if compact is None:  # a runtime built without the compaction service
        raise APIError(
            status=501,
            message="manual compaction is not available in this version of the runtime",
            kind="api_error",
            code="unsupported",
        )
    instructions = _param(params, "instructions", str)
    emit, bind = _streamer(conn, req_id)

    async def body() -> Any:
        return await compact(profile.id, key, instructions=instructions, emit=emit)

    run = conn.gateway.runs.start(body, agent_id=profile.id, session_key=key, origin="ws")
    bind(run)
    done = await run.result()
    from nodmix.compaction.service import compaction_message

    return {**done.to_json(), "message": compaction_message(done)}


def _located(conn: Connection, params: dict[str, Any]) -> Located:
    """The session named by `sessionId` (or a prefix), else by `sessionKey`/`agentId`."""
    manager = conn.gateway.runtime.sessions
    session_id = _param(params, "sessionId", str)
    if session_id is not None:
        return rpc_sessions.locate_param(manager, session_id)
    if _param(params, "sessionKey", str) is None:
        raise bad_request("params.sessionKey or params.sessionId is required")
    return rpc_sessions.locate_param(manager, _agent_and_key(conn, params)[1])


async def sessions_rename(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Set the display title (`title`) of a current session."""
    title = _param(params, "title", str, required=True)
    assert title is not None
    return rpc_sessions.rename(conn, _located(conn, params), title)


async def sessions_delete(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Move a session's transcripts to the trash and drop its key (409 while it runs)."""
    return rpc_sessions.delete(conn, _located(conn, params))


async def sessions_status(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """What the chat's `/status` shows for a session; `model` is checked as a turn would."""
    from nodmix.runtime.status import session_status

    profile, key = _agent_and_key(conn, params)
    model = _param(params, "model", str)
    try:
        return session_status(
            conn.gateway.runtime, agent_id=profile.id, session_key=key, model=model
        )
    except Exception as exc:
        raise classify(exc) from None


# ---- gateway ------------------------------------------------------------------------------------


async def health(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Gateway status, agents and their models, active runs, config state."""
    return conn.gateway.health(detailed=True)


METHODS: dict[str, Method] = {
    "agent": agent,
    "agent.abort": agent_abort,
    "approvals.list": approvals_list,
    "approvals.resolve": approvals_resolve,
    "runs.list": runs_list,
    "sessions.list": sessions_list,
    "sessions.create": sessions_create,
    "sessions.history": sessions_history,
    "sessions.reset": sessions_reset,
    "sessions.compact": sessions_compact,
    "sessions.rename": sessions_rename,
    "sessions.delete": sessions_delete,
    "sessions.status": sessions_status,
    "health": health,
    "channels.status": channel_turns.channels_status,
    "pairing.list": channel_turns.pairing_list,
    "pairing.approve": channel_turns.pairing_approve,
    "skills.list": rpc_skills.skills_list,
}
"""Method name -> handler."""
