"""pydle's client as the IRC adapter needs it: registration, messages and disconnects become
queue events, the configured nick is taken back when it is freed, and a SASL login that failed
is noticed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import anyio
import pydle

from nodmix.channels.irc.mapping import irc_lower, to_inbound, valid_account
from nodmix.channels.types import InboundMessage

log = logging.getLogger("nodmix.channels.irc")

Event = tuple[str, InboundMessage | None]


class IrcClient(pydle.Client):  # type: ignore[misc]
    """pydle's client, reporting registration, messages and disconnects as queue events."""

    RECONNECT_ON_ERROR = False  # the adapter reconnects with its own backoff

    def __init__(self, events: asyncio.Queue[Event], channel: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.wanted_nick = str(kwargs["nickname"])
        self._events = events
        self._channel = channel
        self.welcomed = asyncio.Event()
        self.welcome_nick = ""
        self.ponged = asyncio.Event()
        self.sasl_ok = False
        self._userhost: list[tuple[str, asyncio.Future[str | None]]] = []

    def _push(self, event: Event) -> None:
        try:
            self._events.put_nowait(event)
        except asyncio.QueueFull:
            log.warning("irc: inbound queue full, dropping an event")

    async def on_raw_001(self, message: Any) -> None:
        if message.params:
            self.welcome_nick = str(message.params[0])
        await super().on_raw_001(message)

    async def on_quit(self, by: str, reason: str | None = None) -> None:
        await super().on_quit(by, reason)
        await self._reclaim(by)

    async def on_nick_change(self, old: str, new: str) -> None:
        await super().on_nick_change(old, new)
        await self._reclaim(old)

    async def _reclaim(self, freed: str) -> None:
        """Take the configured nick back as soon as whoever held it lets go of it."""
        if irc_lower(freed) == irc_lower(self.wanted_nick) and irc_lower(
            self.nickname or ""
        ) != irc_lower(self.wanted_nick):
            await self.set_nickname(self.wanted_nick)

    async def on_raw_903(self, message: Any) -> None:
        self.sasl_ok = True
        await super().on_raw_903(message)

    async def on_raw_379(self, message: Any) -> None:
        """ngircd's WHOIS modes line: nothing to track (pydle would warn of it)."""

    async def on_raw_pong(self, message: Any) -> None:
        await super().on_raw_pong(message)
        self.ponged.set()

    async def flush(self) -> None:
        """Return once the server has handled everything sent so far (a PING's PONG): a
        server that paces a client's commands drops the unhandled ones when it quits."""
        self.ponged.clear()
        await self.rawmsg("PING", "nodmix-flush")
        await self.ponged.wait()

    async def on_connect(self) -> None:
        await super().on_connect()  # joins the configured channels
        self.welcomed.set()

    async def handle_forever(self) -> None:
        # pydle ends its read loop on an unexpected socket error without disconnecting;
        # every way out of the loop must reach the adapter as a lost connection.
        try:
            await super().handle_forever()
        except Exception as exc:
            log.warning("irc connection lost: %s", exc)
        finally:
            self._push(("lost", None))

    async def on_disconnect(self, expected: bool) -> None:
        await super().on_disconnect(expected)
        self._push(("lost", None))

    async def on_raw_privmsg(self, message: Any) -> None:
        await super().on_raw_privmsg(message)
        if len(message.params) < 2 or not isinstance(message.source, str):
            return
        msg = to_inbound(
            channel=self._channel,
            own_nick=self.nickname or "",
            source=message.source,
            target=message.params[0],
            text=message.params[1],
            alt_nick=self.wanted_nick,
            account=self.account_of(message),
        )
        if msg is not None:
            self._push(("message", msg))

    def account_of(self, message: Any) -> str | None:
        """The services account the network vouches for behind `message`, or None.

        With `account-tag` the message itself says (no tag: not logged in). Otherwise the
        account pydle tracks counts only while the server reports every change of it
        (`account-notify` and `extended-join`) and only for the same user and host (a WHOIS
        answer from before a nick changed hands must not carry over)."""
        caps = getattr(self, "_capabilities", {})
        if caps.get("account-tag"):
            return valid_account(getattr(message, "tags", {}).get("account"))
        if not (caps.get("account-notify") and caps.get("extended-join")):
            return None
        nick, _, userhost = str(message.source).partition("!")
        user, _, host = userhost.rpartition("@")
        tracked = self.users.get(nick) if nick in self.users else None
        if not tracked or (tracked.get("username"), tracked.get("hostname")) != (user, host):
            return None
        return valid_account(tracked.get("account"))

    async def holder(self, nick: str) -> str | None:
        """`nick!user@host` of whoever holds `nick` now (`USERHOST`), or None when nobody
        does. Answers come in order; one that names a nick goes to that nick's request."""
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        entry = (irc_lower(nick), future)
        self._userhost.append(entry)
        try:
            await self.rawmsg("USERHOST", nick)
            return await future
        finally:
            if entry in self._userhost:
                self._userhost.remove(entry)

    async def on_raw_302(self, message: Any) -> None:
        """`USERHOST` answers: `nick[*]=[+-]user@host` (nothing when the nick is free)."""
        found = {}
        for reply in str(message.params[-1] if message.params else "").split():
            name, _, rest = reply.partition("=")
            if rest[:1] in ("+", "-") and "@" in rest:
                found[irc_lower(name.rstrip("*"))] = f"{name.rstrip('*')}!{rest[1:]}"
        waiting = [e for e in self._userhost if not found or e[0] in found][:1]
        for entry in waiting:
            self._userhost.remove(entry)
            if not entry[1].done():
                entry[1].set_result(found.get(entry[0]))


async def quit_quietly(client: IrcClient | None) -> None:
    if client is None or not client.connected:
        return
    try:
        with anyio.fail_after(5):
            await client.quit("Nodmix stopping")
    except Exception:
        with contextlib.suppress(Exception):
            await client.disconnect(expected=True)
