"""`nodmix security audit` knows how each channel tells senders apart: email authentication,
IRC allowlist entries that trust a nick, Discord replies allowed to ping."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.cli.main import main

EMAIL = (
    "email: {address: 'agent@example.org', imap: {host: 'imap.example.org', password: 'x'},"
    " smtp: {host: 'smtp.example.org'}"
)


@pytest.fixture(autouse=True)
def private_state(isolated_state: Path) -> Path:
    isolated_state.chmod(0o700)
    return isolated_state


def _audit(state: Path, channels: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = state / "nodmix.json"
    path.write_text(f"{{channels: {{{channels}}}}}", encoding="utf-8")
    path.chmod(0o600)
    main(["security", "audit", "--json"])
    report = json.loads(capsys.readouterr().out)
    return {f["id"]: f for f in report["findings"]}


def test_email_authentication_off_is_high_and_unnamed_servers_medium(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    off = _audit(private_state, EMAIL + ", authentication: {mode: 'off'}}", capsys)
    assert off["channels.email.unauthenticated"]["severity"] == "high"
    auto = _audit(private_state, EMAIL + "}", capsys)
    assert auto["channels.email.authserv-unset"]["severity"] == "medium"
    named = _audit(
        private_state, EMAIL + ", authentication: {authservIds: ['mx.example.org']}}", capsys
    )
    assert not {k for k in named if k.startswith("channels.email")}


def test_irc_bare_nicks_and_masks_open_to_any_host_are_named(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    irc = (
        "irc: {host: 'irc.example.org', nick: 'bot', allowFrom: ['ann', 'bob!*@*', "
        "'account:cy', 'dee!~dee@home.example']}"
    )
    findings = _audit(private_state, irc, capsys)
    assert findings["channels.irc.nick-entries"]["severity"] == "low"
    assert "'ann'" in findings["channels.irc.nick-entries"]["title"]
    assert findings["channels.irc.wide-masks"]["severity"] == "medium"
    assert "bob!*@*" in findings["channels.irc.wide-masks"]["title"]
    assert "account:cy" not in json.dumps(findings)


def test_discord_replies_allowed_to_ping_everyone_are_medium(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    quiet = _audit(private_state, "discord: {token: 'x', allowedMentions: ['users']}", capsys)
    assert "channels.discord.mentions" not in quiet
    loud = _audit(private_state, "discord: {token: 'x', allowedMentions: ['everyone']}", capsys)
    assert loud["channels.discord.mentions"]["severity"] == "medium"


def test_teams_and_google_chat_key_sources_token_sinks_and_tenants(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _audit(private_state, "msteams: {appId: 'a'}, googlechat: {audience: '1'}", capsys)
    assert plain["channels.msteams.any-tenant"]["severity"] == "low"
    assert not any(".key-source" in i or ".token-sink" in i for i in plain)
    moved = _audit(
        private_state,
        "msteams: {appId: 'a', tenantId: 't', openIdMetadataUrl: 'https://evil.example/m',"
        " tokenUrl: 'https://evil.example/t'},"
        " googlechat: {audience: '1', certsUrl: 'https://evil.example/c'}",
        capsys,
    )
    assert moved["channels.msteams.key-source"]["severity"] == "high"
    assert moved["channels.googlechat.key-source"]["severity"] == "high"
    assert moved["channels.msteams.token-sink"]["severity"] == "medium"
    assert "channels.msteams.any-tenant" not in moved


def test_xmpp_without_tls_to_another_host_is_high_and_room_nicks_in_allow_from_named(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _audit(
        private_state,
        "xmpp: {jid: 'bot@example.org', password: 'x', tls: 'off', "
        "allowFrom: ['ann@example.org', 'room@conference.example.org/ann']}",
        capsys,
    )
    assert plain["channels.xmpp.plaintext"]["severity"] == "high"
    assert "room@conference.example.org/ann" in plain["channels.xmpp.room-nick-entries"]["title"]
    local = _audit(
        private_state,
        "xmpp: {jid: 'bot@example.org', password: 'x', server: '127.0.0.1', tls: 'off'}",
        capsys,
    )
    assert not {k for k in local if k.startswith("channels.xmpp")}


def test_mattermost_over_plain_http_to_another_host_is_high(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = _audit(
        private_state, "mattermost: {url: 'http://chat.example.org', token: 'x'}", capsys
    )
    assert plain["channels.mattermost.plaintext"]["severity"] == "high"
    tls = _audit(private_state, "mattermost: {url: 'https://chat.example.org', token: 'x'}", capsys)
    assert "channels.mattermost.plaintext" not in tls
