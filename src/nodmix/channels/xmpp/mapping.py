"""XMPP message stanzas as our `InboundMessage` (the only place that reads their parts).

A direct chat is keyed by the sender's bare JID (`ann@example.org`, lower case): its resource
(the device) changes from message to message and says nothing about who is writing. A MUC
room is keyed by the room's bare JID. In a room, the sender is the occupant's real bare JID
when the room shows it (a non-anonymous room, or a room where the bot is a moderator) and
the room is on the account's own server (`client.py`: another server's room may name anyone);
otherwise `room@conference.example.org/nick`, which anyone can take once the nick is free,
so such a sender never matches `allowFrom` or `ownerIds` entries written as bare JIDs.

`allowFrom` patterns (`*@example.org`) are matched against the bare JID only: a resource
and a room nick are whatever the sender's client chose (`eve@evil.example/x@example.org`),
so they are never part of what a pattern sees.
"""

from __future__ import annotations

import re
import time

from nodmix.channels.types import InboundMessage
from nodmix.channels.xmpp.files import link_attachment

_NICK_CHARS = r"\w\-\[\]\\`^{}|.'"


def bare(jid: str) -> str:
    """`local@domain` of a JID, lower case (the resource dropped)."""
    return jid.split("/", 1)[0].lower()


def mentions(text: str, nick: str) -> bool:
    """Whether `text` names `nick` as a word (any case; an `@` before it is fine)."""
    if not nick:
        return False
    pattern = rf"(?<![{_NICK_CHARS}]){re.escape(nick.lower())}(?![{_NICK_CHARS}])"
    return re.search(pattern, text.lower()) is not None


def strip_address(text: str, nick: str) -> str:
    """`text` without a leading `nick:` / `nick,` / `@nick` (how people address someone)."""
    match = re.match(rf"\s*@?{re.escape(nick)}\s*[:,]?\s+", text, flags=re.IGNORECASE)
    return text[match.end() :] if match else text


def _text(body: str, links: tuple[str, ...]) -> str:
    """The body without the shared links (a client sends a file's link as the body too)."""
    text = body.strip()
    for link in links:
        text = text.replace(link, " ")
    return text.strip()


def message_id(stanza_id: str) -> str:
    """The stanza's id, or a fresh one when the sender's client set none."""
    return stanza_id or f"local-{time.time_ns()}"


def chat_inbound(
    *,
    channel: str,
    sender: str,
    body: str,
    stanza_id: str,
    own_jid: str,
    links: tuple[str, ...] = (),
) -> InboundMessage | None:
    """A `chat` (or `normal`) message from the full JID `sender` (with the files it shares
    as `links`), or None for ones the layer does not handle (empty bodies such as chat
    states, the bot's own messages)."""
    text = _text(body, links)
    who = bare(sender)
    if not (text or links) or not who or "@" not in who or who == bare(own_jid):
        return None
    local = who.split("@", 1)[0]
    return InboundMessage(
        channel=channel,
        chat_type="dm",
        chat_id=who,
        message_id=message_id(stanza_id),
        sender_id=who,
        sender_name=local,
        sender_mask=who,
        text=text,
        attachments=tuple(link_attachment(link) for link in links),
        mentioned=True,
    )


def room_inbound(
    *,
    channel: str,
    room: str,
    nick: str,
    own_nick: str,
    body: str,
    stanza_id: str,
    real_jid: str | None,
    links: tuple[str, ...] = (),
) -> InboundMessage | None:
    """A `groupchat` message in `room` from the occupant `nick` (whose real JID the room may
    show), or None for ones the layer does not handle (the room's own notices, the bot's own
    messages reflected back, empty bodies)."""
    text = _text(body, links)
    if not (text or links) or not nick or nick == own_nick:
        return None
    room = bare(room)
    mentioned = mentions(text, own_nick)
    if mentioned:
        text = strip_address(text, own_nick)
    sender = bare(real_jid) if real_jid else f"{room}/{nick}"
    return InboundMessage(
        channel=channel,
        chat_type="group",
        chat_id=room,
        message_id=message_id(stanza_id),
        sender_id=sender,
        sender_name=nick,
        sender_mask=bare(real_jid) if real_jid else None,
        text=text,
        attachments=tuple(link_attachment(link) for link in links),
        mentioned=mentioned,
    )
