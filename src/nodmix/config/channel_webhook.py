"""Checks of `channels.telegram.webhook`: where Telegram may post updates, and the secret it
sends with them (the Bot API's rules, so a bad value fails at load rather than at setWebhook)."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from nodmix.config.channel_base import TelegramWebhook
from nodmix.errors import ConfigError

SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,256}")
"""What the Bot API accepts as `secret_token`."""
_ENV_REF = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")
_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_secret_token(value: str, *, key: str, file: str | None = None) -> None:
    """The resolved secret token follows the Bot API's charset and length.

    Raises:
        ConfigError: it does not.
    """
    if not SECRET_TOKEN.fullmatch(value):
        raise ConfigError(
            "the secret token must be 1-256 characters of A-Z, a-z, 0-9, _ and -",
            file=file,
            key=key,
        )


def webhook_path(webhook: TelegramWebhook) -> str:
    """The path the gateway serves: `path`, else the path of `url`."""
    if webhook.path:
        return webhook.path
    return urlsplit(webhook.url).path or "/"


def check_webhook(webhook: TelegramWebhook, *, file: str | None, key: str) -> None:
    """`url` is https (http only on loopback), the served path is a plain absolute path that
    is not `/`, and a literal secret token follows the Bot API's rules.

    Raises:
        ConfigError: one of them does not hold (names the key).
    """
    parts = urlsplit(webhook.url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise ConfigError(
            f"{webhook.url!r} is not an absolute https URL", file=file, key=f"{key}.url"
        )
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise ConfigError(
            "Telegram posts updates only to https URLs (http is allowed for a loopback host)",
            file=file,
            key=f"{key}.url",
        )
    if not _ENV_REF.fullmatch(webhook.secret_token.strip()):
        check_secret_token(webhook.secret_token, file=file, key=f"{key}.secretToken")
    path = webhook_path(webhook)
    path_key = f"{key}.path" if webhook.path else f"{key}.url"
    if path == "/" or not _PATH.fullmatch(path) or "/../" in f"{path}/" or "//" in path:
        raise ConfigError(
            f"{path!r} cannot be the webhook path: use a path such as /telegram/webhook",
            file=file,
            key=path_key,
        )
