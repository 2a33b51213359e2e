"""Whether a chat id names a direct chat or a group, per platform, from the id alone.

`allowFrom: ["*"]` lets anyone DM the bot; it must not make every group the bot is in a
delivery target (`targets.py`). Each channel says here what its chat ids look like:

- `direct`: the id is a person's (a Telegram user, a Slack user or DM, a Signal number, ...);
- `group`: the id is a room, channel, space or group;
- `unknown`: the platform uses one id space for both (Discord snowflakes, Mattermost ids,
  Matrix room ids). `targets.py` treats these as groups unless the bot has seen the chat as
  a direct one (`direct_chats.py`).

Light: no platform library is imported (the CLI checks targets before anything starts).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Literal

from nodmix.config.schema import NodmixConfig

ChatKind = Literal["direct", "group", "unknown"]

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)
_PHONE = re.compile(r"^\+?\d{5,20}$")


def _telegram(chat_id: str, config: NodmixConfig) -> ChatKind:
    """Users have positive ids; groups, supergroups and channels negative ones or `@name`."""
    try:
        return "direct" if int(chat_id) > 0 else "group"
    except ValueError:
        return "group"


def _slack(chat_id: str, config: NodmixConfig) -> ChatKind:
    """`U…`/`W…` users and `D…` DMs; `C…` channels and `G…` private channels or group DMs."""
    head = chat_id[:1].upper()
    if head in {"U", "W", "D"}:
        return "direct"
    return "group" if head in {"C", "G"} else "unknown"


def _matrix(chat_id: str, config: NodmixConfig) -> ChatKind:
    """`@user:server` is a person; a room id (`!…`) or alias (`#…`) may be either."""
    return "direct" if chat_id.startswith("@") else "unknown"


def _irc(chat_id: str, config: NodmixConfig) -> ChatKind:
    """`#channel` (and `&`, `+`, `!` channels) is a group; anything else is a nick."""
    return "group" if chat_id[:1] in "#&+!" else "direct"


def _email(chat_id: str, config: NodmixConfig) -> ChatKind:
    """Every address is one person's mailbox."""
    return "direct"


def _signal(chat_id: str, config: NodmixConfig) -> ChatKind:
    """Numbers and account UUIDs are people; group ids are base64."""
    return "direct" if _PHONE.match(chat_id) or _UUID.match(chat_id) else "group"


def whatsapp_group(chat_id: str) -> bool:
    """Group ids are not WhatsApp ids (digits) or business-scoped user ids (`US.123`)."""
    head, _, tail = chat_id.partition(".")
    return not chat_id.isdigit() and not (len(head) == 2 and head.isupper() and tail.isdigit())


def _whatsapp(chat_id: str, config: NodmixConfig) -> ChatKind:
    return "group" if whatsapp_group(chat_id) else "direct"


def _msteams(chat_id: str, config: NodmixConfig) -> ChatKind:
    """A DM's key is the sender's id (an Entra object id, or `29:…`); group chats, channels
    and meetings are `19:…@thread…` conversations."""
    if chat_id.startswith("19:") or "@thread" in chat_id:
        return "group"
    if _UUID.match(chat_id) or chat_id.startswith(("29:", "8:orgid:")):
        return "direct"
    return "unknown"


def _googlechat(chat_id: str, config: NodmixConfig) -> ChatKind:
    """A DM's key is the person (`users/…`); a space (`spaces/…`) is a group."""
    if chat_id.startswith("users/"):
        return "direct"
    return "group" if chat_id.startswith("spaces/") else "unknown"


def _xmpp(chat_id: str, config: NodmixConfig) -> ChatKind:
    """The configured rooms (the ones it joins), anything on their MUC service, and occupant
    JIDs (`room@service/nick`) are groups; another bare JID is a person."""
    section = config.channels.xmpp
    rooms: Iterable[str] = section.rooms if section is not None else ()
    jid = chat_id.lower()
    services = {room.lower().partition("@")[2] for room in rooms}
    if jid in {room.lower() for room in rooms} or "/" in jid:
        return "group"
    local, at, domain = jid.partition("@")
    if not at or not local:
        return "unknown"  # a bare domain: a server or a service, not a person
    return "group" if domain in services else "direct"


def _unknown(chat_id: str, config: NodmixConfig) -> ChatKind:
    """Discord and Mattermost: users and channels share one id space."""
    return "unknown"


KINDS: dict[str, Callable[[str, NodmixConfig], ChatKind]] = {
    "telegram": _telegram,
    "matrix": _matrix,
    "irc": _irc,
    "email": _email,
    "discord": _unknown,
    "slack": _slack,
    "whatsapp": _whatsapp,
    "signal": _signal,
    "msteams": _msteams,
    "googlechat": _googlechat,
    "xmpp": _xmpp,
    "mattermost": _unknown,
}


def chat_kind(config: NodmixConfig, channel: str, chat_id: str) -> ChatKind:
    """What `chat_id` names on `channel` (`unknown` for a channel without a rule)."""
    kind = KINDS.get(channel)
    return kind(chat_id, config) if kind is not None else "unknown"
