"""`nodmix security audit` checks of the channels whose platform posts signed requests to the
gateway (Microsoft Teams, Google Chat): where the keys that vouch for a request come from,
where the app's own token is sent, and which tenants may reach a Teams bot."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from nodmix.security.findings import Finding

_KEY_SOURCES = {
    "msteams": (("openIdMetadataUrl", ("login.botframework.com",)),),
    "googlechat": (("certsUrl", ("www.googleapis.com",)),),
}
_TOKEN_SINKS = {
    "msteams": (("tokenUrl", ("login.microsoftonline.com",)),),
    "googlechat": (("apiBaseUrl", ("chat.googleapis.com",)),),
}


def check_endpoint_channels(sections: dict[str, dict[str, Any]]) -> list[Finding]:
    """Findings for the enabled `msteams` / `googlechat` sections (camelCase keys)."""
    found: list[Finding] = []
    for channel in ("msteams", "googlechat"):
        section = sections.get(channel)
        if section is None:
            continue
        for key, hosts in _KEY_SOURCES[channel]:
            if _elsewhere(section.get(key), hosts):
                found.append(
                    Finding(
                        id=f"channels.{channel}.key-source",
                        severity="high",
                        title=f"{channel}: requests are checked against keys from {section[key]}",
                        detail="whoever serves that URL can sign requests the gateway accepts "
                        "as the platform's, from any sender id they like.",
                        fix=f"remove channels.{channel}.{key} (the platform's own is the default)",
                    )
                )
        for key, hosts in _TOKEN_SINKS[channel]:
            if _elsewhere(section.get(key), hosts):
                found.append(
                    Finding(
                        id=f"channels.{channel}.token-sink",
                        severity="medium",
                        title=f"{channel}: the app's credentials go to {section[key]}",
                        detail="its secret or access token is sent there with every request.",
                        fix=f"remove channels.{channel}.{key} unless you run that service",
                    )
                )
    teams = sections.get("msteams")
    if teams is not None and not teams.get("tenantId"):
        found.append(
            Finding(
                id="channels.msteams.any-tenant",
                severity="low",
                title="msteams: users of any Microsoft 365 organisation can message the bot",
                detail="a multi-tenant bot takes activities from every tenant that installs it "
                "(strangers still need pairing or allowFrom).",
                fix="set channels.msteams.tenantId to your directory (tenant) id",
            )
        )
    return found


def _elsewhere(value: Any, hosts: tuple[str, ...]) -> bool:
    """A configured URL whose host is not the platform's own."""
    if not isinstance(value, str) or not value:
        return False
    host = (urlsplit(value).hostname or "").lower()
    return host not in hosts
