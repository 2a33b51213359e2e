"""`security audit` and `doctor` on the web tools: the browser's reach into private networks,
a remote browser, and why `web_search` is not offered."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from nodmix.cli.main import main


@pytest.fixture(autouse=True)
def private_state(isolated_state: Path) -> Path:
    isolated_state.chmod(0o700)
    return isolated_state


def _config(state: Path, text: str) -> None:
    path = state / "nodmix.json"
    path.write_text(text, encoding="utf-8")
    path.chmod(0o600)


def _audit(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    main(["security", "audit", "--json"])
    return {f["id"]: f for f in json.loads(capsys.readouterr().out)["findings"]}


def _doctor(capsys: pytest.CaptureFixture[str]) -> dict[str, dict[str, Any]]:
    main(["doctor", "--json", "--offline"])
    return {c["name"]: c for c in json.loads(capsys.readouterr().out)}


def test_browser_reach_and_remote_browser_are_findings(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _config(
        private_state,
        "{tools: {browser: {enabled: true, allowPrivateNetwork: true, allowHosts: ['nas.lan'],"
        " cdpUrl: 'http://browser.lan:9222'}}}",
    )
    findings = _audit(capsys)
    assert findings["browser.private-network"]["severity"] == "medium"
    assert "nas.lan" in findings["browser.allow-hosts"]["title"]
    assert "rebinding" in findings["browser.remote"]["detail"]


def test_a_search_provider_without_its_key_says_why(
    private_state: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BRAVE_API_KEY", raising=False)
    _config(private_state, "{tools: {web: {search: {provider: 'brave'}}}}")
    assert "BRAVE_API_KEY" in _audit(capsys)["webSearch.off"]["detail"]
    check = _doctor(capsys)["web_search"]
    assert check["level"] == "warn" and "BRAVE_API_KEY" in check["detail"]


def test_doctor_says_why_search_is_off_and_checks_the_browser(
    private_state: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checks = _doctor(capsys)
    assert checks["web_search"]["level"] == "ok"
    assert "tools.web.search.provider" in checks["web_search"]["detail"]
    assert checks["browser"]["detail"].startswith("not offered")
    _config(
        private_state,
        "{tools: {browser: {enabled: true, executablePath: '/nowhere/chromium'},"
        " web: {search: {provider: 'searxng', baseUrl: 'http://127.0.0.1:8888'}}}}",
    )
    checks = _doctor(capsys)
    assert (
        checks["browser"]["level"] == "error" and "/nowhere/chromium" in checks["browser"]["detail"]
    )
    assert checks["web_search"] == {
        "name": "web_search", "level": "ok", "detail": "searxng at http://127.0.0.1:8888",
        "fix": None,
    }  # fmt: skip
