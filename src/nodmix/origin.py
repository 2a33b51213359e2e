"""Where a turn came from: the channel, account, chat and thread a message arrived on.

Tools and hooks read it from their context (`ToolContext.origin`, `ToolCallInfo.origin`) to
answer "the channel the turn came from" (an approval request, a `message` tool call that names
no recipient). Turns started from the CLI, the web page or the API have no origin.
"""

from __future__ import annotations

from typing import Literal

import msgspec

ChatType = Literal["dm", "group"]


class TurnOrigin(msgspec.Struct, frozen=True, kw_only=True):
    """The chat a turn answers."""

    channel: str
    """The channel id (`telegram`)."""
    account: str = "default"
    chat_id: str
    chat_type: ChatType = "dm"
    thread_id: str | None = None
    """Forum topic or thread, when the chat has them."""
    sender_id: str | None = None
    sender_name: str | None = None
    message_id: str | None = None
    owner: bool = False
    """The sender is the owner (`channels.<id>.ownerIds`); for a cron run, the owner made the
    job. The owner's DMs speak for the owner; the owner's messages elsewhere (a group) do
    not, but the owner's `/approve` is accepted in any chat."""
    memory: bool = False
    """The turn may read the owner's memory although it does not speak for the owner: the
    heartbeat, the owner's own cron jobs, and the chats `memory.shareWith` names."""
    spawned_by: str | None = None
    """For a turn another session's turn started (a subagent run, a `sessions_send` message):
    the session key of the turn it works for (the first one when they nest). Whom the turn
    speaks for is decided as for that session (`is_owner_turn`), so delegating never gains a
    sender anything."""


AUTOMATION_CHANNELS = frozenset({"cron", "heartbeat", "webhook"})
"""Origins of turns nobody typed: scheduled jobs, heartbeats and webhook calls. Their
`chat_id` is the job id, the agent id or the webhook name. Such a turn is not the owner
speaking: policy that trusts the owner (exec approvals, the unsandboxed main session) should
treat it as it treats other senders."""


def is_automation(origin: TurnOrigin | None) -> bool:
    """Whether a turn was started by a job, a heartbeat or a webhook."""
    return origin is not None and origin.channel in AUTOMATION_CHANNELS


def is_owner_turn(origin: TurnOrigin | None, agent_id: str, session_key: str) -> bool:
    """Whether a turn speaks for the owner: no origin (the CLI, the web page, the API), a DM
    from the owner (`channels.<id>.ownerIds`), or a chat message in the agent's main session
    (only the owner's DMs are routed there). A group chat, another sender's DM and every
    automation run are not: they must not reach what only the owner may see or change
    (other sessions' transcripts, the owner's jobs, the main session). A turn another
    session's turn started (`spawned_by`) speaks for whom that turn spoke for."""
    if origin is None:
        return True
    if is_automation(origin):
        return False
    if origin.owner and origin.chat_type == "dm":
        return True
    from nodmix.sessions.keys import format_session_key  # keeps this module import-light

    if origin.spawned_by is not None:  # decided as the requester's own turn was
        parts = origin.spawned_by.split(":", 2)
        agent_id, session_key = (parts[1] if len(parts) == 3 else agent_id), origin.spawned_by
    return session_key == format_session_key(agent_id)


def memory_scope(origin: TurnOrigin | None) -> str | None:
    """How `memory.shareWith` names the chat of a turn: `group:<channel>:<chatId>`,
    `dm:<channel>:<senderId>`, `webhook:<name>` or `cron:<jobId>` (None for the owner's own
    turns and the heartbeat)."""
    if origin is None or origin.channel == "heartbeat":
        return None
    if origin.channel in ("cron", "webhook"):
        return f"{origin.channel}:{origin.chat_id}"
    if origin.chat_type == "group":
        return f"group:{origin.channel}:{origin.chat_id}"
    return f"dm:{origin.channel}:{origin.sender_id or origin.chat_id}"


def sees_owner_memory(origin: TurnOrigin | None, agent_id: str, session_key: str) -> bool:
    """Whether a turn may read the owner's memory (`MEMORY.md`, `memory/`): the owner's own
    turns (`is_owner_turn`) and those `origin.memory` lets in (the heartbeat, the owner's cron
    jobs, chats `memory.shareWith` names). A group chat, another sender's DM, a webhook and a
    cron job added from such a chat may not (`nodmix.security.memory_guard`)."""
    if origin is None or origin.memory or origin.channel == "heartbeat":
        return True
    return is_owner_turn(origin, agent_id, session_key)
