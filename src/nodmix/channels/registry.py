"""Which channels exist, which are configured, and how to build their adapters.

Adapters import their platform library only when built, so nothing on the CLI's start-up path
pays for a channel it does not use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from nodmix.channels.access import AccessRules, invite_allowed, resolve_rules
from nodmix.channels.base import ChannelAdapter
from nodmix.channels.pairing import open_pairing_store
from nodmix.config.channel_base import ChannelDefaults
from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError
from nodmix.extras import require

if TYPE_CHECKING:  # `nodmix pairing` and `nodmix cron` read this module and need no `ssl`
    from nodmix.channels.tls import ClientTls

KNOWN_CHANNELS = (
    "telegram",
    "matrix",
    "irc",
    "email",
    "discord",
    "slack",
    "whatsapp",
    "signal",
    "msteams",
    "googlechat",
    "xmpp",
    "mattermost",
)
CORE_CHANNELS = frozenset({"signal"})
"""Channels that need no extra (Signal: JSON-RPC over the core's HTTP client and anyio)."""
VERIFIED_BY_GET = frozenset({"whatsapp"})
"""Channels whose platform checks the webhook URL with a `GET` (served next to the `POST`)."""
ENDPOINT_CHANNELS = ("msteams", "googlechat")
"""Channels whose platform posts every message to the gateway's own port."""


def channel_section(config: NodmixConfig, channel: str) -> ChannelDefaults | None:
    """The `channels.<id>` section, or None when it is absent."""
    if channel not in KNOWN_CHANNELS:
        return None
    section: ChannelDefaults | None = getattr(config.channels, channel, None)
    return section


def enabled_channels(config: NodmixConfig) -> list[str]:
    """Channels whose section exists and is not `enabled: false`."""
    out = []
    for channel in KNOWN_CHANNELS:
        section = channel_section(config, channel)
        if section is not None and getattr(section, "enabled", True):
            out.append(channel)
    return out


def rules_for(config: NodmixConfig, channel: str) -> AccessRules:
    """The channel's effective access rules."""
    section = channel_section(config, channel) or ChannelDefaults()
    rules = resolve_rules(section, config.channels.defaults)
    # IRC, XMPP: the rooms it joins are its groups
    joined = getattr(section, "channels", None) or getattr(section, "rooms", None)
    if joined and section.groups is None and config.channels.defaults.groups is None:
        rules = dataclasses.replace(rules, groups=frozenset(str(c).lower() for c in joined))
    return rules


def webhook_paths(config: NodmixConfig) -> dict[str, str]:
    """`{path: channel}` of the enabled channels that receive updates by webhook (served by
    the gateway's own HTTP server)."""
    paths: dict[str, str] = {}
    telegram = config.channels.telegram
    if telegram is not None and telegram.enabled and telegram.webhook is not None:
        from nodmix.config.channel_webhook import webhook_path

        paths[webhook_path(telegram.webhook)] = "telegram"
    whatsapp = config.channels.whatsapp
    if whatsapp is not None and whatsapp.enabled:
        from nodmix.config.channel_phone import whatsapp_path

        paths[whatsapp_path(whatsapp)] = "whatsapp"
    for channel in ENDPOINT_CHANNELS:
        section = getattr(config.channels, channel, None)
        if section is not None and section.enabled:
            from nodmix.config.channel_teams_chat import endpoint_path

            paths[endpoint_path(channel, section)] = channel
    return paths


def _invite_check(
    config: NodmixConfig, state_dir: Path, channel: str
) -> Callable[[str, str, bool], bool]:
    """Whether to follow an invitation, by the channel's access rules and approved senders."""
    rules = rules_for(config, channel)
    pairing = open_pairing_store(state_dir)

    def check(sender_id: str, room_id: str, direct: bool) -> bool:
        return invite_allowed(
            rules, pairing, channel=channel, sender_id=sender_id, room_id=room_id, direct=direct
        )

    return check


def create_adapter(
    channel: str,
    config: NodmixConfig,
    env: Mapping[str, str],
    state_dir: Path,
    *,
    tls: ClientTls | None = None,
) -> ChannelAdapter:
    """Build (not connect) the adapter of a configured channel; `tls` is the gateway's shared
    TLS client context, for the clients that take one.

    Raises:
        ConfigError: the channel is not configured or its credentials are missing.
        MissingExtraError: the channel's platform library (its extra) is not installed.
    """
    if channel_section(config, channel) is not None and channel not in CORE_CHANNELS:
        require(channel)
    if channel == "telegram" and config.channels.telegram is not None:
        from nodmix.channels.telegram.adapter import TelegramAdapter, telegram_settings

        bot = telegram_settings(config.channels.telegram, env)
        return TelegramAdapter(bot, state_dir, tls.context() if tls is not None else None)
    if channel == "matrix" and config.channels.matrix is not None:
        from nodmix.channels.matrix.adapter import MatrixAdapter, matrix_settings

        settings = matrix_settings(config.channels.matrix, env)
        groups = rules_for(config, channel).groups
        return MatrixAdapter(
            settings, state_dir, _invite_check(config, state_dir, channel), groups=groups
        )
    if channel == "irc" and config.channels.irc is not None:
        from nodmix.channels.irc.adapter import IrcAdapter, irc_settings

        return IrcAdapter(irc_settings(config.channels.irc, env), state_dir)
    if channel == "email" and config.channels.email is not None:
        from nodmix.channels.email.adapter import EmailAdapter
        from nodmix.channels.email.settings import email_settings

        mail = email_settings(config.channels.email, env, config.channels.defaults)
        return EmailAdapter(mail, state_dir)
    if channel == "discord" and config.channels.discord is not None:
        from nodmix.channels.discord.adapter import DiscordAdapter, discord_settings

        return DiscordAdapter(discord_settings(config.channels.discord, env), state_dir)
    if channel == "slack" and config.channels.slack is not None:
        from nodmix.channels.slack.adapter import SlackAdapter, slack_settings

        return SlackAdapter(slack_settings(config.channels.slack, env), state_dir)
    if channel == "whatsapp" and config.channels.whatsapp is not None:
        from nodmix.channels.whatsapp.adapter import WhatsAppAdapter
        from nodmix.channels.whatsapp.settings import whatsapp_settings

        return WhatsAppAdapter(whatsapp_settings(config.channels.whatsapp, env), state_dir)
    if channel == "signal" and config.channels.signal is not None:
        from nodmix.channels.attachments import max_attachment_bytes
        from nodmix.channels.signal.adapter import SignalAdapter
        from nodmix.channels.signal.settings import signal_settings

        cap = max_attachment_bytes(config, "signal")
        signal = signal_settings(config.channels.signal, max_attachment_bytes=cap)
        return SignalAdapter(signal, state_dir)
    if channel in ENDPOINT_CHANNELS and getattr(config.channels, channel, None) is not None:
        return _endpoint_adapter(channel, config, env, state_dir)
    if channel == "xmpp" and config.channels.xmpp is not None:
        from nodmix.channels.xmpp.adapter import XmppAdapter, xmpp_settings

        return XmppAdapter(xmpp_settings(config.channels.xmpp, env), state_dir, tls)
    if channel == "mattermost" and config.channels.mattermost is not None:
        from nodmix.channels.mattermost.adapter import MattermostAdapter, mattermost_settings

        server = mattermost_settings(config.channels.mattermost, env)
        return MattermostAdapter(server, state_dir, tls)
    known = ", ".join(enabled_channels(config)) or "none"
    raise ConfigError(f"channel {channel!r} is not configured (configured: {known})")


def _endpoint_adapter(
    channel: str, config: NodmixConfig, env: Mapping[str, str], state_dir: Path
) -> ChannelAdapter:
    """The Teams or Google Chat adapter (their libraries are an extra, `require`d above)."""
    if channel == "msteams" and config.channels.msteams is not None:
        from nodmix.channels.msteams.adapter import MsTeamsAdapter, msteams_settings

        return MsTeamsAdapter(msteams_settings(config.channels.msteams, env), state_dir)
    assert config.channels.googlechat is not None
    from nodmix.channels.googlechat.adapter import GoogleChatAdapter, googlechat_settings

    return GoogleChatAdapter(googlechat_settings(config.channels.googlechat, env), state_dir)
