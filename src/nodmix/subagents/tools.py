"""The session tools: `sessions_spawn`, `sessions_send`, `sessions_list`, `sessions_history`
and `agents_list`, as a tool source of the runtime.

Every result is JSON text for the model, with the same object as the result's `details`, so a
code-mode program reads it as a value (`(await tools.sessions_spawn({...})).details.reply`).
A refusal (a limit, a rule, a bad argument) is an error result of one line; a subagent that
ran and failed is not an error but a result with `status: failed` or `timeout`, so one failed
child does not reject a whole `Promise.all`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from nodmix import offload
from nodmix.errors import NodmixError, ToolError
from nodmix.messages import JsonObject
from nodmix.subagents import reach, views
from nodmix.subagents.planning import SpawnRequest
from nodmix.subagents.service import Subagents
from nodmix.tools.base import FunctionTool, Tool, ToolContext, ToolResult

SPAWN_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "Self-contained: the subagent sees none of this conversation.",
        },
        "agentId": {"type": "string", "description": "Agent to run as (agents_list)."},
        "label": {"type": "string", "description": "Short name shown with its result."},
        "model": {"type": "string", "description": "provider/model"},
        "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0},
        "wait": {"type": "boolean", "description": "Wait for its reply (default false)."},
    },
    "required": ["task"],
    "additionalProperties": False,
}

SEND_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "sessionKey": {"type": "string", "description": "The session to message."},
        "message": {"type": "string"},
        "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0},
    },
    "required": ["sessionKey", "message"],
    "additionalProperties": False,
}

LIST_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "kind": {"type": "string", "enum": list(views.KINDS)},
        "limit": {"type": "integer", "minimum": 1, "maximum": views.MAX_LIMIT},
    },
    "additionalProperties": False,
}

HISTORY_PARAMETERS: JsonObject = {
    "type": "object",
    "properties": {
        "sessionKey": {"type": "string"},
        "limit": {"type": "integer", "minimum": 1, "maximum": views.MAX_LIMIT},
    },
    "required": ["sessionKey"],
    "additionalProperties": False,
}

Handler = Callable[[JsonObject, ToolContext], Awaitable[dict[str, Any]]]


def _result(value: dict[str, Any]) -> ToolResult:
    return ToolResult.text(json.dumps(value, ensure_ascii=False), details=value)


def _number(args: JsonObject, key: str) -> float | None:
    value = args.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        return None
    return float(value)


def _text(args: JsonObject, key: str) -> str | None:
    value = args.get(key)
    return value if isinstance(value, str) and value.strip() else None


class SubagentTools:
    """The five session tools over a `Subagents` service."""

    def __init__(self, service: Subagents) -> None:
        self._service = service
        self._tools = [
            self._tool(
                "sessions_spawn",
                "Hand a task to a subagent working in its own session with your tools. "
                "wait: true returns {status, reply, sessionKey, usage}; else it returns "
                "{status: 'accepted', runId} at once and the result is posted here when "
                "ready. Spawn several for independent parts of a job.",
                SPAWN_PARAMETERS,
                "Spawn subagent",
                self._spawn,
            ),
            self._tool(
                "sessions_send",
                "Message another session (a subagent's) and get its reply.",
                SEND_PARAMETERS,
                "Message a session",
                self._send,
            ),
            self._tool(
                "sessions_list",
                "Sessions you can reach, newest first, with kind, parent and subagent status.",
                LIST_PARAMETERS,
                "List sessions",
                self._list,
            ),
            self._tool(
                "sessions_history",
                "Latest messages of a session you can reach (a subagent's work).",
                HISTORY_PARAMETERS,
                "Session history",
                self._history,
            ),
            self._tool(
                "agents_list",
                "Agents a subagent can run as (agentId of sessions_spawn).",
                {"type": "object", "properties": {}, "additionalProperties": False},
                "List agents",
                self._agents,
            ),
        ]

    async def list_tools(self) -> Sequence[Tool]:
        """The session tools (an agent with subagents off has them taken away by policy)."""
        return self._tools

    @staticmethod
    def _tool(
        name: str, description: str, parameters: JsonObject, label: str, handler: Handler
    ) -> FunctionTool:
        async def call(args: JsonObject, ctx: ToolContext) -> ToolResult:
            try:
                return _result(await handler(args, ctx))
            except ToolError:
                raise
            except NodmixError as exc:
                raise ToolError(str(exc)) from None

        return FunctionTool.create(
            call, name=name, description=description, parameters=parameters, label=label
        )

    async def _spawn(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        request = SpawnRequest(
            task=str(args.get("task") or ""),
            agent_id=_text(args, "agentId"),
            label=_text(args, "label"),
            model=_text(args, "model"),
            timeout_seconds=_number(args, "timeoutSeconds"),
            wait=args.get("wait") is True,
        )
        return await self._service.spawn(request, ctx)

    async def _send(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        return await reach.send(
            self._service,
            ctx,
            str(args.get("sessionKey") or ""),
            str(args.get("message") or ""),
            _number(args, "timeoutSeconds"),
        )

    async def _list(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        kind = _text(args, "kind")
        limit = views.clamp_limit(args.get("limit"))
        sessions = self._service.host.sessions.backend
        return await offload.call(sessions, views.list_sessions, self._service, ctx, kind, limit)

    async def _history(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        key = str(args.get("sessionKey") or "")
        limit = views.clamp_limit(args.get("limit"))
        sessions = self._service.host.sessions.backend
        return await offload.call(sessions, views.history, self._service, ctx, key, limit)

    async def _agents(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        return views.agents(self._service, ctx)
