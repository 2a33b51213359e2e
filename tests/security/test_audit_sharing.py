"""`nodmix security audit` knows what makes shared chats unsafe: a gateway without auth, token
files others can read, channels that name no owner, memory shared with chats, and delivery
targets outside the channel's rules."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from nodmix.automation.jobs import new_job
from nodmix.automation.schedule import every_schedule
from nodmix.automation.store import JobStore
from nodmix.cli.main import main


@pytest.fixture(autouse=True)
def private_state(isolated_state: Path) -> Path:
    isolated_state.chmod(0o700)
    return isolated_state


def _audit(state: Path, config: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    path = state / "nodmix.json"
    path.write_text(config, encoding="utf-8")
    path.chmod(0o600)
    code = main(["security", "audit", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is (code == 0)
    found: dict[str, Any] = {}
    for finding in report["findings"]:
        found.setdefault(finding["id"], []).append(finding)
    return found


TELEGRAM = "telegram: {botToken: '${TG}', allowFrom: ['42'], groups: ['-100']"


def test_auth_mode_none_is_high_and_a_default_gateway_is_not(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = _audit(private_state, "{gateway: {auth: {mode: 'none'}}}", capsys)
    [finding] = found["gateway.auth-none"]
    assert finding["severity"] == "high" and "gateway.auth.mode" in finding["fix"]
    assert "gateway.auth-none" not in _audit(private_state, "{}", capsys)


def test_auth_mode_none_on_a_network_bind_is_flagged_even_with_a_token_set(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = "{gateway: {bind: 'lan', auth: {mode: 'none', token: '%s'}}}" % ("x" * 40)
    found = _audit(private_state, config, capsys)
    [exposed] = found["gateway.bind-without-token"]
    assert exposed["severity"] == "high"
    assert exposed["title"] == (
        "the gateway is configured to listen on 0.0.0.0 without a token "
        '(gateway.auth.mode is "none")'
    )
    assert exposed["fix"].startswith("remove gateway.auth.mode and set gateway.auth.token")
    assert found["gateway.auth-none"][0]["severity"] == "high"


def test_a_token_file_others_can_read_is_high(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    token = private_state / "gateway" / "token"
    token.parent.mkdir(mode=0o700)
    token.write_text("x" * 43, encoding="ascii")
    token.chmod(0o644)
    [finding] = _audit(private_state, "{}", capsys)["gateway.token-readable"]
    assert finding["severity"] == "high" and finding["fix"] == f"chmod 600 {token}"


def test_a_channel_without_an_owner_and_memory_shared_with_a_group_are_reported(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = (
        f"{{channels: {{{TELEGRAM}}}}}, "
        "memory: {shareWith: ['group:telegram:-100', 'dm:telegram:7']}}"
    )
    found = _audit(private_state, config, capsys)
    [owner] = found["channels.no-owner"]
    assert "pairing approve telegram <code> --owner" in owner["fix"]
    shared = {f["title"].split(" ")[0]: f["severity"] for f in found["memory.shared"]}
    assert shared == {"group:telegram:-100": "medium", "dm:telegram:7": "low"}
    owned = f"{{channels: {{{TELEGRAM}, ownerIds: ['42']}}}}}}"
    assert "channels.no-owner" not in _audit(private_state, owned, capsys)


def test_delivery_targets_outside_the_rules_are_reported_wherever_they_are_set(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = JobStore(private_state)
    for target, forced in (("telegram:99999", False), ("telegram:88888", True)):
        store.add(
            new_job(
                name=target,
                message="news",
                schedule=every_schedule("1h"),
                now=time.time(),
                deliver=target,
                forced=forced,
            )
        )
    config = (
        f"{{channels: {{{TELEGRAM}, ownerIds: ['42']}}}}, "
        "hooks: {mappings: {mail: {message: 'x', deliver: 'telegram:55555'}, "
        "ok: {message: 'x', deliver: 'telegram:-100'}}}, "
        "agents: {defaults: {heartbeat: {every: '1h', deliver: 'telegram:77'}}}}"
    )
    found = _audit(private_state, config, capsys)
    refused = sorted(f["title"] for f in found["deliver.not-allowed"])
    assert refused == [
        "agents.defaults.heartbeat.deliver delivers to telegram:77, which is refused",
        "cron job "
        + next(j.id for j in store.load() if j.deliver == "telegram:99999")
        + " (telegram:99999) delivers to telegram:99999, which is refused",
        "hooks.mappings.mail.deliver delivers to telegram:55555, which is refused",
    ]
    [forced] = found["deliver.forced"]
    assert forced["severity"] == "low" and "telegram:88888" in forced["title"]
