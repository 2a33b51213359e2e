"""`nodmix security audit` checks of how channels know who is speaking and whom replies may
reach: email sender authentication, IRC allowlist entries that trust a nick, Discord replies
allowed to ping, XMPP and Mattermost credentials sent in the clear, XMPP room senders
without an address."""

from __future__ import annotations

from typing import Any

import msgspec

from nodmix.security.audit_endpoints import check_endpoint_channels
from nodmix.security.findings import AuditInputs, Finding

_PINGS = (("everyone", "@everyone and @here"), ("roles", "whole roles"))


def enabled_sections(inputs: AuditInputs) -> dict[str, dict[str, Any]]:
    """Enabled `channels.<id>` sections (camelCase), with `channels.defaults` filled in."""
    raw = getattr(inputs.config, "channels", None)
    data = msgspec.to_builtins(raw) if raw is not None else None
    if not isinstance(data, dict):
        return {}
    defaults = data.get("defaults") or {}
    return {
        name: {**defaults, **section}
        for name, section in data.items()
        if name != "defaults" and isinstance(section, dict) and section.get("enabled", True)
    }


def check_channel_identity(inputs: AuditInputs) -> list[Finding]:
    """Senders a channel cannot tell apart, and replies that may ping a whole server."""
    sections = enabled_sections(inputs)
    found: list[Finding] = []
    if "email" in sections:
        found += _email(sections["email"])
    if "irc" in sections:
        found += _irc(sections["irc"])
    if "discord" in sections:
        found += _discord(sections["discord"])
    if "xmpp" in sections:
        found += _xmpp(sections["xmpp"])
    if "mattermost" in sections:
        found += _mattermost(sections["mattermost"])
    return found + check_endpoint_channels(sections)


def _loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _xmpp(section: dict[str, Any]) -> list[Finding]:
    found = []
    host = str(section.get("server") or str(section.get("jid", "")).partition("@")[2])
    if section.get("tls") == "off" and not _loopback(host):
        found.append(
            Finding(
                id="channels.xmpp.plaintext",
                severity="high",
                title=f"xmpp: the connection to {host} is not encrypted (tls: off)",
                detail="the login and every message cross the network in the clear.",
                fix='set channels.xmpp.tls to "starttls" or "direct"',
            )
        )
    nicks = [str(e) for e in section.get("allowFrom") or [] if "/" in str(e)]
    if nicks:
        found.append(
            Finding(
                id="channels.xmpp.room-nick-entries",
                severity="medium",
                title=f"xmpp: allowFrom entries that are room nicks: {nicks}",
                detail="a room nick is free for anyone to take once its holder leaves.",
                fix="list bare JIDs (ann@example.org); senders in rooms that hide real "
                "addresses cannot be allowed individually",
            )
        )
    return found


def _mattermost(section: dict[str, Any]) -> list[Finding]:
    from urllib.parse import urlsplit

    url = urlsplit(str(section.get("url", "")))
    if url.scheme == "http" and not _loopback(url.hostname or ""):
        return [
            Finding(
                id="channels.mattermost.plaintext",
                severity="high",
                title=f"mattermost: the server is reached over plain http ({url.hostname})",
                detail="the bot's token and every message cross the network in the clear.",
                fix="use the server's https:// address in channels.mattermost.url",
            )
        ]
    return []


def _email(section: dict[str, Any]) -> list[Finding]:
    auth = section.get("authentication") or {}
    mode = auth.get("mode", "auto")
    if mode == "off":
        return [
            Finding(
                id="channels.email.unauthenticated",
                severity="high",
                title="email: senders are taken at their word (authentication off)",
                detail="anyone can write an allowed address into From and reach the agent "
                "(and its tools) as that sender.",
                fix='set channels.email.authentication.mode to "auto" or "require", with '
                "authservIds naming your receiving server",
            )
        ]
    if not auth.get("authservIds"):
        return [
            Finding(
                id="channels.email.authserv-unset",
                severity="medium",
                title="email: the receiving server's Authentication-Results are not named",
                detail="the topmost Authentication-Results field is trusted, and mail that "
                "carries none (a server that adds none) is taken on its From alone.",
                fix="set channels.email.authentication.authservIds to your server's "
                'authserv-id (and mode "require" if it checks every message)',
            )
        ]
    return []


def _irc(section: dict[str, Any]) -> list[Finding]:
    entries = [str(e) for e in section.get("allowFrom") or [] if str(e) != "*"]
    nicks = [e for e in entries if not any(c in e for c in "!@*?:")]
    wide = [e for e in entries if "!" in e and e.split("!", 1)[1] in ("*@*", "*", "*@*.*")]
    found = []
    if nicks:
        found.append(
            Finding(
                id="channels.irc.nick-entries",
                severity="low",
                title=f"irc: allowFrom entries that are bare nicks match nobody: {nicks}",
                detail="anyone can take a nick, so a sender is a services account or a whole "
                "nick!user@host mask; these entries are ignored.",
                fix='use "account:<name>" (networks with services) or "nick!user@host"',
            )
        )
    if wide:
        found.append(
            Finding(
                id="channels.irc.wide-masks",
                severity="medium",
                title=f"irc: allowFrom masks that accept any user and host: {wide}",
                detail="whoever takes the nick matches them.",
                fix='name the user and host ("ann!~ann@home.example") or use "account:<name>"',
            )
        )
    return found


def _discord(section: dict[str, Any]) -> list[Finding]:
    kinds = set(section.get("allowedMentions") or [])
    pinged = [label for kind, label in _PINGS if kind in kinds]
    if not pinged:
        return []
    return [
        Finding(
            id="channels.discord.mentions",
            severity="medium" if "everyone" in kinds else "low",
            title=f"discord: replies may ping {' and '.join(pinged)}",
            detail="a sender can make the model write the mention, and the server is notified.",
            fix="remove them from channels.discord.allowedMentions",
        )
    ]
