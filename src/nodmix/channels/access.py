"""Access control, the same on every channel: who may reach the agent, and from where.

`decide()` runs before anything else looks at a message. Nothing reaches the agent (or the
model) unless it says `allow`; `pair` means "answer with a pairing code, and nothing more".
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from typing import Literal

from nodmix.channels.pairing import PairingStore
from nodmix.channels.types import InboundMessage
from nodmix.config.channel_base import ChannelDefaults, DmPolicy, GroupPolicy

Verdict = Literal["allow", "pair", "refuse", "ignore"]


@dataclass(frozen=True, slots=True)
class AccessRules:
    """A channel's effective rules (its section over `channels.defaults` over built-ins)."""

    dm_policy: DmPolicy = "pairing"
    allow_from: frozenset[str] = frozenset()
    group_policy: GroupPolicy = "allowlist"
    groups: frozenset[str] = frozenset()
    require_mention: bool = True
    typing: bool = True
    streaming: Literal["off", "edit"] = "off"
    """Delivery rather than access, but inherited the same way."""
    owner_ids: frozenset[str] = frozenset()
    """The owner's sender ids on this channel (`ownerIds`; the channel's own, never
    inherited): their DMs speak for the owner, and only they answer approval requests."""


def resolve_rules(section: ChannelDefaults, defaults: ChannelDefaults) -> AccessRules:
    """Merge a channel's section over `channels.defaults`."""

    def pick(name: str) -> object:
        value = getattr(section, name)
        return value if value is not None else getattr(defaults, name)

    built_in = AccessRules()
    dm = pick("dm_policy")
    group = pick("group_policy")
    allow = pick("allow_from")
    groups = pick("groups")
    mention = pick("require_mention")
    typing = pick("typing")
    streaming = pick("streaming")
    owners = getattr(section, "owner_ids", None) or []
    return AccessRules(
        dm_policy=dm if isinstance(dm, str) else built_in.dm_policy,  # type: ignore[arg-type]
        allow_from=frozenset(str(a) for a in allow) if isinstance(allow, list) else frozenset(),
        group_policy=group if isinstance(group, str) else built_in.group_policy,  # type: ignore[arg-type]
        groups=frozenset(str(g) for g in groups) if isinstance(groups, list) else frozenset(),
        require_mention=mention if isinstance(mention, bool) else True,
        typing=typing if isinstance(typing, bool) else True,
        streaming="edit" if streaming == "edit" else "off",
        owner_ids=frozenset(str(o) for o in owners) if section is not defaults else frozenset(),
    )


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with a message, and why (counted in `nodmix channels status`)."""

    verdict: Verdict
    reason: str


def is_owner(rules: AccessRules, msg: InboundMessage) -> bool:
    """Whether the message's sender is the channel's owner (`ownerIds`, matched exactly)."""
    return bool(msg.sender_id) and msg.sender_id in rules.owner_ids


def sender_allowed(rules: AccessRules, pairing: PairingStore, msg: InboundMessage) -> bool:
    """Whether the sender may talk to the agent directly."""
    if "*" in rules.allow_from or msg.sender_id in rules.allow_from or is_owner(rules, msg):
        return True
    sender = msg.sender_id.casefold()
    if any(entry.casefold() == sender for entry in rules.allow_from):
        return True
    if msg.sender_mask and any(mask_matches(msg.sender_mask, e) for e in rules.allow_from):
        return True
    return pairing.is_approved(msg.channel, msg.sender_id)


def mask_matches(mask: str, entry: str) -> bool:
    """`entry` matches `mask` ignoring case: a pattern (`nick!user@host`, `*@example.org`, `*`
    and `?` wildcards) against the whole mask. A plain name (an IRC nick) matches nothing:
    anyone can take a nick."""
    if not any(c in entry for c in "!@*?"):
        return False
    return fnmatch.fnmatchcase(mask.casefold(), entry.casefold().replace("[", "[[]"))


def decide(rules: AccessRules, pairing: PairingStore, msg: InboundMessage) -> Decision:
    """Allow, pair, refuse or ignore one inbound message."""
    if msg.chat_type == "group":
        return _decide_group(rules, msg)
    if rules.dm_policy == "disabled":
        return Decision("ignore", "direct messages are disabled")
    if sender_allowed(rules, pairing, msg) or rules.dm_policy == "open":
        return Decision("allow", "sender allowed")
    if rules.dm_policy == "pairing":
        return Decision("pair", "unknown sender")
    return Decision("refuse", "sender not in allowFrom")


def _decide_group(rules: AccessRules, msg: InboundMessage) -> Decision:
    if rules.group_policy == "disabled":
        return Decision("ignore", "groups are disabled")
    if rules.group_policy == "allowlist" and msg.chat_id not in rules.groups:
        return Decision("refuse", "group not in groups")
    if rules.require_mention and not msg.mentioned:
        return Decision("ignore", "not mentioned")
    return Decision("allow", "group allowed")


def invite_allowed(
    rules: AccessRules,
    pairing: PairingStore,
    *,
    channel: str,
    sender_id: str,
    room_id: str,
    direct: bool,
) -> bool:
    """Whether to accept an invitation to a chat (platforms where the bot must join first).

    Allowed senders and owners are always followed. A direct chat from anyone else is joined
    only when DMs can lead somewhere (`open` answers; `pairing` answers with a code, so only
    while the channel can still hand one out to this sender); a group from anyone else only
    when the group itself is allowed.
    """
    if "*" in rules.allow_from or sender_id in rules.allow_from or sender_id in rules.owner_ids:
        return True
    if pairing.is_approved(channel, sender_id):
        return True
    if direct:
        if rules.dm_policy == "pairing":
            # Joined only to hand out a code: when none can be given (the sender's or the
            # channel's rate limit, `nodmix.channels.pairing`), stay out.
            return pairing.may_request(channel, sender_id)
        return rules.dm_policy == "open"
    return rules.group_policy == "open" or room_id in rules.groups
