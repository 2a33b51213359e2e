"""The `web_fetch` tool: fetch a URL and return readable text.

HTML goes through trafilatura (main-content extraction to markdown) when the `web` extra is
installed, with a plain tag-stripping fallback when trafilatura finds nothing; without the extra,
through the built-in extractor (`html_text.main_text`: the page's main element, links kept).
trafilatura and lxml take a noticeable time to import, so they are imported on the first HTML
page, in the worker thread that runs the extraction.

The download is capped after content decoding, so a compressed response cannot expand past the
cap. The tool fetches whatever host the model names, loopback and private addresses included:
Nodmix is self-hosted and reaching local services is a feature; restrict it with tool policy.
In a sandboxed session (`agents.defaults.sandbox.mode`) the isolation's transport refuses
loopback, link-local and private addresses unless `tools.webFetch.allowPrivateNetwork` is true.
"""

from __future__ import annotations

import codecs
import logging
from typing import Literal, TypeAlias

import anyio
import httpx2
import msgspec

from nodmix.errors import ToolError
from nodmix.messages import JsonObject
from nodmix.tools.base import ToolContext, ToolResult, ToolSpec
from nodmix.tools.core.args import CoreTool, require_str
from nodmix.tools.isolation import Isolation

logger = logging.getLogger(__name__)

DEFAULT_MAX_BYTES = 2 * 1024 * 1024
DEFAULT_MAX_CHARS = 50_000
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_MAX_REDIRECTS = 5
_ERROR_SNIPPET_CHARS = 2000
_USER_AGENT = "Mozilla/5.0 (compatible; Nodmix/0.1; web_fetch)"
_ACCEPT = "text/html,application/xhtml+xml,application/json;q=0.9,text/*;q=0.8,*/*;q=0.5"

Kind: TypeAlias = Literal["html", "text", "binary"]
_TEXT_TYPES = frozenset(
    {"application/javascript", "application/xml", "application/x-yaml", "application/yaml"}
)


class _Fetched(msgspec.Struct, frozen=True):
    url: str
    status: int
    reason: str
    content_type: str
    charset: str | None
    body: bytes
    cut: bool


def check_url(raw: str) -> str:
    """Accept only absolute http(s) URLs.

    Raises:
        ToolError: Another scheme (file:, ftp:, data: ...), no host, or a malformed URL.
    """
    url = raw.strip()
    try:
        parsed = httpx2.URL(url)
    except httpx2.InvalidURL as exc:
        raise ToolError(f"Invalid URL {url!r}: {exc}") from None
    if not parsed.scheme:
        raise ToolError(f"URL {url!r} has no scheme; use a full URL such as https://{url}")
    if parsed.scheme not in ("http", "https"):
        raise ToolError(f"Only http:// and https:// URLs can be fetched, not {parsed.scheme}:.")
    if not parsed.host:
        raise ToolError(f"URL {url!r} has no host.")
    return url


def _kind(content_type: str, body: bytes) -> Kind:
    if content_type in ("text/html", "application/xhtml+xml"):
        return "html"
    if content_type.startswith("text/") or content_type in _TEXT_TYPES:
        return "text"
    if content_type == "application/json" or content_type.endswith(("+json", "+xml")):
        return "text"
    if content_type and content_type != "application/octet-stream":
        return "binary"
    # No useful content type: sniff.
    head = body[:1024]
    if b"\0" in head:
        return "binary"
    return "html" if b"<html" in head.lower() or b"<!doctype html" in head.lower() else "text"


def _decode(body: bytes, charset: str | None) -> str:
    try:
        codecs.lookup(charset or "utf-8")
    except LookupError:
        charset = None
    return body.decode(charset or "utf-8", errors="replace")


def _extract_html(html: str, url: str) -> tuple[str, str]:
    """Readable text of an HTML page and the extractor that produced it (runs in a thread)."""
    from nodmix.extras import installed, part
    from nodmix.tools.core.html_text import html_to_text, main_text

    if not installed(part("web")):
        return main_text(html, url), "builtin"
    try:
        import trafilatura

        text = trafilatura.extract(
            html, url=url, output_format="markdown", include_links=True, include_tables=True
        )
    except Exception:
        # A crash inside the extractor must not cost the model the page: fall back below.
        logger.warning("trafilatura failed on %s", url, exc_info=True)
        text = None
    if text and text.strip():
        return text.strip(), "trafilatura"
    return html_to_text(html), "fallback"


class WebFetchTool(CoreTool):
    """Fetches http(s) URLs and returns their content as text."""

    def __init__(
        self,
        *,
        max_bytes: int = DEFAULT_MAX_BYTES,
        max_chars: int = DEFAULT_MAX_CHARS,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_redirects: int = DEFAULT_MAX_REDIRECTS,
        isolation: Isolation | None = None,
    ) -> None:
        """Create the tool.

        Args:
            max_bytes: Most bytes downloaded (after content decoding); the rest is not read.
            max_chars: Most characters of text returned to the model.
            timeout_seconds: Deadline for the whole fetch, redirects included.
            max_redirects: Redirects followed before giving up.
            isolation: The agent's sandbox; its sessions fetch through its guarded transport.
        """
        self._isolation = isolation
        self._max_bytes = max_bytes
        self._max_chars = max_chars
        self._timeout = timeout_seconds
        self._max_redirects = max_redirects
        self._spec = ToolSpec(
            name="web_fetch",
            label="Fetch URL",
            description=(
                "Fetch an http(s) URL with GET and return its content as text. HTML pages are "
                "reduced to their readable main content (markdown); JSON and plain text are "
                f"returned as is. At most {max_chars} characters are returned."
            ),
            parameters={
                "type": "object",
                "properties": {
                    "url": {
                        "type": "string",
                        "description": "Absolute URL starting with http:// or https://.",
                    },
                },
                "required": ["url"],
                "additionalProperties": False,
            },
        )

    async def call(self, args: JsonObject, ctx: ToolContext) -> ToolResult:
        """Fetch the URL and return a header (final URL, status, type) and the text."""
        url = check_url(require_str(args, "url"))
        guarded = self._isolation is not None and self._isolation.applies(ctx)
        fetched = await self._fetch(url, guarded=guarded)
        kind = _kind(fetched.content_type, fetched.body)
        details = {
            "url": url,
            "finalUrl": fetched.url,
            "status": fetched.status,
            "contentType": fetched.content_type,
            "bytes": len(fetched.body),
            "truncated": fetched.cut,
            "extractor": "none",
        }
        header = (
            f"URL: {fetched.url}\nStatus: {fetched.status} {fetched.reason}\n"
            f"Content-Type: {fetched.content_type or 'unknown'}"
        )
        if kind == "binary":
            return ToolResult.error(
                f"{header}\n\nThe response is {fetched.content_type}, not text; "
                "web_fetch only returns text content.",
                details=details,
            )
        text = _decode(fetched.body, fetched.charset)
        if kind == "html":
            text, details["extractor"] = await anyio.to_thread.run_sync(
                _extract_html, text, fetched.url
            )
        if fetched.status >= 400:
            snippet = text[:_ERROR_SNIPPET_CHARS]
            return ToolResult.error(
                f"{header}\n\nHTTP error {fetched.status}.\n\n{snippet}", details=details
            )
        notes: list[str] = []
        if fetched.cut:
            notes.append(f"[Download stopped at {self._max_bytes} bytes; the response is larger.]")
        if len(text) > self._max_chars:
            notes.append(f"[Text cut to the first {self._max_chars} of {len(text)} characters.]")
            text = text[: self._max_chars]
            details["truncated"] = True
        body = "\n\n".join([text or "(empty response)", *notes])
        return ToolResult.text(f"{header}\n\n{body}", details=details)

    async def _fetch(self, url: str, *, guarded: bool = False) -> _Fetched:
        headers = {"User-Agent": _USER_AGENT, "Accept": _ACCEPT}
        isolation = self._isolation
        client = httpx2.AsyncClient(
            transport=isolation.web_transport() if guarded and isolation else None,
            headers=headers,
            timeout=self._timeout,
            follow_redirects=True,
            max_redirects=self._max_redirects,
        )
        try:
            # httpx timeouts are per network operation; this bounds the whole fetch, so a server
            # dripping one byte at a time cannot hold the turn.
            with anyio.fail_after(self._timeout):
                async with client, client.stream("GET", url) as response:
                    body, cut = await self._read_capped(response)
        except TimeoutError:
            raise ToolError(f"Fetching {url} timed out after {self._timeout:g} s.") from None
        except httpx2.TooManyRedirects:
            raise ToolError(
                f"Fetching {url} failed: more than {self._max_redirects} redirects."
            ) from None
        except httpx2.UnsupportedProtocol as exc:
            raise ToolError(
                f"Fetching {url} failed: redirected to an unsupported URL ({exc})."
            ) from None
        except httpx2.TimeoutException:
            raise ToolError(f"Fetching {url} timed out after {self._timeout:g} s.") from None
        except httpx2.ConnectError as exc:
            raise ToolError(f"Could not connect to {url}: {exc}") from None
        except (httpx2.HTTPError, httpx2.InvalidURL) as exc:
            raise ToolError(f"Fetching {url} failed: {type(exc).__name__}: {exc}") from None
        content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
        return _Fetched(
            url=str(response.url),
            status=response.status_code,
            reason=response.reason_phrase,
            content_type=content_type,
            charset=response.charset_encoding,
            body=body,
            cut=cut,
        )

    async def _read_capped(self, response: httpx2.Response) -> tuple[bytes, bool]:
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > self._max_bytes:
                del body[self._max_bytes :]
                return bytes(body), True
        return bytes(body), False
