"""`nodmix doctor`'s channel checks: each configured channel's credentials, tried for real
(Telegram: `getMe` against the configured Bot API server; Matrix: `whoami` on the homeserver,
after a password login when no device is kept; with a deadline)."""

from __future__ import annotations

import os
from typing import Any, Literal

Level = Literal["ok", "warn", "error"]
Finding = tuple[str, Level, str, str | None]
"""(name, level, detail, fix)."""

CHECK_TIMEOUT_SECONDS = 15.0
SIGNAL_FIX = (
    "start signal-cli's daemon for the account (`signal-cli -a +NUMBER daemon --http "
    "127.0.0.1:8080`, or `--socket PATH`); install signal-cli from its release page (it needs "
    "Java 21) and link it to your phone first with `signal-cli link -n Nodmix` "
    "(docs/channels/signal.md)"
)


def channel_findings(config: Any, *, offline: bool) -> list[Finding]:
    """One finding per enabled channel."""
    import anyio

    from nodmix.channels.registry import create_adapter, enabled_channels
    from nodmix.config import paths
    from nodmix.extras import MissingExtraError

    env = dict(os.environ)
    findings: list[Finding] = []
    for channel in enabled_channels(config):
        name = f"channel {channel}"
        try:
            adapter = create_adapter(channel, config, env, paths.state_dir(env))
        except MissingExtraError as exc:  # the line names the install command
            findings.append((name, "error", str(exc), None))
            continue
        except Exception as exc:
            findings.append((name, "error", str(exc), "set the channel's credentials"))
            continue
        if offline:
            findings.append((name, "ok", "configured (not contacted: --offline)", None))
            continue

        async def probe(adapter: Any = adapter) -> str:
            try:
                with anyio.fail_after(CHECK_TIMEOUT_SECONDS):
                    return str(await adapter.check())
            finally:
                await adapter.aclose()

        try:
            account = anyio.run(probe)
        except TimeoutError:
            if channel == "signal":
                fix = SIGNAL_FIX
            else:
                fix = f"check {_ADDRESS_KEY.get(channel, 'apiBaseUrl')}"
            findings.append((name, "error", "no answer within 15 s", fix))
        except Exception as exc:
            fix = _CREDENTIAL_FIX.get(channel, "check the channel's credentials")
            findings.append((name, "error", f"credentials refused or unreachable: {exc}", fix))
        else:
            findings.append((name, "ok", f"connected as {account}", None))
    return findings


_ADDRESS_KEY = {"matrix": "homeserver", "xmpp": "server and port", "mattermost": "url"}
_CREDENTIAL_FIX = {
    "telegram": "check the bot token (channels.telegram.botToken / TELEGRAM_BOT_TOKEN)",
    "matrix": "check channels.matrix.userId and accessToken (MATRIX_ACCESS_TOKEN) or password",
    "irc": "check channels.irc host, port, tls, password and sasl",
    "email": "check channels.email.imap and .smtp: host, port, security, username, password",
    "discord": "check the bot token (channels.discord.token / DISCORD_BOT_TOKEN)",
    "slack": "check the bot token (channels.slack.botToken / SLACK_BOT_TOKEN)",
    "whatsapp": "check channels.whatsapp.phoneNumberId and the permanent access token "
    "(accessToken / WHATSAPP_ACCESS_TOKEN); docs/channels/whatsapp.md shows where Meta lists them",
    "signal": SIGNAL_FIX,
    "msteams": "check channels.msteams.appId, appPassword (MSTEAMS_APP_PASSWORD) and tenantId",
    "googlechat": "check the service account key (channels.googlechat.serviceAccountFile or "
    "credentials) and that the Chat API is enabled for its project",
    "xmpp": "check channels.xmpp jid, password (XMPP_PASSWORD), server, port and tls",
    "mattermost": "check channels.mattermost.url and the bot token (MATTERMOST_TOKEN)",
}
