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
