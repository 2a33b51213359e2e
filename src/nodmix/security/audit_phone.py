"""`nodmix security audit` checks of the WhatsApp and Signal channels: credentials written
into the config file, a Graph API reached without TLS, a guessable verify token, and a
signal-cli daemon whose unauthenticated JSON-RPC anyone else can reach."""

from __future__ import annotations

import ipaddress
import os
import stat
from typing import Any
from urllib.parse import urlsplit

from nodmix.security.audit_channels import enabled_sections
from nodmix.security.findings import AuditInputs, Finding

MIN_VERIFY_TOKEN = 16


def check_phone_channels(inputs: AuditInputs) -> list[Finding]:
    """Findings for `channels.whatsapp` and `channels.signal`."""
    sections = enabled_sections(inputs)
    found: list[Finding] = []
    if "whatsapp" in sections:
        found += _whatsapp(sections["whatsapp"])
    if "signal" in sections:
        found += _signal(sections["signal"])
    return found


def _literal(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not value.strip().startswith("${")


def _whatsapp(section: dict[str, Any]) -> list[Finding]:
    found = []
    written = [k for k in ("accessToken", "appSecret") if _literal(section.get(k))]
    if written:
        found.append(
            Finding(
                id="channels.whatsapp.secrets-in-config",
                severity="medium",
                title=f"whatsapp: {' and '.join(written)} written into the config file",
                detail="whoever reads nodmix.json (a backup, a pasted config) can send as the "
                "business number, or forge webhook updates that pass the signature check.",
                fix='use "${WHATSAPP_ACCESS_TOKEN}" and "${WHATSAPP_APP_SECRET}" and keep the '
                "values in the environment",
            )
        )
    verify = section.get("verifyToken")
    if _literal(verify) and len(str(verify)) < MIN_VERIFY_TOKEN:
        found.append(
            Finding(
                id="channels.whatsapp.short-verify-token",
                severity="low",
                title="whatsapp: the verify token is short",
                detail="it only proves the callback URL to Meta, but a guessable one lets "
                "anyone confirm the URL serves this number.",
                fix=f"use a random string of {MIN_VERIFY_TOKEN}+ characters "
                "(python3 -c 'import secrets; print(secrets.token_urlsafe(24))')",
            )
        )
    base = section.get("apiBaseUrl")
    if isinstance(base, str) and _cleartext_remote(base):
        found.append(
            Finding(
                id="channels.whatsapp.cleartext-api",
                severity="high",
                title=f"whatsapp: the Graph API at {base} is reached without TLS",
                detail="the access token travels in clear with every call.",
                fix="use an https:// apiBaseUrl (or remove it: graph.facebook.com)",
            )
        )
    return found


def _signal(section: dict[str, Any]) -> list[Finding]:
    url = section.get("httpUrl")
    if isinstance(url, str) and not _loopback(url):
        return [
            Finding(
                id="channels.signal.remote-daemon",
                severity="high" if url.startswith("http://") else "medium",
                title=f"signal: the signal-cli daemon is reached over the network ({url})",
                detail="its JSON-RPC has no authentication: whoever reaches that address can "
                "read every message and send as the account.",
                fix="run the daemon on this machine bound to 127.0.0.1 (or use socketPath); "
                "otherwise put it behind an authenticating TLS proxy on a private network",
            )
        ]
    path = section.get("socketPath")
    if isinstance(path, str):
        try:
            mode = os.stat(os.path.expanduser(path)).st_mode
        except OSError:
            return []
        if mode & (stat.S_IWOTH | stat.S_IROTH):
            return [
                Finding(
                    id="channels.signal.open-socket",
                    severity="high",
                    title=f"signal: other users of this machine can open {path}",
                    detail="the daemon's socket has no authentication: any local user can "
                    "read every message and send as the account.",
                    fix=f"chmod 600 {path} (or put it in a private directory, 0700)",
                )
            ]
    return []


def _host(url: str) -> str:
    return (urlsplit(url).hostname or "").lower()


def _loopback(url: str) -> bool:
    host = _host(url)
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _cleartext_remote(url: str) -> bool:
    return urlsplit(url).scheme == "http" and not _loopback(url)
