"""IRC `PRIVMSG`s as our `InboundMessage` (the only place that reads IRC lines' parts)."""

from __future__ import annotations

import re
import time

from nodmix.channels.types import InboundMessage

CHANNEL_PREFIXES = "#&+!"
_FORMATTING = re.compile(r"\x03(\d{1,2}(,\d{1,2})?)?|[\x02\x0f\x11\x16\x1d\x1e\x1f]")
_NICK_CHARS = r"\w\-\[\]\\`^{}|"


def irc_lower(text: str) -> str:
    """IRC's case folding (rfc1459: `[]\\~` are the lower case of `{}|^`)."""
    return text.lower().translate(str.maketrans("[]\\~", "{}|^"))


def is_channel(target: str) -> bool:
    """Whether `target` names a channel rather than a nick."""
    return bool(target) and target[0] in CHANNEL_PREFIXES


def mentions(text: str, nick: str) -> bool:
    """Whether `text` names `nick` as a word (any case)."""
    pattern = rf"(?<![{_NICK_CHARS}]){re.escape(irc_lower(nick))}(?![{_NICK_CHARS}])"
    return re.search(pattern, irc_lower(text)) is not None


def strip_address(text: str, nick: str) -> str:
    """`text` without a leading `nick:` / `nick,` (how IRC users address someone)."""
    match = re.match(rf"\s*@?{re.escape(nick)}\s*[:,]?\s+", text, flags=re.IGNORECASE)
    return text[match.end() :] if match else text


def to_inbound(
    *, channel: str, own_nick: str, source: str, target: str, text: str, alt_nick: str = ""
) -> InboundMessage | None:
    """A `PRIVMSG` from `source` (`nick!user@host`) to `target`, or None for ones the layer does
    not handle (CTCP other than ACTION, messages from the server or the bot itself).
    `alt_nick` is the configured nick while the bot goes by a fallback one: naming either
    counts as a mention."""
    nick = source.split("!", 1)[0]
    if not nick or "!" not in source or irc_lower(nick) == irc_lower(own_nick):
        return None
    if text.startswith("\x01"):
        body = text.strip("\x01")
        if not body.startswith("ACTION "):
            return None
        text = f"* {nick} {body[len('ACTION ') :]}"
    text = _FORMATTING.sub("", text).strip()
    group = is_channel(target)
    names = [n for n in (own_nick, alt_nick) if n]
    mentioned = group and any(mentions(text, n) for n in names)
    for name in names if mentioned else []:
        text = strip_address(text, name)
    chat_id = irc_lower(target) if group else nick
    return InboundMessage(
        channel=channel,
        chat_type="group" if group else "dm",
        chat_id=chat_id,
        message_id=str(time.time_ns()),
        sender_id=irc_lower(nick),
        sender_name=nick,
        sender_mask=source,
        text=text,
        mentioned=mentioned,
    )
