"""What the Discord channel missed while it was not connected.

Discord does not replay messages sent while a bot was offline, so the adapter keeps the newest
message id it handled per Discord channel (DM channel, guild channel or thread) in the
channel's delivery state, and after each new Gateway session reads the channels' history after
those ids. A message is marked only after the channel layer accepted it, so one that was
delivered but not yet accepted at a crash is read again; message ids seen in this process are
skipped, so a message that arrives both live and from the history is handled once.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path

import discord
from nodmix.channels.delivery import open_delivery_log

log = logging.getLogger("nodmix.channels.discord")

MAX_CHANNELS = 200
"""Channels remembered (the least recently active are forgotten first)."""
MAX_PER_CHANNEL = 100
"""Messages read back per channel after a reconnect."""
SEEN_KEPT = 2000


class Backlog:
    """Last handled message per Discord channel, persisted."""

    def __init__(self, state_dir: Path, channel: str) -> None:
        self._log = open_delivery_log(state_dir, channel)
        stored = self._log.position().get("last", {})
        self._last: dict[int, int] = {}
        if isinstance(stored, dict):
            for key, value in stored.items():
                if str(key).isdigit() and str(value).isdigit():
                    self._last[int(key)] = int(value)
        self._seen: deque[int] = deque(maxlen=SEEN_KEPT)
        self._seen_set: set[int] = set()

    def seen(self, message_id: int) -> bool:
        """Whether this process handled the message already (and note it if not)."""
        if message_id in self._seen_set:
            return True
        if len(self._seen) == self._seen.maxlen:
            self._seen_set.discard(self._seen[0])
        self._seen.append(message_id)
        self._seen_set.add(message_id)
        return False

    def mark(self, channel_id: int, message_id: int) -> None:
        """The message was accepted: reading back starts after it."""
        if message_id <= self._last.get(channel_id, 0):
            return
        self._last[channel_id] = message_id
        if len(self._last) > MAX_CHANNELS:
            oldest = min(self._last, key=self._last.__getitem__)
            del self._last[oldest]
        self._log.save_position({"last": {str(k): str(v) for k, v in self._last.items()}})

    async def missed(self, client: discord.Client) -> AsyncIterator[discord.Message]:
        """Messages after the marks, oldest first per channel."""
        for channel_id, last in sorted(self._last.items()):
            try:
                channel = client.get_channel(channel_id) or await client.fetch_channel(channel_id)
            except (discord.NotFound, discord.Forbidden):
                self._last.pop(channel_id, None)  # deleted, or the bot lost access
                continue
            if not isinstance(channel, discord.abc.Messageable):
                continue
            try:
                async for message in channel.history(
                    after=discord.Object(last), oldest_first=True, limit=MAX_PER_CHANNEL
                ):
                    yield message
            except discord.HTTPException as exc:
                log.warning("discord: cannot read back channel %s: %s", channel_id, exc)
