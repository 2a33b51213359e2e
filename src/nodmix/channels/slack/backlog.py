"""What the Slack channel missed while it was not connected.

Slack retries an event it could not deliver only a few times, within minutes. So the adapter
keeps the newest message `ts` it handled per conversation (and per thread) in the channel's
delivery state, and after each start reads `conversations.history` (or, for a thread,
`conversations.replies`) after it. A message is marked only after the channel layer accepted
it; a message that arrives both as an event and from the history is handled once (the
adapter's seen set, then the delivery log).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from nodmix.channels.delivery import open_delivery_log

log = logging.getLogger("nodmix.channels.slack")

MAX_CONVERSATIONS = 200
"""Conversations and threads remembered (the least recently active are forgotten first)."""
MAX_PER_CONVERSATION = 100
"""Messages read back per conversation after a start."""


class Backlog:
    """Last handled message per Slack conversation (`C1`) or thread (`C1/1700000000.0001`)."""

    def __init__(self, state_dir: Path, channel: str) -> None:
        self._log = open_delivery_log(state_dir, channel)
        stored = self._log.position().get("last", {})
        self._last: dict[str, str] = (
            {str(k): str(v) for k, v in stored.items()} if isinstance(stored, dict) else {}
        )

    def mark(self, conversation: str, thread: str | None, ts: str) -> None:
        """The message was accepted: reading back starts after it."""
        key = f"{conversation}/{thread}" if thread else conversation
        if float(ts) <= float(self._last.get(key, "0")):
            return
        self._last[key] = ts
        if len(self._last) > MAX_CONVERSATIONS:
            oldest = min(self._last, key=lambda k: float(self._last[k]))
            del self._last[oldest]
        self._log.save_position({"last": dict(self._last)})

    async def missed(self, web: AsyncWebClient) -> AsyncIterator[dict[str, Any]]:
        """Message events after the marks, oldest first per conversation."""
        for key, last in sorted(self._last.items()):
            conversation, _, thread = key.partition("/")
            try:
                if thread:
                    page = await web.conversations_replies(
                        channel=conversation, ts=thread, oldest=last, limit=MAX_PER_CONVERSATION
                    )
                else:
                    page = await web.conversations_history(
                        channel=conversation, oldest=last, limit=MAX_PER_CONVERSATION
                    )
            except SlackApiError as exc:
                log.warning("slack: cannot read back %s: %s", key, exc.response.get("error"))
                if exc.response.get("error") in ("channel_not_found", "not_in_channel"):
                    self._last.pop(key, None)
                continue
            found = [m for m in page.get("messages") or [] if float(m["ts"]) > float(last)]
            for message in sorted(found, key=lambda m: float(m["ts"])):
                direct = conversation.startswith("D")
                yield {
                    "type": "message",
                    "channel": conversation,
                    "channel_type": "im" if direct else "channel",
                    **message,
                }
