"""`channels.email` resolved: ports by security mode, SMTP login defaults, secrets from the
environment, a missing password named by its key."""

from __future__ import annotations

import msgspec
import pytest

from nodmix.channels.email.settings import email_settings
from nodmix.config.channel_mail_irc import EmailConfig
from nodmix.errors import ConfigError


def _section(**over: object) -> EmailConfig:
    raw = {
        "address": "agent@example.org",
        "imap": {"host": "imap.example.org", "password": "${MAIL_PW}"},
        "smtp": {"host": "smtp.example.org"},
        **over,
    }
    return msgspec.convert(raw, EmailConfig)


def test_defaults_log_in_as_the_address_with_the_imap_password_everywhere() -> None:
    s = email_settings(_section(), {"MAIL_PW": "pw"})
    assert (s.imap_port, s.imap_tls, s.imap_user, s.imap_password) == (
        993,
        True,
        "agent@example.org",
        "pw",
    )
    assert (s.smtp_port, s.smtp_security, s.smtp_user, s.smtp_password) == (
        587,
        "starttls",
        "agent@example.org",
        "pw",
    )


def test_smtp_ports_follow_security_and_an_empty_username_sends_without_login() -> None:
    s = email_settings(
        _section(smtp={"host": "h", "security": "tls", "username": ""}), {"MAIL_PW": "pw"}
    )
    assert (s.smtp_port, s.smtp_user, s.smtp_password) == (465, None, None)
    s = email_settings(_section(smtp={"host": "h", "security": "none"}), {"MAIL_PW": "pw"})
    assert s.smtp_port == 25


def test_a_missing_password_or_variable_names_the_key() -> None:
    with pytest.raises(ConfigError, match="MAIL_PW") as unset:
        email_settings(_section(), {})
    assert unset.value.key == "channels.email.imap.password"
    with pytest.raises(ConfigError) as missing:
        email_settings(_section(imap={"host": "h"}), {})
    assert missing.value.key == "channels.email.imap.password"
