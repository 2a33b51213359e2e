"""Who may talk to the gateway: bearer tokens, WebSocket subprotocol tokens, origin checks.

`GuardMiddleware` runs before every route. In order, it refuses:

1. browser requests from another origin (an `Origin` header that does not match `Host`), so a
   web page the user happens to visit cannot drive a gateway on their machine;
2. without a token (`gateway.auth.mode: "none"` only), requests whose `Host` is not a
   loopback name (DNS rebinding);
3. with a token (always, unless the mode is `none`: a gateway without a configured token
   makes its own, `nodmix.gateway.token`), every request that does not carry it: the
   OpenAI API (`/v1/*`), `/tools/invoke`, `/metrics`, `/hooks/*` and the WebSocket with all
   its methods (turns, `pairing.approve`, approval answers, the web page's data). Plain HTTP sends
   `Authorization: Bearer <token>`. Browsers cannot set headers on a WebSocket, so the
   handshake may instead offer the subprotocol `nodmix.bearer.<base64url(token)>` next to
   `nodmix.v1` (the server always selects `nodmix.v1`, never echoing the token).
   Webhook paths (`/hooks/...`) also accept the separate `hooks.token`, which opens nothing
   else.

A `POST` to a channel's webhook path (Telegram's `channels.telegram.webhook`, WhatsApp's
`channels.whatsapp.webhookPath`; exactly that path, any other method or path is checked as
usual) skips the host and token checks: the platform knows neither, and the channel's adapter
checks the secret or signature the platform sends with every request before the body is used.
So does a `GET` to a path whose platform verifies it that way (WhatsApp's `hub.challenge`,
answered only for the configured verify token).

`/health` (a liveness probe: status, version, uptime, the auth mode and a random instance id),
the web page's HTML and its static files need no token: they reveal nothing private, and the
page asks for the token before it loads any data.

Tokens are compared in constant time over their SHA-256 digests, so neither the content nor
the length of the expected token shows in the timing. A token never travels in a URL the
server sees: the page link the banner prints carries it in the fragment (`#token=`), which
browsers keep to themselves.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from nodmix.gateway.errors import error_body
from nodmix.gateway.settings import is_loopback

WS_PROTOCOL = "nodmix.v1"
"""The WebSocket subprotocol the gateway speaks."""
TOKEN_PROTOCOL_PREFIX = "nodmix.bearer."
"""Prefix of the subprotocol that carries the token (base64url, padding optional)."""

PUBLIC_PATHS = frozenset({"/", "/health", "/favicon.ico"})
PUBLIC_PREFIXES = ("/static/",)
HOOK_PREFIX = "/hooks/"


def tokens_match(given: str | None, expected: str) -> bool:
    """Constant-time comparison of a presented token with the configured one (digests of
    equal length, so a wrong length takes as long as a wrong character)."""
    if given is None:
        return False
    presented = hashlib.sha256(given.encode("utf-8", "surrogatepass")).digest()
    wanted = hashlib.sha256(expected.encode("utf-8", "surrogatepass")).digest()
    return hmac.compare_digest(presented, wanted)


def bearer_token(headers: Headers) -> str | None:
    """The token of an `Authorization: Bearer ...` header, if any."""
    scheme, _, value = headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return None
    return value.strip()


def subprotocol_token(subprotocols: list[str]) -> str | None:
    """The token offered as a `nodmix.bearer.<base64url>` WebSocket subprotocol, if any."""
    for protocol in subprotocols:
        if protocol.startswith(TOKEN_PROTOCOL_PREFIX):
            encoded = protocol.removeprefix(TOKEN_PROTOCOL_PREFIX)
            padded = encoded + "=" * (-len(encoded) % 4)
            try:
                token = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None
            return token or None
    return None


def encode_subprotocol_token(token: str) -> str:
    """The subprotocol that carries `token` (what clients offer on the handshake)."""
    encoded = base64.urlsafe_b64encode(token.encode()).decode().rstrip("=")
    return f"{TOKEN_PROTOCOL_PREFIX}{encoded}"


def _same_origin(origin: str, host: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.lower()


def _hook_call(scope: Scope, presented: str | None, expected: str | None) -> bool:
    path: str = scope.get("path", "")
    rest = path.removeprefix(HOOK_PREFIX).removeprefix("runs/")
    return (
        scope["type"] == "http"
        and path.startswith(HOOK_PREFIX)
        and "/" not in rest  # `/hooks/<name>` and `/hooks/runs/<id>`, nothing below
        and expected is not None
        and tokens_match(presented, expected)
    )


def _host_name(host: str) -> str:
    if host.startswith("["):
        return host[1:].partition("]")[0]
    return host.rpartition(":")[0] if host.count(":") == 1 else host


class GuardMiddleware:
    """Origin, host and token checks in front of the whole app (see the module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        hook_token: Callable[[], str | None] = lambda: None,
        channel_paths: frozenset[str] = frozenset(),
        channel_get_paths: frozenset[str] = frozenset(),
    ) -> None:
        """Guard `app`; `token=None` means no authentication (loopback binds only).
        `hook_token` returns the current `hooks.token` (read per request: it can be reloaded).
        `channel_paths` are channel webhook paths, which authenticate requests themselves;
        `channel_get_paths` those of them that also answer the platform's verification `GET`.
        """
        self.app = app
        self.token = token
        self.hook_token = hook_token
        self.channel_paths = channel_paths
        self.channel_get_paths = channel_get_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request with a clear error, or pass it on."""
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        problem = self._check(scope)
        if problem is None:
            await self.app(scope, receive, send)
            return
        status, code, message = problem
        response = JSONResponse(
            error_body(
                message, kind="authentication_error" if status == 401 else "forbidden", code=code
            ),
            status_code=status,
            headers={"www-authenticate": "Bearer"} if status == 401 else None,
        )
        if scope["type"] == "http":
            await response(scope, receive, send)
            return
        websocket = WebSocket(scope, receive, send)
        if "websocket.http.response" in scope.get("extensions", {}):
            await websocket.send_denial_response(response)
        else:  # pragma: no cover - uvicorn's WebSocket implementations all support denial
            await websocket.close(code=1008, reason=message)

    def _check(self, scope: Scope) -> tuple[int, str, str] | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        origin = headers.get("origin")
        browser_write = scope["type"] == "websocket" or scope.get("method") not in ("GET", "HEAD")
        if origin is not None and browser_write and not _same_origin(origin, host):
            return 403, "cross_origin", f"requests from origin {origin} are not accepted"
        if scope["type"] == "http" and (
            (scope.get("method") == "POST" and scope.get("path") in self.channel_paths)
            or (scope.get("method") == "GET" and scope.get("path") in self.channel_get_paths)
        ):
            return None
        if self.token is None:
            if not is_loopback(_host_name(host)):
                return 403, "bad_host", "this gateway only answers requests addressed to localhost"
            return None
        path: str = scope.get("path", "")
        if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
            return None
        presented = bearer_token(headers)
        if presented is None and scope["type"] == "websocket":
            presented = subprotocol_token(list(scope.get("subprotocols", [])))
        hook_call = _hook_call(scope, presented, self.hook_token())
        if not tokens_match(presented, self.token) and not hook_call:
            reason = "missing" if presented is None else "wrong"
            return 401, "invalid_token", f"{reason} gateway token (send Authorization: Bearer)"
        return None
