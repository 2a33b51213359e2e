"""The `channels.xmpp` and `channels.mattermost` sections of `nodmix.json`."""

from typing import Annotated, Literal

import msgspec

from nodmix.config.channel_base import ChannelDefaults


class XmppConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.xmpp`: one XMPP account (direct chats are DMs, MUC rooms are groups)."""

    enabled: bool = True
    jid: str
    """The bot's bare JID (`nodmix@example.org`)."""
    password: str | None = None
    """The account's password, a literal or `${ENV_VAR}`; `XMPP_PASSWORD` when unset."""
    server: str | None = None
    """Host to connect to (default: found by DNS SRV records of the JID's domain, else the
    domain itself)."""
    port: Annotated[int, msgspec.Meta(ge=1, le=65535)] | None = None
    """Port (default 5222, or 5223 with `tls: "direct"`)."""
    tls: Literal["starttls", "direct", "off"] = "starttls"
    """`starttls` (default: required, the certificate checked), `direct` (TLS from the first
    byte, XEP-0368) or `off` (plain text: only for a server on this machine)."""
    ca_file: str | None = None
    """A PEM file of certificates to trust for this server besides the system's CAs (its
    self-signed certificate, or a private CA's): for a server whose certificate no public CA
    signed. Read at start; `~` is expanded."""
    rooms: list[str] = []
    """MUC rooms to join (`room@conference.example.org`); they are the channel's groups."""
    nick: str | None = None
    """The bot's nickname in rooms (default: the JID's local part)."""
    text_limit: Annotated[int, msgspec.Meta(ge=500, le=60000)] | None = None
    """Longest message body before a reply is split (default 10000 characters)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


class MattermostConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.mattermost`: a Mattermost bot account (WebSocket events + REST API v4)."""

    enabled: bool = True
    url: str
    """The server's address (`https://chat.example.org`)."""
    token: str | None = None
    """The bot's access token, a literal or `${ENV_VAR}`; `MATTERMOST_TOKEN` when unset."""
    text_limit: Annotated[int, msgspec.Meta(ge=500, le=16383)] | None = None
    """Longest post before a reply is split (default 16000 characters: the server's limit is
    16383)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""
