"""Resolved `channels.email`: passwords from `${VAR}`, ports from the security mode."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodmix.channels.email.authentication import AuthPolicy
from nodmix.config.channel_base import ChannelDefaults
from nodmix.config.channel_mail_irc import EmailConfig, EmailReplyLimit
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

DEFAULT_MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""`channels.defaults.maxAttachmentBytes` when unset (also in `nodmix.channels.attachments`)."""


@dataclass(frozen=True, slots=True)
class EmailSettings:
    """Resolved `channels.email`."""

    address: str
    imap_host: str
    imap_port: int
    imap_tls: bool
    imap_user: str
    imap_password: str
    mailbox: str
    smtp_host: str
    smtp_port: int
    smtp_security: str
    smtp_user: str | None
    smtp_password: str | None
    idle_seconds: int = 600
    max_attachment_bytes: int = DEFAULT_MAX_ATTACHMENT_BYTES
    authentication: AuthPolicy = AuthPolicy()
    reply_limit: int = EmailReplyLimit().count
    reply_window_seconds: float = EmailReplyLimit().window_seconds
    channel: str = "email"


def email_settings(
    section: EmailConfig, env: Mapping[str, str], defaults: ChannelDefaults | None = None
) -> EmailSettings:
    """Resolve passwords (`${VAR}`) and defaults (`defaults`: `channels.defaults`).

    Raises:
        ConfigError: no IMAP password, or a referenced variable is not set.
    """
    imap, smtp = section.imap, section.smtp
    password = resolve_secret(imap.password, key="channels.email.imap.password", env=env)
    if not password:
        raise ConfigError("no IMAP password", key="channels.email.imap.password")
    user = imap.username or section.address
    smtp_password = resolve_secret(smtp.password, key="channels.email.smtp.password", env=env)
    smtp_user = user if smtp.username is None else smtp.username
    ports = {"tls": 465, "starttls": 587, "none": 25}
    limit = section.reply_limit or EmailReplyLimit()
    return EmailSettings(
        address=section.address,
        imap_host=imap.host,
        imap_port=imap.port or (993 if imap.tls else 143),
        imap_tls=imap.tls,
        imap_user=user,
        imap_password=password,
        mailbox=imap.mailbox,
        smtp_host=smtp.host,
        smtp_port=smtp.port or ports[smtp.security],
        smtp_security=smtp.security,
        smtp_user=smtp_user or None,
        smtp_password=(smtp_password if smtp.password is not None else password)
        if smtp_user
        else None,
        idle_seconds=section.idle_seconds or 600,
        max_attachment_bytes=next(
            (
                value
                for value in (
                    section.max_attachment_bytes,
                    defaults.max_attachment_bytes if defaults is not None else None,
                )
                if value is not None
            ),
            DEFAULT_MAX_ATTACHMENT_BYTES,
        ),
        authentication=AuthPolicy(
            mode=auth.mode, authserv_ids=frozenset(i.lower() for i in auth.authserv_ids or ())
        )
        if (auth := section.authentication) is not None
        else AuthPolicy(),
        reply_limit=limit.count,
        reply_window_seconds=float(limit.window_seconds),
    )
