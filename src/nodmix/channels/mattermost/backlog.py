"""What the Mattermost channel missed while its WebSocket was not connected.

The server sends events only to open sockets: a post made while the bot was disconnected (a
server restart, a network drop, the gateway stopped) arrives with no event. So the adapter
keeps, in the channel's delivery state, the creation time of the newest post it handled per
Mattermost channel and the last moment the socket was known to be up. After each `hello` it
lists the channels the bot is a member of (`GET /users/me/channels`), and reads the posts of
each channel that had one since (`GET /channels/{id}/posts?since=`), oldest first.

Bounded: at most `MAX_PER_CHANNEL` posts per channel and `MAX_CHANNELS` channels per catch-up,
none older than `MAX_AGE_SECONDS`; on the very first start nothing is read back. A post is
marked only after the channel layer took it, and the layer's delivery log skips a post it
has answered or queued already (by post id), so a post that arrives both live and from the
history, or again after a restart, is answered once.

The marks live in the channel's delivery position (`open_delivery_log`): with the postgres
state backend every replica shares them, and the replica that takes the socket over after
another one (`state.coordination`) reads them again before catching up, so it starts where
the previous holder stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from nodmix.channels.delivery import open_delivery_log

log = logging.getLogger("nodmix.channels.mattermost")

MAX_CHANNELS = 200
"""Channels remembered, and channels read back per catch-up (the most recently active)."""
MAX_PER_CHANNEL = 100
"""Posts read back per channel after a reconnect (the newest)."""
MAX_AGE_SECONDS = 24 * 3600
"""Posts older than this are not read back (the bot was down for longer)."""
ALIVE_EVERY_SECONDS = 60.0
"""How often the 'socket is up' time is saved while connected (a crash loses at most this)."""


def _now_ms() -> int:
    return int(time.time() * 1000)


class Backlog:
    """Newest handled post per Mattermost channel (`create_at`, ms) and the socket's last
    known up time, persisted in `position.json`."""

    def __init__(self, state_dir: Path, channel: str) -> None:
        self._log = open_delivery_log(state_dir, channel)
        self._last: dict[str, int] = {}
        self._alive: int | None = None
        self._saved_alive = 0.0
        self.reload()

    def reload(self) -> None:
        """Take in the stored marks (the newer of stored and known, per channel): another
        replica may have held the socket since this one last read them."""
        stored = self._log.position()
        last = stored.get("last", {})
        for key, value in last.items() if isinstance(last, dict) else ():
            if _int(value) and int(value) > self._last.get(str(key), 0):
                self._last[str(key)] = int(value)
        while len(self._last) > MAX_CHANNELS:
            del self._last[min(self._last, key=self._last.__getitem__)]
        alive: Any = stored.get("alive")
        if _int(alive) and int(alive) > (self._alive or 0):
            self._alive = int(alive)

    def mark(self, channel_id: str, create_at: int) -> None:
        """The post was handled: reading back starts after it."""
        if create_at <= self._last.get(channel_id, 0):
            return
        self._last[channel_id] = create_at
        if len(self._last) > MAX_CHANNELS:
            del self._last[min(self._last, key=self._last.__getitem__)]
        self._save()

    def alive(self, *, force: bool = False) -> None:
        """The socket received something now: every post until now came through it (saved at
        most every `ALIVE_EVERY_SECONDS` unless `force`)."""
        self._alive = _now_ms()
        if force or time.monotonic() - self._saved_alive >= ALIVE_EVERY_SECONDS:
            self._save()

    def save(self) -> None:
        """Persist the last up time now (the socket closed)."""
        if self._alive is not None:
            self._save()

    def _save(self) -> None:
        self._saved_alive = time.monotonic()
        position: dict[str, Any] = {"last": dict(self._last)}
        if self._alive is not None:
            position["alive"] = self._alive
        self._log.save_position(position)

    def since(self, channel_id: str) -> int | None:
        """Read back the channel's posts created after this (ms), or None: nothing to read
        (the first start, or a channel with no post since the socket was last up)."""
        floor = _now_ms() - MAX_AGE_SECONDS * 1000
        mark = self._last.get(channel_id)
        if mark is None and self._alive is None:
            return None
        start = mark if mark is not None else self._alive
        assert start is not None
        return max(start, floor)

    async def missed(self, api: Any) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """`(channel type, post)` made after the marks (in a channel with none: after the last
        up time), oldest first per channel; nothing on the first start."""
        self.reload()
        if self._alive is None and not self._last:
            return
        try:
            channels = await api.channels.get_channels_for_user("me")
        except Exception as exc:  # the catch-up must not stop the channel
            log.warning("mattermost: cannot list the bot's channels to read back: %s", exc)
            return
        wanted: list[tuple[int, int, str, str]] = []
        for channel in channels if isinstance(channels, list) else []:
            channel_id, kind = str(channel.get("id", "")), str(channel.get("type", ""))
            since = self.since(channel_id)
            last_post = channel.get("last_post_at")
            if not channel_id or since is None or not _int(last_post) or int(last_post) <= since:
                continue
            wanted.append((int(last_post), since, channel_id, kind))
        for _, since, channel_id, kind in sorted(wanted, reverse=True)[:MAX_CHANNELS]:
            try:
                page = await api.posts.get_posts_for_channel(channel_id, since=since)
            except Exception as exc:
                log.warning("mattermost: cannot read back channel %s: %s", channel_id, exc)
                continue
            page = page if isinstance(page, dict) else {}
            posts = page.get("posts") or {}
            order = [i for i in reversed(page.get("order") or []) if i in posts]  # oldest first
            found = [
                p
                for p in [posts[i] for i in order] or list(posts.values())
                if isinstance(p, dict)
                and _int(p.get("create_at"))
                and int(p["create_at"]) > since
                and not p.get("delete_at")
            ]
            found.sort(key=lambda p: int(p["create_at"]))  # stable: the order breaks ties
            for post in found[-MAX_PER_CHANNEL:]:
                yield kind, post


def _int(value: Any) -> bool:
    return type(value) is int or (isinstance(value, str) and value.isdigit())
