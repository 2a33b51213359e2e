"""`nodmix security audit` on the WhatsApp and Signal channels: credentials in the config
file, a cleartext Graph API, a short verify token, a signal-cli daemon others can reach."""

from __future__ import annotations

import json
import socket
import tempfile
from pathlib import Path
from typing import Any

import pytest

from nodmix.cli.main import main


@pytest.fixture(autouse=True)
def private_state(isolated_state: Path) -> Path:
    isolated_state.chmod(0o700)
    return isolated_state


def _audit(
    state: Path, channels: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    path = state / "nodmix.json"
    path.write_text(json.dumps({"channels": channels}), encoding="utf-8")
    path.chmod(0o600)
    main(["security", "audit", "--json"])
    report = json.loads(capsys.readouterr().out)
    return {f["id"]: f for f in report["findings"]}


def _whatsapp(**extra: Any) -> dict[str, Any]:
    return {
        "phoneNumberId": "106540352242922",
        "accessToken": "${WHATSAPP_ACCESS_TOKEN}",
        "appSecret": "${WHATSAPP_APP_SECRET}",
        "verifyToken": "${WHATSAPP_VERIFY_TOKEN}",
        **extra,
    }


def test_whatsapp_secrets_in_the_file_a_short_token_and_cleartext_api_are_named(
    private_state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("ACCESS_TOKEN", "APP_SECRET", "VERIFY_TOKEN"):
        monkeypatch.setenv(f"WHATSAPP_{name}", "x" * 32)
    clean = _audit(private_state, {"whatsapp": _whatsapp()}, capsys)
    assert not {k for k in clean if k.startswith("channels.whatsapp")}
    risky = _whatsapp(
        accessToken="EAAG-literal",
        verifyToken="hello",
        apiBaseUrl="http://graph.example.net",
    )
    findings = _audit(private_state, {"whatsapp": risky}, capsys)
    assert findings["channels.whatsapp.secrets-in-config"]["severity"] == "medium"
    assert "accessToken" in findings["channels.whatsapp.secrets-in-config"]["title"]
    assert findings["channels.whatsapp.short-verify-token"]["severity"] == "low"
    assert findings["channels.whatsapp.cleartext-api"]["severity"] == "high"


def test_a_signal_daemon_others_can_reach_is_high(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    local = {"account": "+15550100000", "httpUrl": "http://127.0.0.1:8080"}
    assert "channels.signal.remote-daemon" not in _audit(private_state, {"signal": local}, capsys)
    remote = {"account": "+15550100000", "httpUrl": "http://10.0.0.5:8080"}
    findings = _audit(private_state, {"signal": remote}, capsys)
    assert findings["channels.signal.remote-daemon"]["severity"] == "high"
    with tempfile.TemporaryDirectory(dir="/tmp") as folder:
        path = Path(folder) / "s.sock"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        try:
            path.chmod(0o666)
            section = {"account": "+15550100000", "socketPath": str(path)}
            findings = _audit(private_state, {"signal": section}, capsys)
            assert findings["channels.signal.open-socket"]["severity"] == "high"
            path.chmod(0o600)
            findings = _audit(private_state, {"signal": section}, capsys)
            assert "channels.signal.open-socket" not in findings
        finally:
            listener.close()
