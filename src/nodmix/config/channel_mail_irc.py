"""The `channels.irc` and `channels.email` sections of `nodmix.json`."""

from typing import Annotated, Literal

import msgspec

from nodmix.config.channel_base import ChannelDefaults, ChannelSection

Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]


class IrcSasl(ChannelSection, frozen=True, kw_only=True):
    """`channels.irc.sasl`: SASL PLAIN login (services account)."""

    username: str
    password: str
    """A literal or `${ENV_VAR}`."""


class IrcConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.irc`: one IRC network (private messages are DMs, channels are groups)."""

    enabled: bool = True
    host: str
    port: Port | None = None
    """Default 6697 with TLS, 6667 without."""
    tls: bool = True
    nick: str
    channels: list[str] = []
    """Channels to join (and, unless `groups` is set, the groups the agent answers in)."""
    password: str | None = None
    """Server password (PASS), a literal or `${ENV_VAR}`."""
    sasl: IrcSasl | None = None
    line_delay_seconds: Annotated[float, msgspec.Meta(ge=0, le=10)] | None = None
    """Flood control: pause between lines after a burst of 4 (default 1.0)."""
    agent_id: str | None = None


class ImapSettings(ChannelSection, frozen=True, kw_only=True):
    """`channels.email.imap`: where mail arrives (IMAP IDLE)."""

    host: str
    port: Port | None = None
    """Default 993 with TLS, 143 without."""
    tls: bool = True
    username: str | None = None
    """Default: `channels.email.address`."""
    password: str | None = None
    """A literal or `${ENV_VAR}`."""
    mailbox: str = "INBOX"


class SmtpSettings(ChannelSection, frozen=True, kw_only=True):
    """`channels.email.smtp`: how replies are sent."""

    host: str
    port: Port | None = None
    """Default 465 for `tls`, 587 for `starttls`, 25 for `none`."""
    security: Literal["tls", "starttls", "none"] = "starttls"
    username: str | None = None
    """Default: the IMAP username; `""` sends without logging in."""
    password: str | None = None
    """Default: the IMAP password."""


class EmailAuthentication(ChannelSection, frozen=True, kw_only=True):
    """`channels.email.authentication`: trust a `From` only when the receiving server's
    `Authentication-Results` say DMARC (or an aligned DKIM or SPF) passed."""

    mode: Literal["auto", "require", "off"] = "auto"
    """`auto` (default): check whenever the server adds results; `require`: refuse mail
    without a passing result; `off`: no check (anyone can write any From)."""
    authserv_ids: list[str] | None = None
    """The authserv-ids of your own receiving servers (`mx.example.org`): only their results
    count, and mail without one is refused. Unset: the topmost results field counts."""


class EmailReplyLimit(ChannelSection, frozen=True, kw_only=True):
    """`channels.email.replyLimit`: at most `count` replies to one address per window, so
    an autoresponder that ignores the auto-reply headers cannot keep a loop going."""

    count: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 5
    window_seconds: Annotated[int, msgspec.Meta(ge=1, le=86_400)] = 600


class EmailConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.email`: one mailbox as a channel (each sender is a DM)."""

    enabled: bool = True
    address: str
    """The mailbox's address (the From of replies)."""
    imap: ImapSettings
    smtp: SmtpSettings
    idle_seconds: Annotated[int, msgspec.Meta(ge=10, le=1740)] | None = None
    """Restart IDLE this often (default 600; servers drop IDLE after 30 minutes)."""
    authentication: EmailAuthentication | None = None
    """Sender authentication (default `mode: auto`)."""
    reply_limit: EmailReplyLimit | None = None
    """Replies per sender and window (default 5 per 600 s); mail past it is not answered."""
    agent_id: str | None = None
