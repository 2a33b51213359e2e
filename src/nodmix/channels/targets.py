"""Where the agent may send: one check for every delivery target.

The `message` tool, `nodmix message send`, cron jobs (`nodmix cron add --deliver`, the `cron`
tool), the heartbeat's `deliver` and webhook mappings (`hooks.mappings.<name>.deliver`) all ask
`deliver_refusal`, so a chat the channel's rules do not let in, or a channel that is not
configured, is refused the same way everywhere, with one line naming the rule. A target is
allowed when it is:

- the chat the turn itself came from;
- in the channel's `allowFrom` (`"*"` allows every DM), `groups` or `ownerIds` (IRC and email
  patterns such as `*@example.org` match too);
- a sender the owner approved by pairing.

Light: no platform library is imported, so the CLI can check before anything starts.
"""

from __future__ import annotations

from nodmix.channels.access import AccessRules, mask_matches
from nodmix.channels.pairing import PairingStore
from nodmix.channels.registry import enabled_channels, rules_for
from nodmix.config.schema import NodmixConfig
from nodmix.origin import TurnOrigin


def chat_allowed(rules: AccessRules, pairing: PairingStore, channel: str, chat_id: str) -> bool:
    """Whether the channel's rules let the agent message `chat_id`."""
    allowed = rules.allow_from | rules.owner_ids
    if "*" in rules.allow_from or chat_id in allowed or chat_id in rules.groups:
        return True
    if any(mask_matches(chat_id, entry) for entry in allowed):
        return True  # `*@example.org`, a nick in another case
    return pairing.is_approved(channel, chat_id)


def deliver_refusal(
    config: NodmixConfig,
    pairing: PairingStore,
    channel: str,
    chat_id: str,
    origin: TurnOrigin | None = None,
) -> str | None:
    """Why the agent may not deliver to `channel:chat_id` (one line naming the rule), or None."""
    configured = enabled_channels(config)
    if channel not in configured:
        known = ", ".join(configured) or "none"
        return (
            f"channel {channel!r} is not configured (no channels.{channel} section, or it is "
            f"disabled; configured: {known})"
        )
    if origin is not None and origin.channel == channel and origin.chat_id == chat_id:
        return None
    if chat_allowed(rules_for(config, channel), pairing, channel, chat_id):
        return None
    return (
        f"{channel} chat {chat_id} is not allowed: it is not in channels.{channel}.allowFrom, "
        f".groups or .ownerIds, and no sender with that id has paired"
    )
