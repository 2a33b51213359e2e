from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nodmix.config.schema import ToolsConfig, WebFetchToolConfig
from nodmix.errors import ToolError
from nodmix.tools.base import ToolContext
from nodmix.tools.core import core_tools
from nodmix.tools.core.web_fetch import WebFetchTool

pytestmark = pytest.mark.anyio

_PARAGRAPH = (
    "<p>Paragraph {n}: the quick brown fox jumps over the lazy dog while the river keeps "
    "flowing toward the distant sea, carrying stories of the mountains.</p>"
)
ARTICLE = (
    "<html><head><title>Fox Notes</title><script>var tracking = 'SECRET-TRACKER';</script>"
    "</head><body><nav><a href='/'>Home</a></nav><article><h1>Fox Notes</h1>"
    + "".join(_PARAGRAPH.format(n=n) for n in range(6))
    + "<p>See <a href='https://example.org/more'>more</a>.</p></article>"
    "<footer>Copyright 2026</footer></body></html>"
)
APP_SHELL = (
    "<html><head><title>App Shell</title></head>"
    "<body><div id='root'></div><script>boot()</script></body></html>"
)
HUGE_BYTES = 1024 * 1024


class _Handler(BaseHTTPRequestHandler):
    release: threading.Event

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean

    def _send(self, status: int, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        routes = {
            "/article": lambda: self._send(200, "text/html; charset=utf-8", ARTICLE.encode()),
            "/shell": lambda: self._send(200, "text/html", APP_SHELL.encode()),
            "/data.json": lambda: self._send(200, "application/json", b'{"answer": 42}'),
            "/plain": lambda: self._send(
                200, "text/plain; charset=latin-1", "café".encode("latin-1")
            ),
            "/image.png": lambda: self._send(200, "image/png", b"\x89PNG\r\n\x1a\n\0\0"),
            "/redirect": lambda: self._redirect("/data.json"),
            "/loop": lambda: self._redirect("/loop"),
            "/to-file": lambda: self._redirect("file:///etc/passwd"),
            "/missing": lambda: self._send(
                404, "text/html", b"<html><body><p>No such page</p></body></html>"
            ),
            "/huge": lambda: self._send(200, "text/plain", b"z" * HUGE_BYTES),
            "/long": lambda: self._send(200, "text/plain", b"q" * 5000),
        }
        if self.path == "/stall":
            # Hold the request until the test is over; the client must give up first.
            self.release.wait(timeout=10)
            return
        route = routes.get(self.path)
        if route is None:
            self._send(500, "text/plain", b"unexpected path")
            return
        try:
            route()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped reading at its cap


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A real HTTP server on loopback, shared by this module's tests; yields its base URL."""
    release = threading.Event()
    handler = type("Handler", (_Handler,), {"release": release})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        with pytest.MonkeyPatch.context() as patch:
            # A proxy from the environment must not intercept loopback requests.
            for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
                patch.delenv(name, raising=False)
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        release.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


async def test_html_is_reduced_to_readable_main_content(ctx: ToolContext, server: str) -> None:
    result = await WebFetchTool().call({"url": f"{server}/article"}, ctx)
    text = result.text_content
    assert not result.is_error
    assert text.startswith(f"URL: {server}/article\nStatus: 200 OK\nContent-Type: text/html\n\n")
    assert "# Fox Notes" in text
    assert "Paragraph 5: the quick brown fox" in text
    assert "[more](https://example.org/more)" in text
    assert "SECRET-TRACKER" not in text
    assert result.details["extractor"] == "trafilatura"


async def test_without_the_web_extra_the_builtin_extractor_keeps_the_article(
    ctx: ToolContext, server: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "trafilatura", None)  # as in a core-only install
    result = await WebFetchTool().call({"url": f"{server}/article"}, ctx)
    text = result.text_content
    assert result.details["extractor"] == "builtin"
    assert "# Fox Notes" in text
    assert "Paragraph 5: the quick brown fox" in text
    assert "[more](https://example.org/more)" in text
    assert "Home" not in text and "Copyright" not in text
    assert "SECRET-TRACKER" not in text


async def test_html_without_main_content_falls_back_to_tag_stripping(
    ctx: ToolContext, server: str
) -> None:
    result = await WebFetchTool().call({"url": f"{server}/shell"}, ctx)
    assert result.text_content.endswith("\n\n# App Shell")
    assert "boot()" not in result.text_content
    assert result.details["extractor"] == "fallback"


async def test_json_is_returned_as_is(ctx: ToolContext, server: str) -> None:
    result = await WebFetchTool().call({"url": f"{server}/data.json"}, ctx)
    assert result.text_content.endswith('\n\n{"answer": 42}')
    assert result.details["contentType"] == "application/json"


async def test_text_is_decoded_with_the_declared_charset(ctx: ToolContext, server: str) -> None:
    result = await WebFetchTool().call({"url": f"{server}/plain"}, ctx)
    assert result.text_content.endswith("\n\ncafé")


async def test_redirects_are_followed_and_the_final_url_reported(
    ctx: ToolContext, server: str
) -> None:
    result = await WebFetchTool().call({"url": f"{server}/redirect"}, ctx)
    assert result.text_content.startswith(f"URL: {server}/data.json\n")
    assert result.details["url"] == f"{server}/redirect"
    assert result.details["finalUrl"] == f"{server}/data.json"


async def test_redirect_loops_stop_at_the_limit(ctx: ToolContext, server: str) -> None:
    with pytest.raises(ToolError) as caught:
        await WebFetchTool(max_redirects=3).call({"url": f"{server}/loop"}, ctx)
    assert "more than 3 redirects" in str(caught.value)


async def test_redirect_to_a_file_url_is_refused(ctx: ToolContext, server: str) -> None:
    with pytest.raises(ToolError) as caught:
        await WebFetchTool().call({"url": f"{server}/to-file"}, ctx)
    assert "unsupported URL" in str(caught.value)


async def test_http_error_status_is_an_error_result_with_the_page_text(
    ctx: ToolContext, server: str
) -> None:
    result = await WebFetchTool().call({"url": f"{server}/missing"}, ctx)
    assert result.is_error
    assert "Status: 404 Not Found" in result.text_content
    assert "No such page" in result.text_content
    assert result.details["status"] == 404


async def test_huge_bodies_stop_downloading_at_the_byte_cap(ctx: ToolContext, server: str) -> None:
    result = await WebFetchTool(max_bytes=10_000, max_chars=100_000).call(
        {"url": f"{server}/huge"}, ctx
    )
    assert result.text_content.count("z") == 10_000
    assert "[Download stopped at 10000 bytes" in result.text_content
    assert result.details["bytes"] == 10_000
    assert result.details["truncated"] is True


async def test_returned_text_is_capped(ctx: ToolContext, server: str) -> None:
    result = await WebFetchTool(max_chars=1000).call({"url": f"{server}/long"}, ctx)
    assert result.text_content.count("q") == 1000
    assert "[Text cut to the first 1000 of 5000 characters.]" in result.text_content


async def test_config_sets_the_download_cap(ctx: ToolContext, server: str) -> None:
    config = ToolsConfig(web_fetch=WebFetchToolConfig(max_bytes=2000))
    tool = next(t for t in core_tools(config) if t.spec.name == "web_fetch")
    result = await tool.call({"url": f"{server}/huge"}, ctx)
    assert result.details["bytes"] == 2000


async def test_binary_content_is_an_error(ctx: ToolContext, server: str) -> None:
    result = await WebFetchTool().call({"url": f"{server}/image.png"}, ctx)
    assert result.is_error
    assert "image/png, not text" in result.text_content


async def test_a_stalled_server_times_out(ctx: ToolContext, server: str) -> None:
    with pytest.raises(ToolError) as caught:
        await WebFetchTool(timeout_seconds=0.3).call({"url": f"{server}/stall"}, ctx)
    assert "timed out after 0.3 s" in str(caught.value)


async def test_connection_refused_is_an_error(ctx: ToolContext) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ToolError) as caught:
        await WebFetchTool().call({"url": f"http://127.0.0.1:{port}/"}, ctx)
    assert "Could not connect" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("file:///etc/passwd", "not file:"),
        ("ftp://example.org/x", "not ftp:"),
        ("example.org/page", "has no scheme"),
        ("http://", "has no host"),
    ],
)
async def test_non_http_urls_are_refused(ctx: ToolContext, url: str, expected: str) -> None:
    with pytest.raises(ToolError) as caught:
        await WebFetchTool().call({"url": url}, ctx)
    assert expected in str(caught.value)
