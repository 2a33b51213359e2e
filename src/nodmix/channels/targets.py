"""Where the agent may send: one check for every delivery target.

The `message` tool, `nodmix message send`, cron jobs (`nodmix cron add --deliver`, the `cron`
tool), the heartbeat's `deliver` and webhook mappings (`hooks.mappings.<name>.deliver`) all ask
`deliver_refusal`, so a chat the channel's rules do not let in, or a channel that is not
configured, is refused the same way everywhere, with one line naming the rule. A target is
allowed when it is:

- the chat the turn itself came from;
- in the channel's `groups`, or named in its `allowFrom` or `ownerIds` (IRC and email patterns
  such as `*@example.org` match direct chats too);
- a sender the owner approved by pairing;
- a direct chat, when `allowFrom` holds `"*"`. `"*"` means "anyone may DM the bot", never
  "the agent may post in every group the bot is in": whether a chat is direct comes from
  its id (`chat_kinds.py`), and where a platform's ids cannot tell, from the chats the bot
  has seen as direct ones (`direct_chats.py`); anything else counts as a group.

Light: no platform library is imported, so the CLI can check before anything starts.
"""

from __future__ import annotations

from nodmix.channels.access import AccessRules, mask_matches
from nodmix.channels.chat_kinds import chat_kind
from nodmix.channels.direct_chats import DirectChats
from nodmix.channels.pairing import PairingStore
from nodmix.channels.registry import enabled_channels, rules_for
from nodmix.config.schema import NodmixConfig
from nodmix.origin import TurnOrigin


def chat_allowed(
    rules: AccessRules, pairing: PairingStore, channel: str, chat_id: str, *, direct: bool
) -> bool:
    """Whether the channel's rules let the agent message `chat_id` (`direct`: the chat is a
    direct one, which `allowFrom` patterns and `"*"` may let in)."""
    named = (rules.allow_from - {"*"}) | rules.owner_ids
    if chat_id in named or chat_id in rules.groups:
        return True
    if direct and any(mask_matches(chat_id, entry) for entry in named):
        return True  # `*@example.org`, a nick in another case
    if pairing.is_approved(channel, chat_id):
        return True
    return direct and "*" in rules.allow_from


def is_direct(
    config: NodmixConfig, channel: str, chat_id: str, seen: DirectChats | None = None
) -> bool:
    """Whether `chat_id` is a direct chat: by its id, else by the chats seen as direct ones
    (an id that cannot tell and was never seen as direct counts as a group)."""
    kind = chat_kind(config, channel, chat_id)
    if kind != "unknown":
        return kind == "direct"
    return seen is not None and seen.seen(channel, chat_id)


def deliver_refusal(
    config: NodmixConfig,
    pairing: PairingStore,
    channel: str,
    chat_id: str,
    origin: TurnOrigin | None = None,
    *,
    seen: DirectChats | None = None,
) -> str | None:
    """Why the agent may not deliver to `channel:chat_id` (one line naming the rule), or None.
    `seen`: the chats seen as direct ones (without it, a chat whose id cannot tell is a
    group)."""
    configured = enabled_channels(config)
    if channel not in configured:
        known = ", ".join(configured) or "none"
        return (
            f"channel {channel!r} is not configured (no channels.{channel} section, or it is "
            f"disabled; configured: {known})"
        )
    if origin is not None and origin.channel == channel and origin.chat_id == chat_id:
        return None
    rules = rules_for(config, channel)
    direct = is_direct(config, channel, chat_id, seen)
    if chat_allowed(rules, pairing, channel, chat_id, direct=direct):
        return None
    if "*" in rules.allow_from:
        return (
            f'{channel} chat {chat_id} is not allowed: channels.{channel}.allowFrom "*" '
            f"lets in direct chats only, and this is a group (or a chat never seen as a direct "
            f"one); add it to channels.{channel}.groups to deliver there"
        )
    return (
        f"{channel} chat {chat_id} is not allowed: it is not in channels.{channel}.allowFrom, "
        f".groups or .ownerIds, and no sender with that id has paired"
    )
