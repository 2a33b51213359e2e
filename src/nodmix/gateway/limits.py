"""Request bodies under limits: a size cap enforced while the body streams in, and a deadline.

`BodyLimitMiddleware` sits in front of every HTTP route:

- a `Content-Length` above `gateway.maxBodyBytes` (uploads: the attachment cap) is refused
  with 413 (naming the setting that raises it) before one byte of the body is read (a client
  that sent `Expect: 100-continue` never sends it);
- a body without a length (chunked) is counted as it arrives and refused with 413 as soon as
  it passes the limit, so at most the limit (plus one chunk) is ever held in memory;
- a body that has not fully arrived `gateway.requestTimeoutSeconds` after its headers is
  refused with 408 (a client trickling bytes cannot hold a request open forever).

Refusals happen inside the route's `request.body()` call, so they come back as ordinary
`APIError`s in the OpenAI error shape; the middleware adds `connection: close`, because the
unread rest of the body makes the connection useless. WebSocket messages are capped by the
server itself (`ws_max_size`, see `nodmix.gateway.server`).

`decode_json` is how every JSON endpoint turns a body into its request type: malformed JSON,
a wrong shape and bytes that are not UTF-8 are all one clear 400.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import anyio
import msgspec
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from nodmix.gateway.errors import APIError, bad_request

T = TypeVar("T")


BODY_LIMIT_KEY = "gateway.maxBodyBytes"


def too_large(limit: int, key: str = BODY_LIMIT_KEY) -> APIError:
    """The 413 for a body over `limit` bytes (`key`: the setting that raises the limit)."""
    return APIError(
        status=413,
        message=f"request body is larger than the gateway accepts ({limit} bytes; {key})",
        code="request_too_large",
    )


def too_slow(seconds: float) -> APIError:
    """The 408 for a body that did not arrive in time."""
    return APIError(
        status=408,
        message=f"the request body did not arrive within {seconds:g} s "
        "(gateway.requestTimeoutSeconds)",
        code="request_timeout",
    )


def decode_json(decoder: msgspec.json.Decoder[T], body: bytes) -> T:
    """A request body decoded as the endpoint's request type.

    Raises:
        APIError: 400 when the body is not UTF-8, not JSON, nested too deeply, or not the
            expected shape.
    """
    try:
        return decoder.decode(body)
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None
    except msgspec.ValidationError as exc:
        path = str(exc).rpartition(" - at `$.")[2].rstrip("`") if " - at `$." in str(exc) else None
        raise bad_request(f"invalid request: {exc}", param=path) from None
    except UnicodeDecodeError:
        raise bad_request("the request body is not valid UTF-8") from None
    except msgspec.DecodeError:
        raise bad_request("the request body is not valid JSON") from None


def declared_length(scope: Scope) -> int | None:
    """The request's `Content-Length`, when it sent a usable one."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


class _BodyReader:
    """Wraps `receive`: counts body bytes and enforces the deadline until the body is in."""

    def __init__(
        self, receive: Receive, *, max_bytes: int, key: str, timeout_seconds: float
    ) -> None:
        self._receive = receive
        self._max_bytes = max_bytes
        self._key = key
        self._timeout = timeout_seconds
        self._deadline = time.monotonic() + timeout_seconds
        self._received = 0
        self._done = False
        self.refused = False
        """True once the body was refused: the response must close the connection."""

    async def receive(self) -> Message:
        if self._done:
            return await self._receive()  # after the body: only `http.disconnect` comes
        remaining = self._deadline - time.monotonic()
        message: Message | None = None
        with anyio.move_on_after(max(0.0, remaining)):
            message = await self._receive()
        if message is None:
            self.refused = True
            raise too_slow(self._timeout)
        if message["type"] != "http.request":
            self._done = True
            return message
        self._received += len(message.get("body", b""))
        if self._received > self._max_bytes:
            self.refused = True
            raise too_large(self._max_bytes, self._key)
        if not message.get("more_body", False):
            self._done = True
        return message


class BodyLimitMiddleware:
    """Size and time limits on HTTP request bodies (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        max_bytes: int,
        timeout_seconds: float,
        path_limits: Mapping[str, tuple[Callable[[], int], str]] | None = None,
    ) -> None:
        """Guard `app`'s request bodies: at most `max_bytes`, within `timeout_seconds`
        (`path_limits`: another size for a path, read per request, such as uploads, and
        the setting that raises it, named when a body is refused)."""
        self.app = app
        self.max_bytes = max_bytes
        self.timeout_seconds = timeout_seconds
        self.path_limits = dict(path_limits or {})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse an oversized or late body with an error response, or pass the request on."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        own = self.path_limits.get(scope.get("path", ""))
        max_bytes, key = (own[0](), own[1]) if own is not None else (self.max_bytes, BODY_LIMIT_KEY)
        length = declared_length(scope)
        if length is not None and length > max_bytes:
            await _closing(too_large(max_bytes, key), scope, receive, send)
            return
        reader = _BodyReader(
            receive, max_bytes=max_bytes, key=key, timeout_seconds=self.timeout_seconds
        )
        started = False

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if reader.refused:
                    message = {**message, "headers": [*message.get("headers", ()), _CLOSE]}
            await send(message)

        try:
            await self.app(scope, reader.receive, guarded_send)
        except APIError as exc:
            # A route that does not turn errors into responses itself (`api_route` does).
            if started or not reader.refused:
                raise
            await _closing(exc, scope, receive, send)


_CLOSE = (b"connection", b"close")


async def _closing(error: APIError, scope: Scope, receive: Receive, send: Send) -> None:
    response = error.response()
    response.headers["connection"] = "close"
    await response(scope, receive, send)
