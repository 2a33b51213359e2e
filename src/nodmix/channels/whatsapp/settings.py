"""`channels.whatsapp` resolved: secrets read from the environment, defaults filled in."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from nodmix.config.channel_phone import WhatsAppConfig, whatsapp_path
from nodmix.config.loader import resolve_secret
from nodmix.errors import ConfigError

DEFAULT_API = "https://graph.facebook.com"


@dataclass(frozen=True, slots=True)
class WhatsAppSettings:
    """Resolved `channels.whatsapp`."""

    phone_number_id: str
    access_token: str
    app_secret: str
    verify_token: str
    webhook_path: str = "/whatsapp"
    api_base_url: str = DEFAULT_API
    api_version: str | None = None
    timeout_seconds: float = 30.0
    channel: str = "whatsapp"

    def __repr__(self) -> str:  # never the secrets, in a log line or a traceback
        return f"WhatsAppSettings(phone_number_id={self.phone_number_id!r})"


def whatsapp_settings(section: WhatsAppConfig, env: Mapping[str, str]) -> WhatsAppSettings:
    """Resolve the token (`accessToken`, `${VAR}` or `WHATSAPP_ACCESS_TOKEN`) and secrets.

    Raises:
        ConfigError: a credential is missing (names the key).
    """
    key = "channels.whatsapp"
    token = resolve_secret(section.access_token, key=f"{key}.accessToken", env=env)
    token = token or env.get("WHATSAPP_ACCESS_TOKEN")
    if not token:
        raise ConfigError(
            "no access token: set channels.whatsapp.accessToken or WHATSAPP_ACCESS_TOKEN",
            key=f"{key}.accessToken",
        )
    secret = resolve_secret(section.app_secret, key=f"{key}.appSecret", env=env)
    verify = resolve_secret(section.verify_token, key=f"{key}.verifyToken", env=env)
    if not secret:
        raise ConfigError("the app secret is empty", key=f"{key}.appSecret")
    if not verify:
        raise ConfigError("the verify token is empty", key=f"{key}.verifyToken")
    return WhatsAppSettings(
        phone_number_id=str(section.phone_number_id).strip(),
        access_token=token,
        app_secret=secret,
        verify_token=verify,
        webhook_path=whatsapp_path(section),
        api_base_url=(section.api_base_url or DEFAULT_API).rstrip("/"),
        api_version=section.api_version,
        timeout_seconds=section.request_timeout_seconds or 30.0,
    )
