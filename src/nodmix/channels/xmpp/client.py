"""One slixmpp session: log in, join the rooms, and put what arrives on a queue.

A new client is made for each connection (the adapter reconnects with its own backoff, so
slixmpp's own retry loop is never left running). What the adapter needs from a stanza is read
here and handed on as an `InboundMessage`; `("lost", None)` says the stream ended.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, Literal

import slixmpp

from nodmix.channels.types import InboundMessage
from nodmix.channels.xmpp.files import oob_urls
from nodmix.channels.xmpp.mapping import bare, chat_inbound, room_inbound

log = logging.getLogger("nodmix.channels.xmpp")

Event = tuple[Literal["message", "lost"], InboundMessage | None]
CORRECTION_FEATURE = "urn:xmpp:message-correct:0"
KEEPALIVE_SECONDS = 60
KEEPALIVE_TIMEOUT_SECONDS = 20
PEERS_KEPT = 1000


class LoginRefused(ConnectionError):
    """The server refused the JID and password."""


class CertificateRefused(ConnectionError):
    """The server's TLS certificate is not trusted (or TLS was required and not offered)."""


def certificate_refused(error: BaseException) -> CertificateRefused:
    """One readable line for a failed certificate check."""
    detail = getattr(error, "verify_message", None) or getattr(error, "reason", None) or error
    return CertificateRefused(
        f"the server's TLS certificate is not trusted ({detail}); if it is your own "
        "server's, set channels.xmpp.caFile to the certificate (or its CA) in PEM"
    )


class XmppClient(slixmpp.ClientXMPP):
    """The bot's XMPP session; `ready` resolves at session start (or with the error)."""

    def __init__(
        self,
        jid: str,
        password: str,
        events: asyncio.Queue[Event],
        *,
        channel: str,
        nick: str,
        rooms: tuple[str, ...],
        tls: str,
        ssl_context: ssl.SSLContext | None,
    ) -> None:
        mechanisms = {"unencrypted_scram": tls == "off", "unencrypted_plain": False}
        super().__init__(jid, password, plugin_config={"feature_mechanisms": mechanisms})
        if ssl_context is not None:
            self.ssl_context = ssl_context
        self.enable_direct_tls = tls == "direct"
        self.enable_starttls = tls == "starttls"
        self.enable_plaintext = tls == "off"
        self.events = events
        self.channel = channel
        self.nick = nick
        self.rooms = rooms
        self.joined: set[str] = set()
        self.full_jids: dict[str, str] = {}
        """Each direct chat's last full JID (a device), for asking it what it supports."""
        self._corrects: dict[str, bool] = {}
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        # Strangers may not see the bot's presence, nor add it to their roster unasked.
        self.roster.auto_authorize = False
        self.roster.auto_subscribe = False
        for plugin in ("xep_0030", "xep_0045", "xep_0066", "xep_0085", "xep_0203", "xep_0308"):
            self.register_plugin(plugin)
        self.register_plugin("xep_0363")
        self.register_plugin(
            "xep_0199", {"keepalive": True, "interval": KEEPALIVE_SECONDS, "timeout": 20}
        )
        self.add_event_handler("session_start", self._started)
        self.add_event_handler("failed_auth", self._refused)
        self.add_event_handler("ssl_invalid_chain", self._untrusted)
        self.add_event_handler("connection_failed", self._failed)
        self.add_event_handler("disconnected", self._lost)
        self.add_event_handler("message", self._chat)
        self.add_event_handler("groupchat_message", self._room)

    def _settle(self, error: BaseException | None) -> None:
        if self.ready.done():
            return
        if error is None:
            self.ready.set_result(None)
        else:
            self.ready.set_exception(error)

    async def _started(self, _event: Any) -> None:
        self.send_presence()
        muc: Any = self.plugin["xep_0045"]
        for room in self.rooms:
            try:
                await muc.join_muc_wait(slixmpp.JID(room), self.nick, maxstanzas=0, timeout=30)
            except Exception as exc:  # one room refusing must not stop the others
                log.warning("xmpp: cannot join %s: %s", room, exc)
                continue
            self.joined.add(bare(room))
        self._settle(None)

    def _refused(self, _event: Any) -> None:
        if self.enable_starttls and "starttls" not in self.features:
            self._settle(
                CertificateRefused(
                    'the server did not offer STARTTLS, and tls is "starttls": nothing was '
                    'sent in plain text (use tls: "direct" if it takes TLS on its own port)'
                )
            )
        else:
            self._settle(LoginRefused("the server refused the JID and password"))
        self.abort()

    def _untrusted(self, error: Any) -> None:
        self._settle(certificate_refused(error))
        self.abort()

    def _failed(self, error: Any) -> None:
        if isinstance(error, ssl.SSLCertVerificationError):
            self._settle(certificate_refused(error))
        else:
            self._settle(ConnectionError(str(error) or "connection failed"))
        self.cancel_connection_attempt()

    def _lost(self, reason: Any) -> None:
        if isinstance(reason, ssl.SSLCertVerificationError):
            self._settle(certificate_refused(reason))
        self._settle(ConnectionError(f"disconnected: {reason or 'stream closed'}"))
        self._put(("lost", None))

    def _put(self, event: Event) -> None:
        try:
            self.events.put_nowait(event)
        except asyncio.QueueFull:
            log.warning("xmpp: inbound queue full; a message was dropped")

    def _chat(self, msg: Any) -> None:
        if msg["type"] not in ("chat", "normal") or msg["replace"]["id"]:
            return  # corrections of earlier messages are not new prompts
        sender = str(msg["from"])
        if bare(sender) in self.joined:
            return  # a private message through a room: its sender has no verified address
        inbound = chat_inbound(
            channel=self.channel,
            sender=sender,
            body=str(msg["body"]),
            stanza_id=str(msg["id"]),
            own_jid=str(self.boundjid),
            links=oob_urls(msg),
        )
        if inbound is None:
            return
        if len(self.full_jids) >= PEERS_KEPT:
            self.full_jids.clear()
        self.full_jids[inbound.chat_id] = sender
        self._put(("message", inbound))

    def _room(self, msg: Any) -> None:
        if msg["replace"]["id"] or msg.xml.find("{urn:xmpp:delay}delay") is not None:
            return  # a correction, or room history replayed on joining
        room = bare(str(msg["from"]))
        if room not in self.joined:
            return
        nick = str(msg["mucnick"])
        muc: Any = self.plugin["xep_0045"]
        real = None
        if nick and self._own_service(room):  # another server's room may name anyone
            real = muc.get_jid_property(slixmpp.JID(room), nick, "jid")
        inbound = room_inbound(
            channel=self.channel,
            room=room,
            nick=nick,
            own_nick=self.nick,
            body=str(msg["body"]),
            stanza_id=str(msg["id"]),
            real_jid=str(real) if real else None,
            links=oob_urls(msg),
        )
        if inbound is not None:
            self._put(("message", inbound))

    def _own_service(self, room: str) -> bool:
        """Whether `room` is hosted by the account's own server (its domain or a subdomain):
        only that service's word on an occupant's real JID is taken."""
        domain, own = room.partition("@")[2].lower(), str(self.boundjid.domain).lower()
        return bool(own) and (domain == own or domain.endswith("." + own))

    async def corrects(self, chat_id: str) -> bool:
        """Whether the chat's last device says it shows XEP-0308 corrections (a room: yes,
        its members' clients decide; a device that does not answer: no)."""
        if chat_id in self.joined:
            return True
        full = self.full_jids.get(chat_id)
        if full is None:
            return False
        if full not in self._corrects:
            disco: Any = self.plugin["xep_0030"]
            try:
                info = await disco.get_info(jid=full, timeout=5, cached=False)
                features = set(info["disco_info"]["features"])
            except Exception as exc:  # an error answer, no answer in time
                log.debug("xmpp: %s did not say what it supports: %s", full, exc)
                features = set()
            if len(self._corrects) >= PEERS_KEPT:
                self._corrects.clear()
            self._corrects[full] = CORRECTION_FEATURE in features
        return self._corrects[full]
