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


AUTOMATION_CHANNELS = frozenset({"cron", "heartbeat", "webhook"})
"""Origins of turns nobody typed: scheduled jobs, heartbeats and webhook calls. Their
`chat_id` is the job id, the agent id or the webhook name. Such a turn is not the owner
speaking: policy that trusts the owner (exec approvals, the unsandboxed main session) should
treat it as it treats other senders."""


def is_automation(origin: TurnOrigin | None) -> bool:
    """Whether a turn was started by a job, a heartbeat or a webhook."""
    return origin is not None and origin.channel in AUTOMATION_CHANNELS
