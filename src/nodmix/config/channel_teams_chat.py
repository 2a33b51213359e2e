"""The `channels.msteams` and `channels.googlechat` sections of `nodmix.json`: two channels
whose platform posts each message to the gateway's own HTTP port, signed with a JWT."""

from __future__ import annotations

from nodmix.config.channel_schema import ChannelDefaults, ChannelSection
from nodmix.errors import ConfigError


class MsTeamsConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.msteams`: a Microsoft Teams bot (Azure Bot registration, Bot Framework)."""

    enabled: bool = True
    app_id: str | None = None
    """The bot's Microsoft App ID (a GUID); `MSTEAMS_APP_ID` when unset."""
    app_password: str | None = None
    """The app's client secret, a literal or `${ENV_VAR}`; `MSTEAMS_APP_PASSWORD` when unset."""
    tenant_id: str | None = None
    """Single-tenant bot: its directory (tenant) id. Tokens come from that tenant, and
    activities from any other tenant are refused. Unset: a multi-tenant bot."""
    path: str | None = None
    """The path the gateway serves the messaging endpoint on (default
    `/channels/msteams/messages`)."""
    open_id_metadata_url: str | None = None
    """Where the Bot Framework's signing keys are listed (default
    `https://login.botframework.com/v1/.well-known/openidconfiguration`)."""
    token_url: str | None = None
    """OAuth 2.0 token endpoint for the bot's own token (default
    `https://login.microsoftonline.com/<tenantId or botframework.com>/oauth2/v2.0/token`)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


class GoogleChatConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.googlechat`: a Google Chat app (HTTP endpoint, Chat REST API)."""

    enabled: bool = True
    service_account_file: str | None = None
    """Path of the app's service-account key file (JSON)."""
    credentials: str | None = None
    """The key file's JSON itself, a literal or `${ENV_VAR}` (instead of the file)."""
    audience: str
    """What Google Chat signs its requests for: the Cloud project number (`Authentication
    Audience: Project Number`) or the endpoint's HTTPS URL (`HTTP endpoint URL`)."""
    path: str | None = None
    """The path the gateway serves the endpoint on (default `/channels/googlechat/events`)."""
    certs_url: str | None = None
    """Where the request tokens' signing certificates are (default: Google's, chosen by the
    kind of `audience`)."""
    api_base_url: str | None = None
    """Chat REST API base (default `https://chat.googleapis.com`)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


DEFAULT_PATHS = {
    "msteams": "/channels/msteams/messages",
    "googlechat": "/channels/googlechat/events",
}


def endpoint_path(channel: str, section: MsTeamsConfig | GoogleChatConfig) -> str:
    """The path the gateway serves the channel's endpoint on."""
    return section.path or DEFAULT_PATHS[channel]


def check_endpoint_sections(channels: ChannelSection, *, file: str) -> None:
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
