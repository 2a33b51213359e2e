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
            "description": "What the subagent should do. It sees none of this conversation: "
            "make the task self-contained.",
        },
        "agentId": {
            "type": "string",
            "description": "The agent to run as (see agents_list). Default: this agent.",
        },
        "label": {
            "type": "string",
            "description": "A short name for the subagent, shown in session lists and with "
            "its result.",
        },
        "model": {"type": "string", "description": "provider/model for the subagent."},
        "timeoutSeconds": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "How long the subagent may work (capped by the configuration).",
        },
        "wait": {
            "type": "boolean",
            "description": "true: wait and return its reply. Default false: return at once; "
            "its result is posted into this conversation when it is ready.",
        },
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
                "Hand a task to a subagent: a helper that works in its own, isolated "
                "session with your tools. With wait: true you get {status, reply, sessionKey, "
                "usage}; without it the call returns {status: 'accepted', runId, sessionKey} "
                "at once and the result is posted into this conversation (and the chat it "
                "came from) when ready. Spawn several for independent parts of a job.",
                SPAWN_PARAMETERS,
                "Spawn subagent",
                self._spawn,
            ),
            self._tool(
                "sessions_send",
                "Send a message to another session (a subagent's, or another agent's) and "
                "get its reply: {status, reply, sessionKey, usage}.",
                SEND_PARAMETERS,
                "Message a session",
                self._send,
            ),
            self._tool(
                "sessions_list",
                "List the sessions you can reach (yours, your subagents', and for the owner "
                "every agent's), newest first, with kind, parent and subagent status.",
                LIST_PARAMETERS,
                "List sessions",
                self._list,
            ),
            self._tool(
                "sessions_history",
                "Read the latest messages of a session you can reach (a subagent's work).",
                HISTORY_PARAMETERS,
                "Session history",
                self._history,
            ),
            self._tool(
                "agents_list",
                "List the agents a subagent can run as (agentId of sessions_spawn).",
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
        return views.list_sessions(self._service, ctx, kind, views.clamp_limit(args.get("limit")))

    async def _history(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        key = str(args.get("sessionKey") or "")
        return views.history(self._service, ctx, key, views.clamp_limit(args.get("limit")))

    async def _agents(self, args: JsonObject, ctx: ToolContext) -> dict[str, Any]:
        return views.agents(self._service, ctx)
