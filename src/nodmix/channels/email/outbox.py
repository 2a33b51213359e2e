"""SMTP out (aiosmtplib): send one mail, or check that the server greets and accepts the login."""

from __future__ import annotations

from email.message import EmailMessage

import aiosmtplib

from nodmix.channels.email.settings import EmailSettings

TIMEOUT_SECONDS = 30.0


async def send_mail(s: EmailSettings, mail: EmailMessage) -> None:
    """Hand `mail` to the SMTP server."""
    await aiosmtplib.send(
        mail,
        hostname=s.smtp_host,
        port=s.smtp_port,
        username=s.smtp_user,
        password=s.smtp_password,
        use_tls=s.smtp_security == "tls",
        start_tls=s.smtp_security == "starttls",
        timeout=TIMEOUT_SECONDS,
    )


async def check_smtp(s: EmailSettings) -> None:
    """Connect (TLS as configured), log in when there is a user, and quit."""
    smtp = aiosmtplib.SMTP(
        hostname=s.smtp_host,
        port=s.smtp_port,
        use_tls=s.smtp_security == "tls",
        start_tls=s.smtp_security == "starttls",
        timeout=TIMEOUT_SECONDS,
    )
    await smtp.connect()
    try:
        if s.smtp_user and s.smtp_password:
            await smtp.login(s.smtp_user, s.smtp_password)
    finally:
        await smtp.quit()
