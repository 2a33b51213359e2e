"""What every channel section of `nodmix.json` shares: the section base, the access rules
every channel inherits (`channels.defaults`), and the Telegram webhook section the config
checks read (`channel_webhook.py`)."""

from typing import Annotated, Literal

import msgspec

DmPolicy = Literal["pairing", "allowlist", "open", "disabled"]
GroupPolicy = Literal["allowlist", "open", "disabled"]
PeerId = str | int


class ChannelSection(
    msgspec.Struct,
    frozen=True,
    kw_only=True,
    rename="camel",
    forbid_unknown_fields=True,
    omit_defaults=True,
):
    """Base of the channel sections (same rules as every config section)."""


class ChannelDefaults(ChannelSection, frozen=True):
    """`channels.defaults`: access rules every channel inherits."""

    dm_policy: DmPolicy | None = None
    """`pairing` (default), `allowlist`, `open` (needs `"*"` in `allowFrom`) or `disabled`."""
    allow_from: list[PeerId] | None = None
    """Sender ids allowed to message the agent directly (`"*"`: anyone)."""
    group_policy: GroupPolicy | None = None
    """`allowlist` (default: only `groups`), `open` or `disabled`."""
    groups: list[PeerId] | None = None
    """Group/chat ids the agent answers in under `groupPolicy: allowlist`."""
    require_mention: bool | None = None
    """In groups, answer only messages that mention the bot or reply to it (default true)."""
    typing: bool | None = None
    """Show the platform's typing indicator while a turn runs (default true)."""
    streaming: Literal["off", "edit"] | None = None
    """`off` (default): send the reply when the turn ends; `edit`: send the first words at
    once and edit that message as the reply grows (channels that can edit messages)."""
    owner_ids: list[PeerId] | None = None
    """The owner's sender ids on this channel (set by `nodmix pairing approve <channel>
    <code> --owner` and by onboarding). Their DMs continue the main session and speak for
    the owner; only they answer exec approvals. Other senders get sessions of their own.
    A channel's own setting: `channels.defaults.ownerIds` is refused."""
    max_attachment_bytes: Annotated[int, msgspec.Meta(ge=0)] | None = None
    """Attachments larger than this are refused with a reply, never saved (default 20 MB)."""


class TelegramWebhook(ChannelSection, frozen=True):
    """`channels.telegram.webhook`: receive updates as HTTPS requests instead of polling."""

    url: str
    """The public HTTPS URL Telegram posts updates to (`http` only for a loopback host)."""
    secret_token: str
    """Sent by Telegram in `X-Telegram-Bot-Api-Secret-Token`; a literal or `${ENV_VAR}`,
    1-256 characters `A-Z a-z 0-9 _ -`."""
    path: str | None = None
    """The path the gateway serves it on (default: the path of `url`), for a proxy that
    rewrites paths."""
