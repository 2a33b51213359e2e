"""The `channels.whatsapp` and `channels.signal` sections of `nodmix.json`, and their checks."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

import msgspec

from nodmix.config.channel_base import ChannelDefaults
from nodmix.errors import ConfigError

PeerId = str | int
_PATH = re.compile(r"/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")
_E164 = re.compile(r"\+[1-9][0-9]{6,15}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
DEFAULT_WHATSAPP_PATH = "/whatsapp"


class WhatsAppConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.whatsapp`: a WhatsApp Business number through the Cloud API (updates arrive
    as signed webhook requests on the gateway's port)."""

    enabled: bool = True
    phone_number_id: PeerId
    """The business number's Phone number ID (WhatsApp → API Setup), not the number."""
    access_token: str | None = None
    """A permanent (system user) access token, a literal or `${ENV_VAR}`;
    `WHATSAPP_ACCESS_TOKEN` when unset."""
    app_secret: str | None = None
    """The Meta app's secret (App settings → Basic), a literal or `${ENV_VAR}`: every webhook
    request must carry its `X-Hub-Signature-256`. Required."""
    verify_token: str | None = None
    """Any string you choose, also typed into the app's webhook settings; Meta sends it back
    when it verifies the callback URL. Required."""
    api_base_url: str | None = None
    """Graph API server (default `https://graph.facebook.com`)."""
    api_version: str | None = None
    """Graph API version (default: the newest the client library knows, e.g. `23.0`)."""
    webhook_path: str | None = None
    """The path the gateway serves the webhook on (default `/whatsapp`)."""
    request_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=300)] | None = None
    """Longest wait for one Graph API answer before it is tried again (default 30)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


class SignalConfig(ChannelDefaults, frozen=True, kw_only=True):
    """`channels.signal`: a Signal account through a `signal-cli` daemon's JSON-RPC."""

    enabled: bool = True
    account: str
    """The account's number in international form (`+4915123456789`)."""
    http_url: str | None = None
    """The daemon's HTTP endpoint (`signal-cli daemon --http 127.0.0.1:8080`)."""
    socket_path: str | None = None
    """The daemon's UNIX socket (`signal-cli daemon --socket PATH`)."""
    attachments_dir: str | None = None
    """Where the daemon saves received attachments, when it runs on this machine (default:
    fetch each file over JSON-RPC with `getAttachment`)."""
    request_timeout_seconds: Annotated[float, msgspec.Meta(gt=0, le=300)] | None = None
    """Longest wait for one JSON-RPC answer (default 30)."""
    agent_id: str | None = None
    """Agent that answers this channel (default: `bindings`, else the default agent)."""


def whatsapp_path(section: WhatsAppConfig) -> str:
    """The path the gateway serves the WhatsApp webhook on."""
    return section.webhook_path or DEFAULT_WHATSAPP_PATH


def check_whatsapp(section: WhatsAppConfig, *, file: str | None) -> None:
    """Signed webhooks only: `appSecret` and `verifyToken` are set, the path is plain.

    Raises:
        ConfigError: a rule is broken (names the key).
    """
    key = "channels.whatsapp"
    if not str(section.phone_number_id).strip().isdigit():
        raise ConfigError(
            "the Phone number ID is the number Meta shows under WhatsApp → API Setup "
            "(digits only), not the phone number",
            file=file,
            key=f"{key}.phoneNumberId",
        )
    if not (section.app_secret or "").strip():
        raise ConfigError(
            "WhatsApp webhooks are accepted only when signed: set the Meta app's secret "
            '(App settings → Basic → App secret), e.g. "${WHATSAPP_APP_SECRET}"',
            file=file,
            key=f"{key}.appSecret",
        )
    if not (section.verify_token or "").strip():
        raise ConfigError(
            "set the verify token you also type into the app's webhook settings "
            '(any long random string, e.g. "${WHATSAPP_VERIFY_TOKEN}")',
            file=file,
            key=f"{key}.verifyToken",
        )
    path = whatsapp_path(section)
    if path == "/" or not _PATH.fullmatch(path) or "/../" in f"{path}/" or "//" in path:
        raise ConfigError(
            f"{path!r} cannot be the webhook path: use a path such as /whatsapp",
            file=file,
            key=f"{key}.webhookPath",
        )
    if section.api_base_url is not None:
        _check_http_url(section.api_base_url, file=file, key=f"{key}.apiBaseUrl")


def check_signal(section: SignalConfig, *, file: str | None) -> None:
    """One transport, a number in international form, senders named by their ACI.

    Raises:
        ConfigError: a rule is broken (names the key).
    """
    key = "channels.signal"
    if not _E164.fullmatch(section.account):
        raise ConfigError(
            "the account is the number signal-cli registered or linked, in international "
            "form (+4915123456789)",
            file=file,
            key=f"{key}.account",
        )
    if (section.http_url is None) == (section.socket_path is None):
        raise ConfigError(
            "needs exactly one of httpUrl (signal-cli daemon --http) or socketPath "
            "(signal-cli daemon --socket)",
            file=file,
            key=key,
        )
    if section.http_url is not None:
        _check_http_url(section.http_url, file=file, key=f"{key}.httpUrl")
    for list_key, entries in (("allowFrom", section.allow_from), ("ownerIds", section.owner_ids)):
        for i, entry in enumerate(entries or []):
            text = str(entry)
            if text != "*" and not _UUID.fullmatch(text):
                raise ConfigError(
                    f"{text!r}: Signal senders are named by their account id (ACI, a UUID such "
                    "as 3f2a...-...), which stays the same when a number changes hands; a "
                    "sender who writes is shown with theirs in `nodmix pairing list`",
                    file=file,
                    key=f"{key}.{list_key}[{i}]",
                )


def _check_http_url(url: str, *, file: str | None, key: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{url!r} is not an absolute http(s) URL", file=file, key=key)
