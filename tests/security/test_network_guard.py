"""`web_fetch` in a sandboxed session stays off loopback, link-local and private addresses."""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from nodmix.config.schema import ToolsConfig, WebFetchToolConfig
from nodmix.errors import ToolError
from nodmix.security.network import PrivateAddressError, is_public, resolve_public
from nodmix.security.sandbox.session import SessionSandbox
from nodmix.tools.base import Tool
from nodmix.tools.core import core_tools
from tests.security.conftest import context, make_sandbox

pytestmark = pytest.mark.anyio


class _Handler(BaseHTTPRequestHandler):
    seen: list[str]

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append(self.path)
        body = b'{"private": "intranet data"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def local_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, list[str]]]:
    """A real HTTP server on 127.0.0.1; yields its port and the paths it was asked for."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    seen: list[str] = []
    handler = type("Handler", (_Handler,), {"seen": seen})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield httpd.server_address[1], seen
    httpd.shutdown()
    httpd.server_close()
    thread.join(timeout=5)


@pytest.fixture
def sandbox(isolated_state: Path, home: Path) -> SessionSandbox:
    return make_sandbox(isolated_state, home)


def _web_fetch(sandbox: SessionSandbox, config: ToolsConfig | None = None) -> Tool:
    return next(t for t in core_tools(config, isolation=sandbox) if t.spec.name == "web_fetch")


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "::ffff:10.0.0.1",
        # IPv6 forms that carry an IPv4 address to a host or relay that unwraps it
        "::127.0.0.1",  # IPv4-compatible
        "::169.254.169.254",
        "2002:7f00:1::",  # 6to4 of 127.0.0.1
        "2002:a9fe:a9fe::1",  # 6to4 of the metadata address
        "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
        "64:ff9b::a9fe:a9fe",
        "2001:0:4136:e378:8000:63bf:80ff:fffe",  # Teredo, client 127.0.0.1
        "fec0::1",  # site-local (deprecated, still routed on some networks)
    ],
)
def test_local_and_private_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "address",
    ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2002:808:808::1", "64:ff9b::808:808"],
)
def test_global_unicast_addresses_are_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


async def test_a_name_resolving_to_loopback_is_refused_with_the_address() -> None:
    with pytest.raises(PrivateAddressError, match=r"localhost \(it resolves to"):
        await resolve_public("localhost", 80)


async def test_a_public_literal_resolves_to_itself() -> None:
    assert await resolve_public("8.8.8.8", 443) == ["8.8.8.8"]


async def test_sandboxed_web_fetch_refuses_a_loopback_server(
    sandbox: SessionSandbox, workspace: Path, local_server: tuple[int, list[str]]
) -> None:
    port, seen = local_server
    tool = _web_fetch(sandbox)
    for url in (f"http://127.0.0.1:{port}/a", f"http://localhost:{port}/b"):
        with pytest.raises(ToolError, match="allowPrivateNetwork"):
            await tool.call({"url": url}, context(workspace))
    assert seen == []


async def test_the_main_session_still_fetches_local_services(
    sandbox: SessionSandbox, workspace: Path, local_server: tuple[int, list[str]]
) -> None:
    port, seen = local_server
    result = await _web_fetch(sandbox).call(
        {"url": f"http://127.0.0.1:{port}/main"}, context(workspace, session="main")
    )
    assert "intranet data" in result.text_content
    assert seen == ["/main"]


async def test_allow_private_network_lets_a_sandboxed_session_fetch_loopback(
    sandbox: SessionSandbox, workspace: Path, local_server: tuple[int, list[str]]
) -> None:
    port, seen = local_server
    config = ToolsConfig(web_fetch=WebFetchToolConfig(allow_private_network=True))
    result = await _web_fetch(sandbox, config).call(
        {"url": f"http://127.0.0.1:{port}/allowed"}, context(workspace)
    )
    assert "intranet data" in result.text_content
    assert seen == ["/allowed"]
