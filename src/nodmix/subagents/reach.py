"""Which sessions a turn may see and talk to, and `sessions_send` (agent to agent).

A turn that speaks for the owner (`nodmix.origin.is_owner_turn`) reaches every session of
every agent. Any other turn (a group chat, a per-peer DM, an automation run, and every
subagent working for one of them) reaches only its own session and the subagents spawned
from it, at any depth: a chat member never reads the owner's conversations, nor talks to them
through a subagent.

`sessions_send` runs one turn in another session with the message and answers with that
session's reply, under a timeout. The turn carries the sender's origin (`lineage.child_origin`):
it speaks for whom the sender speaks. A send that would wait on itself (into the sender's own
session, or into a session whose turn is waiting on the sender) is refused at once instead of
waiting out its timeout.
"""

from __future__ import annotations

import time
from typing import Any

import anyio

from nodmix.errors import NodmixError, ToolError
from nodmix.origin import is_owner_turn
from nodmix.sessions.keys import SessionKey
from nodmix.subagents.confinement import check_confinement
from nodmix.subagents.lineage import child_origin
from nodmix.subagents.service import Subagents
from nodmix.tools.base import ToolContext

MAX_LINEAGE = 32
"""`spawnedBy` links followed when deciding whether a session descends from another."""


def speaks_for_owner(ctx: ToolContext) -> bool:
    """Whether the calling turn speaks for the owner."""
    return is_owner_turn(ctx.origin, ctx.agent_id, ctx.session_key)


def parent_of(service: Subagents, key: str) -> str | None:
    """The session that spawned `key`'s subagent, or None."""
    try:
        agent_id = SessionKey.parse(key).agent_id
        entry = service.host.sessions.store(agent_id).get(key)
    except NodmixError:
        return None
    return entry.spawned_by if entry is not None else None


def descends_from(service: Subagents, key: str, ancestor: str) -> bool:
    """Whether `key` is `ancestor` or one of the subagents spawned from it (at any depth)."""
    current: str | None = key
    for _ in range(MAX_LINEAGE):
        if current is None:
            return False
        if current == ancestor:
            return True
        current = parent_of(service, current)
    return False


def check_reach(service: Subagents, ctx: ToolContext, key: str) -> None:
    """Refuse `key` unless the calling turn may reach it.

    Raises:
        ToolError: it may not, or there is no such session.
    """
    try:
        parsed = SessionKey.parse(key)
    except NodmixError as exc:
        raise ToolError(str(exc)) from None
    if not speaks_for_owner(ctx) and not descends_from(service, key, ctx.session_key):
        raise ToolError(
            f"{key} is not reachable from this conversation: only its own session and the "
            "subagents it spawned are"
        )
    try:
        entry = service.host.sessions.store(parsed.agent_id).get(key)
    except NodmixError as exc:
        raise ToolError(str(exc)) from None
    if entry is None or parsed.agent_id not in service.host.agent_ids():
        raise ToolError(f"no session {key} (sessions_list shows the sessions you can reach)")


async def send(
    service: Subagents,
    ctx: ToolContext,
    target: str,
    message: str,
    timeout_seconds: float | None,
) -> dict[str, Any]:
    """Run `message` as a turn in session `target` and return its reply.

    Raises:
        ToolError: the session is unknown or out of reach, or the send would wait on itself.
    """
    if not message.strip():
        raise ToolError("message is empty")
    check_reach(service, ctx, target)
    waits = service.waits
    if waits.cycle(ctx.session_key, target):
        raise ToolError(
            f"{target} is waiting on this conversation's turn (or is this conversation): a "
            "message there would wait on itself. Answer in your own reply instead."
        )
    agent = service.host.agent(SessionKey.parse(target).agent_id)
    if not service.settings(ctx.agent_id).may_reach(ctx.agent_id, agent.id):
        raise ToolError(
            f"agent {ctx.agent_id!r} may not start turns in sessions of agent {agent.id!r}: add "
            "it to agents.list[].subagents.allowAgents (or agents.defaults.subagents.allowAgents)"
        )
    check_confinement(service.host.agent(ctx.agent_id), ctx, agent, target, "sessions_send")
    cap = float(service.settings(agent.id).timeout_seconds or agent.timeout_seconds)
    timeout = min(timeout_seconds, cap) if timeout_seconds else cap
    started = time.time()
    waits.add(ctx.session_key, target)
    try:
        with anyio.move_on_after(timeout) as scope:
            done = await service.host.run_turn(
                message,
                agent_id=agent.id,
                session_key=target,
                origin=child_origin(ctx.origin, ctx.session_key),
            )
    except NodmixError as exc:
        return {"status": "failed", "sessionKey": target, "error": str(exc)}
    finally:
        waits.remove(ctx.session_key, target)
    duration = round((time.time() - started) * 1000)
    if scope.cancelled_caught:
        return {
            "status": "timeout",
            "sessionKey": target,
            "error": f"no answer within {timeout:g} s",
            "durationMs": duration,
        }
    result = done.result
    usage = result.usage
    try:
        sender = await service.host.sessions.open_async(ctx.session_key, create=False)
        sender.update_usage(usage, context_tokens=sender.entry.context_tokens)
    except NodmixError:
        pass  # a one-shot session that is gone: the target's own counters have it
    out: dict[str, Any] = {
        "status": "failed" if result.stop_reason == "error" else "completed",
        "sessionKey": target,
        "reply": result.reply,
        "usage": {
            "input": usage.input,
            "output": usage.output,
            "totalTokens": usage.total_tokens or usage.input + usage.output,
        },
        "durationMs": duration,
    }
    last = result.last_message
    if result.stop_reason == "error" and last is not None and last.error_message:
        out["error"] = last.error_message
    return out
