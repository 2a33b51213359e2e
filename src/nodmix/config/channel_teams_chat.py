"""Checks of the `channels.msteams` and `channels.googlechat` sections: two channels whose
platform posts each message to the gateway's own HTTP port, signed with a JWT."""

from __future__ import annotations

from nodmix.config.channel_schema import ChannelsConfig, GoogleChatConfig, MsTeamsConfig
from nodmix.errors import ConfigError

DEFAULT_PATHS = {
    "msteams": "/channels/msteams/messages",
    "googlechat": "/channels/googlechat/events",
}


def endpoint_path(channel: str, section: MsTeamsConfig | GoogleChatConfig) -> str:
    """The path the gateway serves the channel's endpoint on."""
    return section.path or DEFAULT_PATHS[channel]


def check_endpoint_sections(channels: ChannelsConfig, *, file: str) -> None:
    """The endpoint paths are plain absolute paths; Google Chat has one source of credentials.

    Raises:
        ConfigError: a rule is broken (names the file and the key).
    """
    for name in ("msteams", "googlechat"):
        section = getattr(channels, name, None)
        if section is None:
            continue
        path = endpoint_path(name, section)
        if not path.startswith("/") or path == "/" or "//" in path or "/../" in f"{path}/":
            raise ConfigError(
                f"{path!r} cannot be the endpoint path: use a path such as {DEFAULT_PATHS[name]}",
                file=file,
                key=f"channels.{name}.path",
            )
    chat = getattr(channels, "googlechat", None)
    if chat is not None and chat.service_account_file and chat.credentials:
        raise ConfigError(
            "set serviceAccountFile or credentials, not both",
            file=file,
            key="channels.googlechat.credentials",
        )
    if chat is not None and not chat.audience.strip():
        raise ConfigError(
            "the audience is the Cloud project number or the endpoint URL",
            file=file,
            key="channels.googlechat.audience",
        )
