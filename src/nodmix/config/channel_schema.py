"""The `channels`, `session` and `bindings` sections of `nodmix.json`.

`channels.<id>` configures one chat channel (a channel starts when its section exists, unless
`enabled: false`); `channels.defaults` holds access rules shared by every channel. Access keys
left unset resolve, in order, from the channel's section, `channels.defaults`, then the
built-in defaults (`nodmix.channels.access.resolve_rules`).
"""

from typing import Annotated, Literal

import msgspec

from nodmix.config.channel_base import (
    ChannelDefaults,
    ChannelSection,
    PeerId,
    TelegramWebhook,
)
from nodmix.config.channel_mail_irc import EmailConfig, IrcConfig
from nodmix.config.channel_phone import (
    SignalConfig,
    WhatsAppConfig,
    check_signal,
    check_whatsapp,
)
from nodmix.config.channel_xmpp_mm import MattermostConfig, XmppConfig


class TelegramConfig(ChannelDefaults, frozen=True):
    """`channels.telegram`: a Telegram bot (long polling, or a webhook)."""

    enabled: bool = True
    bot_token: str | None = None
    """The bot token, a literal or `${ENV_VAR}`; `TELEGRAM_BOT_TOKEN` when unset."""
    api_base_url: str | None = None
    """Bot API server; requests go to `<apiBaseUrl>/bot<token>/<method>`.
    Default `https://api.telegram.org`."""
    poll_timeout_seconds: Annotated[int, msgspec.Meta(ge=0, le=50)] | None = None
    """Long-poll timeout of `getUpdates` (default 25)."""
    webhook: TelegramWebhook | None = None
    """Webhook mode (default: long polling); the gateway serves the path on its own port."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


class MatrixConfig(ChannelDefaults, frozen=True):
    """`channels.matrix`: a Matrix account (client-server API, long-polling `/sync`)."""

    enabled: bool = True
    homeserver: str | None = None
    """The homeserver's client-server API URL (`https://matrix.example.org`)."""
    user_id: str | None = None
    """The bot's full user id (`@nodmix:example.org`)."""
    access_token: str | None = None
    """An access token, a literal or `${ENV_VAR}`; `MATRIX_ACCESS_TOKEN` when unset."""
    password: str | None = None
    """Log in with this password instead (a literal or `${ENV_VAR}`); the device and its token
    are then kept in the state dir and reused."""
    device_name: str | None = None
    """Name of the device a password login creates (default `Nodmix`)."""
    text_limit: Annotated[int, msgspec.Meta(ge=500, le=32000)] | None = None
    """Longest message body before a reply is split (default 16000 characters)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


class DiscordConfig(ChannelDefaults, frozen=True):
    """`channels.discord`: a Discord bot (Gateway WebSocket + REST)."""

    enabled: bool = True
    token: str | None = None
    """The bot token, a literal or `${ENV_VAR}`; `DISCORD_BOT_TOKEN` when unset."""
    api_base_url: str | None = None
    """REST API base, version included (default `https://discord.com/api/v10`); the Gateway
    URL is then read from its `GET /gateway/bot`."""
    guilds: list[PeerId] | None = None
    """Guild (server) ids the bot answers in; messages from other guilds are ignored. Unset:
    any guild (channels are still checked against `groups` / `groupPolicy`)."""
    slash_commands: bool | None = None
    """Register `/new`, `/compact`, `/status`, `/stop` and `/help` as slash commands (default
    true)."""
    allowed_mentions: list[Literal["users", "roles", "everyone"]] | None = None
    """Which mentions in the bot's replies may notify anyone (default none: a reply that
    contains `@everyone`, `<@&role>` or `<@user>` shows them as text and pings nobody)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


class SlackConfig(ChannelDefaults, frozen=True):
    """`channels.slack`: a Slack app (Socket Mode by default, or HTTP Events API)."""

    enabled: bool = True
    bot_token: str | None = None
    """The bot token (`xoxb-...`), a literal or `${ENV_VAR}`; `SLACK_BOT_TOKEN` when unset."""
    app_token: str | None = None
    """The app-level token (`xapp-...`) for Socket Mode; `SLACK_APP_TOKEN` when unset."""
    mode: Literal["socket", "http"] | None = None
    """`socket` (default: no public URL needed) or `http` (Events API requests to
    `http://<httpHost>:<httpPort>/slack/events`, verified with `signingSecret`)."""
    signing_secret: str | None = None
    """Signing secret for `mode: http`; `SLACK_SIGNING_SECRET` when unset."""
    http_host: str | None = None
    """Address the `mode: http` listener binds (default `127.0.0.1`; put a TLS proxy before it)."""
    http_port: Annotated[int, msgspec.Meta(ge=1, le=65535)] | None = None
    """Port of the `mode: http` listener (default 3000)."""
    api_base_url: str | None = None
    """Web API base (default `https://slack.com/api/`)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


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


class ChannelsConfig(ChannelSection, frozen=True):
    """`channels`."""

    defaults: ChannelDefaults = ChannelDefaults()
    telegram: TelegramConfig | None = None
    matrix: MatrixConfig | None = None
    irc: IrcConfig | None = None
    email: EmailConfig | None = None
    discord: DiscordConfig | None = None
    slack: SlackConfig | None = None
    whatsapp: WhatsAppConfig | None = None
    signal: SignalConfig | None = None
    msteams: MsTeamsConfig | None = None
    googlechat: GoogleChatConfig | None = None
    xmpp: XmppConfig | None = None
    mattermost: MattermostConfig | None = None


class SessionConfig(ChannelSection, frozen=True):
    """`session`: how channel conversations map to sessions."""

    dm_scope: Literal["main", "per-peer"] | None = None
    """`main` (default): direct messages from approved senders continue the agent's main
    session; `per-peer`: one session per sender."""


class BindingMatch(ChannelSection, frozen=True):
    """`bindings[].match`: which messages a binding routes."""

    channel: str
    account_id: str | None = None
    peer: PeerId | None = None
    """A sender id (DMs) or chat id (groups)."""


class BindingConfig(ChannelSection, frozen=True):
    """`bindings[]`: route a channel, account or peer to an agent."""

    agent_id: str
    match: BindingMatch


CHANNEL_SECTIONS = (
    "telegram",
    "matrix",
    "irc",
    "email",
    "msteams",
    "googlechat",
    "xmpp",
    "mattermost",
    "discord",
    "slack",
    "whatsapp",
    "signal",
)
"""The `channels.<id>` sections that hold access rules (every channel's)."""


def check_channel_rules(channels: ChannelsConfig, *, file: str) -> None:
    """Cross-field rules: `dmPolicy: open` needs `"*"` in `allowFrom`.

    Raises:
        ConfigError: a rule is broken (names the file and the dotted key).
    """
    from nodmix.errors import ConfigError

    defaults = channels.defaults
    if defaults.owner_ids is not None:
        raise ConfigError(
            "the owner's ids differ per platform: set ownerIds in each channel's section",
            file=file,
            key="channels.defaults.ownerIds",
        )
    sections: list[tuple[str, ChannelDefaults]] = [("defaults", defaults)]
    for name in CHANNEL_SECTIONS:
        section_of: ChannelDefaults | None = getattr(channels, name, None)
        if section_of is not None:
            sections.append((name, section_of))
    for name, section in sections:
        if "*" in [str(o) for o in section.owner_ids or []]:
            raise ConfigError(
                "ownerIds names the owner's own sender ids; a wildcard would make everyone "
                "the owner",
                file=file,
                key=f"channels.{name}.ownerIds",
            )
        policy = section.dm_policy or (defaults.dm_policy if name != "defaults" else None)
        allow = section.allow_from if section.allow_from is not None else defaults.allow_from
        if policy == "open" and "*" not in [str(a) for a in allow or []]:
            raise ConfigError(
                'dmPolicy "open" lets anyone reach the agent; confirm it with allowFrom: ["*"]',
                file=file,
                key=f"channels.{name}.dmPolicy",
            )
    if channels.telegram is not None and channels.telegram.webhook is not None:
        from nodmix.config.channel_webhook import check_webhook

        check_webhook(channels.telegram.webhook, file=file, key="channels.telegram.webhook")
    if channels.whatsapp is not None:
        check_whatsapp(channels.whatsapp, file=file)
    if channels.signal is not None:
        check_signal(channels.signal, file=file)
