"""Slow and surplus connections: a deadline for request headers and a cap on open connections.

uvicorn closes idle keep-alive connections (`timeout_keep_alive`), but a connection that was
just opened and sends nothing, or sends half a request head and stalls, stays open forever,
and its `limit_concurrency` is only checked once a request head is complete. Stalled clients
could therefore hold every file descriptor the process has. `limited_http_protocol` returns
uvicorn's HTTP protocol with two additions:

- the request head (request line and headers) must be complete within the timeout, counted
  from when the connection opened or the previous response ended; otherwise the connection is
  closed. Sending bytes slowly does not extend it. The body has its own deadline
  (`nodmix.gateway.limits`).
- a request head larger than `MAX_HEAD_BYTES` is answered with 431 and the connection closed
  (uvicorn's httptools parser itself sets no bound on it);
- a connection beyond `max_connections` (HTTP and WebSocket together) is answered with 503
  and closed at once, before anything is read.
"""

from __future__ import annotations

import asyncio
import json
import logging
from http import HTTPStatus
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from nodmix.gateway.errors import error_body

log = logging.getLogger("nodmix.gateway")

MAX_HEAD_BYTES = 64 * 1024
"""Request line plus headers, at most."""
LINGER_SECONDS = 2.0
"""How long a refused connection waits for the client to close before it is closed anyway."""


def _busy_response() -> bytes:
    body = json.dumps(
        error_body(
            "the gateway has too many open connections; retry shortly (gateway.maxConnections)",
            kind="api_error",
            code="too_many_connections",
        )
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/json\r\n"
        f"content-length: {len(body)}\r\n"
        "retry-after: 1\r\n"
        "connection: close\r\n\r\n"
    )
    return head.encode() + body


_BUSY = _busy_response()


def _plain_response(status: int, message: str) -> bytes:
    body = message.encode()
    return (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "content-type: text/plain; charset=utf-8\r\n"
        f"content-length: {len(body)}\r\n"
        "connection: close\r\n\r\n"
    ).encode() + body


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head deadline and a connection cap."""

    head_timeout_seconds: float = 30.0
    max_connections: int = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As uvicorn's protocol (uvicorn creates one per connection)."""
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_bytes = 0
        self._discarding = False

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Refuse the connection when too many are open; otherwise start the head deadline."""
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            log.warning(
                "refusing a connection: %d open (gateway.maxConnections)", len(self.connections) - 1
            )
            transport.write(_BUSY)
            self._close_gently()
            return
        self._arm_head_timer()

    def data_received(self, data: bytes) -> None:
        """Parse the request, unless the connection is being closed (then discard it)."""
        if self._discarding:
            return
        awaiting_head = self._head_timer is not None
        super().data_received(data)
        if awaiting_head and self._head_timer is not None and not self._discarding:
            self._head_bytes += len(data)
            if self._head_bytes > MAX_HEAD_BYTES:
                log.debug("refusing a request head over %d bytes", MAX_HEAD_BYTES)
                self.transport.write(
                    _plain_response(431, f"request head larger than {MAX_HEAD_BYTES} bytes")
                )
                self._close_gently()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's 400 for an unparsable request, without cutting off the client."""
        self._discarding = True
        self.transport.write(_plain_response(400, msg))
        self._close_gently()

    def _close_gently(self) -> None:
        # Closing a socket with unread input makes the kernel reset the connection, and the
        # client may lose the response. Send it, then FIN, discard what still arrives, and
        # close when the client does (or after a short linger).
        self._discarding = True
        self._cancel_head_timer()
        if self.transport.can_write_eof():
            self.transport.write_eof()
            self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the deadline along with the connection."""
        self._cancel_head_timer()
        super().connection_lost(exc)

    def on_headers_complete(self) -> None:
        """The head arrived in time."""
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        """The next request head gets the same deadline (unless one is already queued)."""
        pipelined = bool(self.pipeline)
        super().on_response_complete()
        if not pipelined and not self.transport.is_closing():
            self._arm_head_timer()

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(self.head_timeout_seconds, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self.transport.is_closing():
            log.debug("closing a connection whose request head did not arrive in time")
            self.transport.close()


def limited_http_protocol(
    *, head_timeout_seconds: float, max_connections: int
) -> type[LimitedHttpProtocol]:
    """The protocol class uvicorn should use (`uvicorn.Config(http=...)`)."""
    return type(
        "LimitedHttpProtocol",
        (LimitedHttpProtocol,),
        {"head_timeout_seconds": head_timeout_seconds, "max_connections": max_connections},
    )
