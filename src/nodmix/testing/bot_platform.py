"""What the scripted platforms that post signed requests to a bot share (Teams, Google Chat):
posting to the gateway's endpoint with a bearer token, the tokens their token endpoint hands
out (revocable), API calls made to fail on demand and recorded when refused, files served for
download, and the claims of the tokens they sign.

Each platform adds its routes, its token grant and what a refusal looks like on its API."""

from __future__ import annotations

import itertools
import secrets
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import httpx2
from starlette.requests import Request
from starlette.responses import Response

from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.polling import poll_until
from nodmix.testing.signing import Outage

T = TypeVar("T")


def token_claims(claims: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """`claims` with `overrides` applied; a claim set to None is dropped."""
    merged = {**claims, **overrides}
    return {k: v for k, v in merged.items() if v is not None}


class ScriptedBotPlatform(ThreadedServer):
    """A platform for one bot. Thread-safe for test code."""

    def __init__(self) -> None:
        super().__init__()
        self.token_endpoint = Outage()
        self.endpoint: str | None = None
        """Where the platform posts (the gateway's endpoint for the channel)."""
        self.refused_calls: list[tuple[str, int]] = []
        self.files: dict[str, bytes] = {}
        self.downloads: list[str] = []
        self.tokens: set[str] = set()
        self._fail: list[int] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._client: httpx2.Client | None = None

    def _poster(self) -> httpx2.Client:
        """One HTTP client for posting (kept alive, as the platform keeps its connections)."""
        with self._lock:
            if self._client is None:
                self._client = httpx2.Client()
            return self._client

    def stop(self) -> None:
        """Stop serving and close the posting client."""
        client, self._client = self._client, None
        if client is not None:
            client.close()
        super().stop()

    @property
    def url(self) -> str:
        """The server's root URL."""
        return f"http://{self.host}:{self.port}"

    # ---- posting to the bot -----------------------------------------------------------------

    def sign(self) -> str:
        """A valid token for a request to the bot."""
        raise NotImplementedError

    def post(self, body: dict[str, Any], *, token: str | None = "", timeout: float = 30.0) -> int:
        """POST `body` to `endpoint` (with a valid token unless `token` is given; None: no
        `Authorization` header); the HTTP status."""
        if self.endpoint is None:
            raise RuntimeError(f"set {type(self).__name__}.endpoint to the gateway's endpoint")
        headers = {} if token is None else {"Authorization": f"Bearer {token or self.sign()}"}
        response = self._poster().post(self.endpoint, json=body, headers=headers, timeout=timeout)
        return response.status_code

    # ---- the bot's calls --------------------------------------------------------------------

    def revoke_tokens(self) -> set[str]:
        """Forget every token handed out (as when a secret is rotated or a token expires
        early): API calls with them answer 401. The revoked tokens."""
        with self._lock:
            revoked, self.tokens = self.tokens, set()
        return revoked

    def fail_next(self, count: int, status: int = 503) -> None:
        """The next `count` API calls answer `status`."""
        with self._lock:
            self._fail += [status] * count

    def wait_for(self, check: Callable[[], T], *, timeout: float = 20.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        """What the bot did last (for a wait that timed out)."""
        raise NotImplementedError

    def _issue_token(self, prefix: str = "") -> str:
        """A fresh access token the API accepts."""
        token = prefix + secrets.token_urlsafe(24)
        with self._lock:
            self.tokens.add(token)
        return token

    def _refused_code(self, request: Request, oversize: int | None = None) -> int | None:
        """The status refusing this API call: 401 without a token handed out, else a failure
        `fail_next` asked for, else `oversize` (the code for a body over the limit, when it
        is). Refusals are recorded in `refused_calls`."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        with self._lock:
            known = scheme == "Bearer" and token in self.tokens
            failing = self._fail.pop(0) if self._fail else None
        code = 401 if not known else failing or oversize
        if code is not None:
            self.refused_calls.append((request.url.path, code))
        return code

    def _serve_file(self, name: str) -> Response:
        """A file of `files` (404 when there is none), recorded in `downloads`."""
        data = self.files.get(name)
        if data is None:
            return Response(status_code=404)
        self.downloads.append(name)
        return Response(data, media_type="application/octet-stream")
