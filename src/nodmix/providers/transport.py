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
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import aclosing
from types import TracebackType
from typing import Any, Protocol, Self

import anyio
import httpx2
import msgspec

from nodmix.errors import (
    ProviderError,
    ProviderProtocolError,
    ProviderTimeoutError,
    ProviderUnavailableError,
    ProviderUnreachableError,
)
from nodmix.providers.base import ModelRequest
from nodmix.providers.debug import DebugSettings, RequestLog, display_url
from nodmix.providers.errors import one_line
from nodmix.providers.limits import CallLimits, format_seconds
from nodmix.providers.sse import SSEDecoder, SSEEvent, SSELineTooLong

WRITE_SECONDS = 60.0
"""Sending a large request body may take a while on a slow uplink."""

DEFAULT_TIMEOUT = httpx2.Timeout(
    connect=CallLimits().connect_seconds,
    read=CallLimits().idle_seconds,
    write=WRITE_SECONDS,
    pool=CallLimits().connect_seconds,
)
"""The HTTP client's waits for the default `CallLimits`."""

KEEPALIVE_EVENTS = frozenset({"ping"})
"""Named events that only keep the connection alive; like comments, they are not progress."""

_LOOPBACK_HOSTS = ("127.", "localhost", "[::1]", "0.0.0.0")

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


def http_timeout(limits: CallLimits) -> httpx2.Timeout:
    """The HTTP client's waits for `limits` (a read may not pause longer than the idle limit)."""
    return httpx2.Timeout(
        connect=limits.connect_seconds,
        read=limits.idle_seconds,
        write=WRITE_SECONDS,
        pool=limits.connect_seconds,
    )


def limits_from_timeout(timeout: httpx2.Timeout | float | None) -> CallLimits:
    """`CallLimits` matching an explicit HTTP timeout (as older callers pass one)."""
    full = coerce_timeout(timeout)
    defaults = CallLimits()
    return CallLimits(
        connect_seconds=full.connect or defaults.connect_seconds,
        idle_seconds=full.read or defaults.idle_seconds,
    )


def is_loopback(url: str) -> bool:
    """Whether `url` points at this machine (a refused connection there means no server)."""
    rest = url.partition("://")[2]
    return rest.startswith(_LOOPBACK_HOSTS)


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
        limits: CallLimits | None = None,
    ) -> None:
        self._provider = provider
        self._map_error = map_error
        self._limits = limits or limits_from_timeout(timeout)
        self._timeout = http_timeout(self._limits) if limits else coerce_timeout(timeout)
        self._debug = debug or DebugSettings()
        self._client = client
        self._owns_client = client is None

    @property
    def limits(self) -> CallLimits:
        """The provider's waits."""
        return self._limits

    def limits_for(self, request: ModelRequest) -> CallLimits:
        """The provider's waits with the request's own overrides (the agent's settings)."""
        if request.connect_timeout is None and request.idle_timeout is None:
            return self._limits
        return CallLimits(
            connect_seconds=request.connect_timeout or self._limits.connect_seconds,
            idle_seconds=request.idle_timeout or self._limits.idle_seconds,
        )

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
        limits: CallLimits | None = None,
    ) -> AsyncGenerator[SSEEvent, None]:
        """POST `payload` to `url` and yield the response's events as they arrive.

        Keep-alive comments and `ping` events do not count as progress: when no other event
        arrives for `limits.idle_seconds`, the request fails with `ProviderTimeoutError`.

        Raises:
            ProviderError: The adapter's mapping of an HTTP error status,
                `ProviderTimeoutError` for connect and idle timeouts,
                `ProviderUnreachableError` for a refused connection to this machine,
                `ProviderProtocolError` for a stream line too long to be an event, and
                `ProviderUnavailableError` for other connection failures.
        """
        limits = limits or self._limits
        client = self._ensure_client(url)
        body = msgspec.json.encode(payload)
        label = f"{self._provider}/{payload.get('model', '?')}"
        shown = display_url(url)
        start = time.monotonic()
        try:
            async with client.stream(
                "POST", url, content=body, headers=headers, timeout=http_timeout(limits)
            ) as response:
                log.response("POST", shown, response.status_code, time.monotonic() - start)
                if response.status_code >= 400:
                    raw = await response.aread()
                    text = raw.decode("utf-8", errors="replace")
                    raise self._map_error(response.status_code, response.headers, text)
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type and "json" in content_type:
                    raw = await response.aread()
                    yield SSEEvent(event=JSON_EVENT, data=raw.decode("utf-8", errors="replace"))
                    return
                async with aclosing(self._stream(response, limits, label, log)) as stream:
                    async for event in stream:
                        yield event
                log.finished(time.monotonic() - start)
        except SSELineTooLong as exc:
            raise ProviderProtocolError(
                f"{label}: malformed stream from {shown}: {exc}", provider=self._provider
            ) from exc
        except httpx2.ConnectTimeout as exc:
            log.failure("POST", shown, type(exc).__name__, time.monotonic() - start)
            raise ProviderTimeoutError(
                f"{label}: could not connect to {shown} within"
                f" {format_seconds(limits.connect_seconds)} (connect timeout)",
                provider=self._provider,
            ) from exc
        except httpx2.TimeoutException as exc:
            log.failure("POST", shown, type(exc).__name__, time.monotonic() - start)
            raise self._idle_timeout(label, limits) from exc
        except httpx2.ConnectError as exc:
            detail = one_line(str(exc) or type(exc).__name__, limit=200)
            log.failure("POST", shown, detail, time.monotonic() - start)
            if is_loopback(url):
                raise ProviderUnreachableError(
                    f"{self._provider}: connection refused at {shown}"
                    " — is the model server running?",
                    provider=self._provider,
                ) from exc
            raise ProviderUnavailableError(
                f"{self._provider}: connection error: {shown}: {detail}", provider=self._provider
            ) from exc
        except httpx2.TransportError as exc:
            detail = one_line(str(exc) or type(exc).__name__, limit=200)
            log.failure("POST", shown, detail, time.monotonic() - start)
            raise ProviderUnavailableError(
                f"{self._provider}: connection error: {shown}: {detail}", provider=self._provider
            ) from exc

    async def _stream(
        self, response: httpx2.Response, limits: CallLimits, label: str, log: RequestLog
    ) -> AsyncGenerator[SSEEvent, None]:
        decoder = SSEDecoder()
        chunks = response.aiter_text()
        idle_until = time.monotonic() + limits.idle_seconds
        while True:
            # The wait is bounded per read, never across a `yield`: the consumer's own work
            # between events must not run inside this deadline.
            with anyio.move_on_after(max(0.0, idle_until - time.monotonic())) as wait:
                piece: str | None = await _next_chunk(chunks)
            if wait.cancelled_caught:
                raise self._idle_timeout(label, limits)
            if piece is None:
                break
            for event in decoder.feed(piece):
                log.sse(event.event, event.data)
                if event.event not in KEEPALIVE_EVENTS:
                    idle_until = time.monotonic() + limits.idle_seconds
                yield event
        for event in decoder.flush():
            log.sse(event.event, event.data)
            yield event

    def _idle_timeout(self, label: str, limits: CallLimits) -> ProviderTimeoutError:
        return ProviderTimeoutError(
            f"{label} did not respond within {format_seconds(limits.idle_seconds)} (idle"
            f" timeout; raise models.providers.{self._provider}.timeouts.idleSeconds to wait"
            " longer)",
            provider=self._provider,
        )

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


async def _next_chunk(chunks: AsyncIterator[str]) -> str | None:
    try:
        return await anext(chunks)
    except StopAsyncIteration:
        return None


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
        limits: CallLimits | None = None,
    ) -> None:
        self._name = name
        self._api_key = api_key
        self._headers = dict(headers or {})
        self._transport = SSETransport(
            provider=name,
            map_error=map_error,
            timeout=timeout,
            debug=debug,
            client=client,
            limits=limits,
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
