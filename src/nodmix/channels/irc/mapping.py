"""IRC `PRIVMSG`s as our `InboundMessage` (the only place that reads IRC lines' parts).

A sender is never their nick: anyone can take a nick the moment its holder leaves. The
sender id is the services account when the network vouches for one (`account:ann`, from the
IRCv3 `account-tag` on the message or the account the client tracks with `account-notify` and
`extended-join`), otherwise the whole `nick!user@host` mask (case-folded; an IPv6 host written
out in full). So a nick change is a new sender, and `allowFrom`, pairing and `ownerIds` hold
one of these two forms. A DM's `chat_id` is the sender's (case-folded) mask: replies go to
that nick only while the same user and host hold it (`IrcAdapter.send` asks the server).
"""

from __future__ import annotations

import ipaddress
import re
import time

from nodmix.channels.types import InboundMessage

CHANNEL_PREFIXES = "#&+!"
_FORMATTING = re.compile(r"\x03(\d{1,2}(,\d{1,2})?)?|[\x02\x0f\x11\x16\x1d\x1e\x1f]")
_NICK_CHARS = r"\w\-\[\]\\`^{}|"
_ACCOUNT = re.compile(r"[^\s!@:*?,\x00-\x1f\x7f]{1,64}")
ACCOUNT_PREFIX = "account:"


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


def valid_account(account: object) -> str | None:
    """A services account name as the server gave it, or None (`*`/`0` mean none)."""
    if not isinstance(account, str) or account in ("*", "0"):
        return None
    return account if _ACCOUNT.fullmatch(account) else None


def identity(source: str, account: str | None = None) -> str:
    """The sender id of `source` (`nick!user@host`): `account:<name>` when the network
    vouches for an account, else the case-folded mask."""
    if account is not None:
        return ACCOUNT_PREFIX + irc_lower(account)
    nick, _, userhost = source.partition("!")
    user, _, host = userhost.rpartition("@")
    try:
        host = ipaddress.IPv6Address(host).exploded  # no `::`: ids must not hold empty parts
    except ValueError:
        pass
    return f"{irc_lower(nick)}!{user.lower()}@{host.lower()}"


def is_mask(target: str) -> bool:
    """Whether `target` is a `nick!user@host` mask (a DM chat id) rather than a plain nick."""
    nick, bang, userhost = target.partition("!")
    return bool(nick and bang and "@" in userhost and not is_channel(target))


def to_inbound(
    *,
    channel: str,
    own_nick: str,
    source: str,
    target: str,
    text: str,
    alt_nick: str = "",
    account: str | None = None,
) -> InboundMessage | None:
    """A `PRIVMSG` from `source` (`nick!user@host`, logged in to `account` when the network
    says so) to `target`, or None for ones the layer does not handle (CTCP other than
    ACTION, messages from the server or the bot itself). `alt_nick` is the configured nick
    while the bot goes by a fallback one: naming either counts as a mention."""
    nick = source.split("!", 1)[0]
    if not nick or not is_mask(source) or irc_lower(nick) == irc_lower(own_nick):
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
    chat_id = irc_lower(target) if group else identity(source)
    return InboundMessage(
        channel=channel,
        chat_type="group" if group else "dm",
        chat_id=chat_id,
        message_id=str(time.time_ns()),
        sender_id=identity(source, valid_account(account)),
        sender_name=nick,
        sender_mask=source,
        text=text,
        mentioned=mentioned,
    )
