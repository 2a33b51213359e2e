"""The HTTP half both adapters share: POST JSON, stream server-sent events back.

`SSETransport` owns one `httpx2.AsyncClient` (created on first use, so building a provider
costs nothing) and turns every transport failure into a `ProviderError`: HTTP error statuses
go through the adapter's `ErrorMapper`, timeouts and connection failures become
`ProviderUnavailableError`. A `200` that is plain JSON instead of an event stream (some
proxies ignore `stream: true`) is passed through as one `SSEEvent(event="json")` for the
adapter to parse as a complete response.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self

import httpx2
import msgspec

from nodmix.errors import ProviderError, ProviderUnavailableError
from nodmix.providers.debug import DebugSettings, RequestLog
from nodmix.providers.errors import one_line
from nodmix.providers.sse import SSEDecoder, SSEEvent

DEFAULT_TIMEOUT = httpx2.Timeout(connect=15.0, read=300.0, write=60.0, pool=15.0)
"""Reads may pause for minutes while a reasoning model thinks; connecting should not."""

JSON_EVENT = "json"
"""`SSEEvent.event` of a non-streamed JSON body."""


class ErrorMapper(Protocol):
    """Turns a failed HTTP response into the adapter's `ProviderError`."""

    def __call__(self, status: int, headers: Mapping[str, str], body: str) -> ProviderError:
        """The error for a response with this status, headers and body."""
        ...


def coerce_timeout(timeout: httpx2.Timeout | float | None) -> httpx2.Timeout:
    """A full `httpx2.Timeout` from seconds (applied to every phase) or `None` (defaults)."""
    if timeout is None:
        return DEFAULT_TIMEOUT
    if isinstance(timeout, httpx2.Timeout):
        return timeout
    return httpx2.Timeout(timeout)


class SSETransport:
    """POSTs JSON payloads for one provider and yields the server-sent events of the reply."""

    def __init__(
        self,
        *,
        provider: str,
        map_error: ErrorMapper,
        timeout: httpx2.Timeout | float | None = None,
        debug: DebugSettings | None = None,
        client: httpx2.AsyncClient | None = None,
    ) -> None:
        self._provider = provider
        self._map_error = map_error
        self._timeout = coerce_timeout(timeout)
        self._debug = debug or DebugSettings()
        self._client = client
        self._owns_client = client is None

    def request_log(self, secrets: Sequence[str]) -> RequestLog:
        """A debug logger for one request of this provider."""
        return self._debug.request_log(provider=self._provider, secrets=secrets)

    async def events(
        self,
        url: str,
        *,
        headers: Mapping[str, str],
        payload: Mapping[str, Any],
        log: RequestLog,
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST `payload` to `url` and yield the response's events as they arrive.

        Raises:
            ProviderError: The adapter's mapping of an HTTP error status, or
                `ProviderUnavailableError` for timeouts and connection failures.
        """
        client = self._ensure_client(url)
        body = msgspec.json.encode(payload)
        start = time.monotonic()
        try:
            async with client.stream("POST", url, content=body, headers=headers) as response:
                log.response("POST", url, response.status_code, time.monotonic() - start)
                if response.status_code >= 400:
                    raw = await response.aread()
                    text = raw.decode("utf-8", errors="replace")
                    raise self._map_error(response.status_code, response.headers, text)
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type and "json" in content_type:
                    raw = await response.aread()
                    yield SSEEvent(event=JSON_EVENT, data=raw.decode("utf-8", errors="replace"))
                    return
                decoder = SSEDecoder()
                async for text in response.aiter_text():
                    for event in decoder.feed(text):
                        log.sse(event.event, event.data)
                        yield event
                for event in decoder.flush():
                    log.sse(event.event, event.data)
                    yield event
                log.finished(time.monotonic() - start)
        except httpx2.TimeoutException as exc:
            log.failure("POST", url, type(exc).__name__, time.monotonic() - start)
            raise ProviderUnavailableError(
                f"{self._provider}: timeout: no response from {url} in time ({type(exc).__name__})",
                provider=self._provider,
            ) from exc
        except httpx2.TransportError as exc:
            detail = one_line(str(exc) or type(exc).__name__, limit=200)
            log.failure("POST", url, detail, time.monotonic() - start)
            raise ProviderUnavailableError(
                f"{self._provider}: connection error: {url}: {detail}", provider=self._provider
            ) from exc

    def _ensure_client(self, url: str = "") -> httpx2.AsyncClient:
        if self._client is None:
            # Loading the CA bundle for a TLS context costs ~50 ms. A plain-HTTP endpoint (Ollama,
            # vLLM, a local server) never uses it, and requests only ever go to the provider's own
            # base URL with redirects off, so skip it there.
            plain = url.startswith("http://")
            self._client = httpx2.AsyncClient(
                timeout=self._timeout, follow_redirects=False, verify=not plain
            )
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client if this transport created it."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()


class TransportProvider:
    """What the HTTP adapters share: name, credentials, the SSE transport, the model-list URL
    (for `nodmix doctor`), closing, and `async with` support."""

    _name: str
    _api_key: str | None
    _headers: dict[str, str]
    _transport: SSETransport

    def _init_transport(
        self,
        *,
        name: str,
        api_key: str | None,
        headers: Mapping[str, str] | None,
        map_error: ErrorMapper,
        timeout: httpx2.Timeout | float | None,
        debug: DebugSettings | None,
        client: httpx2.AsyncClient | None,
    ) -> None:
        self._name = name
        self._api_key = api_key
        self._headers = dict(headers or {})
        self._transport = SSETransport(
            provider=name, map_error=map_error, timeout=timeout, debug=debug, client=client
        )

    @property
    def name(self) -> str:
        """The provider id."""
        return self._name

    @property
    def models_url(self) -> str:
        """The endpoint listing the provider's models (an authenticated, cheap probe)."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
