"""What `sessions_list`, `sessions_history` and `agents_list` show a turn (within its reach,
`reach.py`), compact enough for a model to read."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from nodmix.errors import NodmixError, ToolError
from nodmix.messages import AssistantMessage, ToolResultMessage, UserMessage
from nodmix.sessions import CustomMessageEntry, MessageEntry
from nodmix.sessions.keys import session_kind
from nodmix.sessions.store_entry import SessionEntry
from nodmix.subagents.reach import check_reach, speaks_for_owner
from nodmix.subagents.records import run_id_of
from nodmix.subagents.service import Subagents
from nodmix.tools.base import ToolContext

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
TEXT_CAP = 2000
"""Characters of one message `sessions_history` shows."""
KINDS = ("main", "subagent", "group", "dm", "cron", "hook", "api", "other")


def clamp_limit(value: object, default: int = DEFAULT_LIMIT) -> int:
    """A `limit` argument within 1..MAX_LIMIT."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    return max(1, min(MAX_LIMIT, int(value)))


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _tree(entries: dict[str, SessionEntry], root: str) -> set[str]:
    """`root` and every session spawned from it, at any depth."""
    children: dict[str, list[str]] = {}
    for key, entry in entries.items():
        if entry.spawned_by:
            children.setdefault(entry.spawned_by, []).append(key)
    found, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def list_sessions(
    service: Subagents, ctx: ToolContext, kind: str | None, limit: int
) -> dict[str, Any]:
    """`sessions_list`: the sessions the turn reaches, most recently updated first."""
    if kind is not None and kind not in KINDS:
        raise ToolError(f"kind must be one of {', '.join(KINDS)}")
    host = service.host
    owner = speaks_for_owner(ctx)
    agents = host.agent_ids() if owner else [ctx.agent_id]
    rows: list[tuple[str, str, SessionEntry]] = []
    for agent_id in agents:
        try:
            entries = host.sessions.store(agent_id).load()
        except NodmixError as exc:
            raise ToolError(str(exc)) from None
        allowed = None if owner else _tree(entries, ctx.session_key)
        for key, entry in entries.items():
            if allowed is not None and key not in allowed:
                continue
            if kind is None or session_kind(key) == kind:
                rows.append((agent_id, key, entry))
    rows.sort(key=lambda row: -row[2].updated_at)
    running = service.running_sessions()
    out = []
    for agent_id, key, entry in rows[:limit]:
        row: dict[str, Any] = {
            "sessionKey": key,
            "agentId": agent_id,
            "kind": session_kind(key),
            "updatedAt": _iso(entry.updated_at),
            "totalTokens": entry.total_tokens,
        }
        if entry.label:
            row["label"] = entry.label
        if entry.spawned_by:
            row["parent"] = entry.spawned_by
        run_id = run_id_of(key)
        if run_id is not None:
            run = next((r for r in service.open_runs() if r.run_id == run_id), None)
            run = run or service.store.get(run_id)
            if run is not None:
                row["runId"], row["status"] = run.run_id, run.status
        if key in running:
            row["running"] = True
        out.append(row)
    return {"sessions": out, "total": len(rows)}


def history(service: Subagents, ctx: ToolContext, key: str, limit: int) -> dict[str, Any]:
    """`sessions_history`: the last `limit` messages of a session the turn reaches."""
    check_reach(service, ctx, key)
    try:
        session = service.host.sessions.open(key, create=False)
    except NodmixError as exc:
        raise ToolError(str(exc)) from None
    messages: list[dict[str, Any]] = []
    for entry in session.entries:
        if isinstance(entry, MessageEntry) and entry.parent_tool_call_id is None:
            item = _message(entry.message)
            if item is not None:
                messages.append(item)
        elif isinstance(entry, CustomMessageEntry) and entry.display:
            text = entry.content if isinstance(entry.content, str) else ""
            messages.append({"role": "note", "type": entry.custom_type, "text": _cap(text)})
    shown = messages[-limit:]
    return {"sessionKey": key, "messages": shown, "total": len(messages)}


def _message(message: object) -> dict[str, Any] | None:
    if isinstance(message, UserMessage):
        return {"role": "user", "text": _cap(message.text)}
    if isinstance(message, AssistantMessage):
        item: dict[str, Any] = {"role": "assistant", "text": _cap(message.text)}
        if message.tool_calls:
            item["toolCalls"] = [call.name for call in message.tool_calls]
        if message.error_message:
            item["error"] = message.error_message
        return item
    if isinstance(message, ToolResultMessage):
        return {
            "role": "tool",
            "tool": message.tool_name,
            "text": _cap(message.text, TEXT_CAP // 4),
            **({"isError": True} if message.is_error else {}),
        }
    return None


def _cap(text: str, cap: int = TEXT_CAP) -> str:
    return text if len(text) <= cap else text[:cap] + f" [... {len(text) - cap} more characters]"


def agents(service: Subagents, ctx: ToolContext) -> dict[str, Any]:
    """`agents_list`: the agents a subagent may run as: the turn's own and those its
    `allowAgents` names (only its own for a turn that does not speak for the owner)."""
    host = service.host
    mine = service.settings(ctx.agent_id)
    ids = [ctx.agent_id]
    if speaks_for_owner(ctx):
        ids = [a for a in host.agent_ids() if mine.may_reach(ctx.agent_id, a)]
    out = []
    for agent_id in ids:
        agent = host.agent(agent_id)
        settings = service.settings(agent_id)
        try:
            model: str | None = host.model_refs(agent)[0]
        except NodmixError:
            model = None
        out.append(
            {
                "agentId": agent_id,
                "name": agent.name,
                "model": model,
                "current": agent_id == ctx.agent_id,
                "subagents": {
                    "enabled": settings.enabled,
                    "maxDepth": settings.max_depth,
                    "maxConcurrent": settings.max_concurrent,
                },
            }
        )
    return {"agents": out}
