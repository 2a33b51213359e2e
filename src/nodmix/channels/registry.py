"""Which channels exist, which are configured, and how to build their adapters.

Adapters import their platform library only when built, so nothing on the CLI's start-up path
pays for a channel it does not use.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from nodmix.channels.access import AccessRules, resolve_rules
from nodmix.channels.base import ChannelAdapter
from nodmix.config.channel_schema import ChannelDefaults
from nodmix.config.schema import NodmixConfig
from nodmix.errors import ConfigError

KNOWN_CHANNELS = ("telegram",)


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
    return resolve_rules(section, config.channels.defaults)


def create_adapter(
    channel: str, config: NodmixConfig, env: Mapping[str, str], state_dir: Path
) -> ChannelAdapter:
    """Build (not connect) the adapter of a configured channel.

    Raises:
        ConfigError: the channel is not configured or its credentials are missing.
    """
    if channel == "telegram" and config.channels.telegram is not None:
        from nodmix.channels.telegram.adapter import TelegramAdapter, telegram_settings

        return TelegramAdapter(telegram_settings(config.channels.telegram, env), state_dir)
    known = ", ".join(enabled_channels(config)) or "none"
    raise ConfigError(f"channel {channel!r} is not configured (configured: {known})")
