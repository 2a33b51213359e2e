"""The private-address guard on every request a page makes, and the hostile pages: redirects
to loopback and metadata addresses, DNS answers that mix public and private addresses, huge
pages, pages that never finish loading, pages that open many tabs; and whose profile a turn
gets."""

from __future__ import annotations

import asyncio
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from nodmix.browser import policy as policy_module
from nodmix.browser.policy import NetworkPolicy
from nodmix.browser.proxy import GuardProxy
from nodmix.browser.tool import BrowserTool
from nodmix.errors import ToolError
from nodmix.origin import TurnOrigin
from nodmix.testing.web_site import TestSite
from tests.browser.conftest import context, ref, settings

pytestmark = [pytest.mark.browser, pytest.mark.integration, pytest.mark.anyio]


async def test_every_request_of_a_page_to_a_private_address_is_blocked(
    browser_tool: BrowserTool, site: TestSite, tmp_path: Path
) -> None:
    ctx = context(tmp_path / "ws")
    try:
        page = await browser_tool.call({"action": "navigate", "url": site.url("/private")}, ctx)
        if "ws: pending" in page.text_content or "fetch: pending" in page.text_content:
            page = await browser_tool.call({"action": "wait", "text": "ws: blocked"}, ctx)
            page = await browser_tool.call({"action": "wait", "text": "fetch: blocked"}, ctx)
        with pytest.raises(
            ToolError, match=r"localhost \(it resolves to 127\.0\.0\.1\) is refused"
        ):
            await browser_tool.call({"action": "navigate", "url": site.private_url()}, ctx)
        redirect = site.url("/redirect?to=") + site.private_url()
        with pytest.raises(ToolError, match=r"localhost .* is refused"):
            await browser_tool.call({"action": "navigate", "url": redirect}, ctx)
        metadata = site.url("/redirect?to=http://169.254.169.254/latest/meta-data/")
        with pytest.raises(ToolError, match=r"169\.254\.169\.254:80 is refused"):
            await browser_tool.call({"action": "navigate", "url": metadata}, ctx)
        with pytest.raises(ToolError, match=r"169\.254\.169\.254 is refused"):
            await browser_tool.call({"action": "navigate", "url": "http://169.254.169.254/"}, ctx)
    finally:
        await browser_tool.aclose()
    assert "fetch: blocked" in page.text_content and "ws: blocked" in page.text_content
    assert site.secret_hits == []  # fetch, image, iframe, WebSocket: none got through


async def test_allow_private_network_lets_the_page_reach_them(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    tool = BrowserTool(settings(chromium, policy=NetworkPolicy(allow_private=True)), isolated_state)
    ctx = context(tmp_path / "ws")
    site.secret_hits.clear()
    try:
        page = await tool.call({"action": "navigate", "url": site.private_url()}, ctx)
    finally:
        await tool.aclose()
    assert "SECRET-TOKEN" in page.text_content


def _fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[str]]) -> list[str]:
    asked: list[str] = []
    real = policy_module.anyio.getaddrinfo

    async def getaddrinfo(host: str, port: int, **kw: Any) -> list[Any]:
        if host not in answers:
            return await real(host, port, **kw)
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(policy_module.anyio, "getaddrinfo", getaddrinfo)
    return asked


async def _socks_connect(proxy: GuardProxy, host: str, port: int) -> tuple[int, Any, Any]:
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"\x05\x01\x00")
    assert await reader.readexactly(2) == b"\x05\x00"
    name = host.encode()
    writer.write(b"\x05\x01\x00\x03" + bytes([len(name)]) + name + struct.pack("!H", port))
    reply = await reader.readexactly(10)
    return reply[1], reader, writer


async def test_the_guard_resolves_once_and_refuses_an_answer_with_any_private_address(
    monkeypatch: pytest.MonkeyPatch, site: TestSite
) -> None:
    asked = _fake_dns(
        monkeypatch, {"rebind.test": ["93.184.215.14", "127.0.0.1"], "site.test": ["127.0.0.1"]}
    )
    proxy = GuardProxy(NetworkPolicy(allow_hosts=("site.test",)))
    await proxy.start()
    try:
        code, _, writer = await _socks_connect(proxy, "rebind.test", site.port)
        writer.close()
        assert code == 2  # not allowed by ruleset
        code, reader, writer = await _socks_connect(proxy, "site.test", site.port)
        assert code == 0
        writer.write(b"GET /cookie HTTP/1.1\r\nHost: site.test\r\nConnection: close\r\n\r\n")
        answer = await reader.read()
        writer.close()
    finally:
        await proxy.close()
    assert answer.startswith(b"HTTP/1.1 200") and b"visit cookie" in answer
    assert asked == ["rebind.test", "site.test"]  # one lookup per connection, then that address
    assert proxy.refused.since(0) == [f"rebind.test (it resolves to 127.0.0.1):{site.port}"]


async def test_chromium_leaves_name_resolution_to_the_guard(
    monkeypatch: pytest.MonkeyPatch, chromium: str, isolated_state: Path, site: TestSite,
    tmp_path: Path,
) -> None:  # fmt: skip
    # `site.test` exists only in the guard's resolver: the page loads only if Chromium never
    # resolves names itself (so a rebinding answer could never reach it).
    asked = _fake_dns(monkeypatch, {"site.test": ["127.0.0.1"]})
    tool = BrowserTool(
        settings(chromium, policy=NetworkPolicy(allow_hosts=("site.test",))), isolated_state
    )
    try:
        page = await tool.call(
            {"action": "navigate", "url": f"http://site.test:{site.port}/form"},
            context(tmp_path / "ws"),
        )
    finally:
        await tool.aclose()
    assert page.details["title"] == "Contact us"
    assert asked.count("site.test") >= 2  # the pre-check and the browser's connection


async def test_huge_slow_and_tab_opening_pages_stay_bounded(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    tool = BrowserTool(
        settings(chromium, timeout_seconds=5.0, max_tabs=4, max_snapshot_chars=5000),
        isolated_state,
    )
    ctx = context(tmp_path / "ws")
    try:
        huge = await tool.call({"action": "navigate", "url": site.url("/huge?n=3000")}, ctx)
        slow = await tool.call({"action": "navigate", "url": site.url("/slow")}, ctx)
        popups = await tool.call({"action": "navigate", "url": site.url("/popups")}, ctx)
        after = await tool.call({"action": "click", "ref": ref(popups, "button", "Open many")}, ctx)
        tabs = await tool.call({"action": "tabs"}, ctx)
        for _ in range(3):
            await tool.call({"action": "close"}, ctx)
        with pytest.raises(ToolError, match="maxTabs"):
            for _ in range(5):
                await tool.call({"action": "open", "url": site.url("/")}, ctx)
    finally:
        await tool.aclose()
    assert huge.details["truncated"] and len(huge.text_content) < 6000
    assert "[Snapshot cut at 5000 characters" in huge.text_content
    assert "[The page was still loading after 5 s.]" in slow.text_content
    assert '- heading "Half" [level=1]' in slow.text_content
    assert len(tabs.details["tabs"]) == 4
    assert "at most 4 are kept" in after.text_content


async def test_owner_profile_keeps_cookies_and_other_turns_never_see_it(
    chromium: str, isolated_state: Path, site: TestSite, tmp_path: Path
) -> None:
    owner = context(tmp_path / "ws")
    stranger = context(
        tmp_path / "ws",
        session_key="agent:main:telegram:dm:42",
        origin=TurnOrigin(channel="telegram", chat_id="42", sender_id="42"),
    )
    tool = BrowserTool(settings(chromium), isolated_state)
    try:
        await tool.call({"action": "navigate", "url": site.url("/cookie?set=owner-1")}, owner)
        guest = await tool.call({"action": "navigate", "url": site.url("/cookie")}, stranger)
    finally:
        await tool.aclose()
    assert "visit cookie: none" in guest.text_content and guest.details["profile"] == "guest"
    restarted = BrowserTool(settings(chromium), isolated_state)
    try:
        again = await restarted.call({"action": "navigate", "url": site.url("/cookie")}, owner)
    finally:
        await restarted.aclose()
    assert "visit cookie: owner-1" in again.text_content and again.details["profile"] == "owner"
    assert (isolated_state / "browser" / "main" / "profile").is_dir()
    assert (isolated_state / "browser").stat().st_mode & 0o077 == 0
