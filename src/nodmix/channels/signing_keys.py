"""The public keys a platform signs its webhook tokens with, fetched and kept fresh.

Channels whose platform posts to the gateway with a signed JWT in `Authorization` (Microsoft
Teams, Google Chat) verify it against keys published at a URL. `SigningKeys` fetches that
document (async, under a deadline), keeps it for its lifetime, and fetches it again early when
a token names a key id it does not hold, since platforms rotate keys, at most once per
`MIN_REFETCH_SECONDS` so tokens with invented key ids cannot make the gateway hammer the key
endpoint. One fetch runs at a time; requests arriving meanwhile wait for it. While the key
endpoint cannot be reached, `KeysUnavailable` says so (the channel answers 503 and the
platform retries); the next request after it recovers fetches again.

`bearer_token` and `SigningKeys.signer` read a request's token and the RS256 key its header
names, refusing with the channel's own error; the channel then verifies the claims.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import anyio
import httpx2

K = TypeVar("K")

FETCH_TIMEOUT_SECONDS = 5.0
"""A key endpoint that has not answered by then counts as down."""
DEFAULT_TTL_SECONDS = 24 * 3600.0
MIN_TTL_SECONDS = 60.0
MIN_REFETCH_SECONDS = 60.0
"""An unknown key id refetches the keys at most this often."""
FAILED_RETRY_SECONDS = 5.0
"""After a failed fetch, requests are refused this long before the next attempt."""
MAX_DOCUMENT_BYTES = 1 << 20
MAX_TOKEN_CHARS = 16 * 1024
"""A longer token in `Authorization` is refused unread."""
_MAX_AGE = re.compile(r"max-age=(\d+)")


class KeysUnavailable(Exception):
    """The signing keys could not be fetched (the endpoint is down, slow or answers junk)."""


class SigningKeys(Generic[K]):
    """A key set fetched from `url` and parsed by `parse` (`{kid: key}`)."""

    def __init__(
        self, url: str, parse: Callable[[Any], Mapping[str, K]], *, discovery: bool = False
    ) -> None:
        """`discovery`: `url` is an OpenID configuration whose `jwks_uri` holds the keys."""
        self.url = url
        self._parse = parse
        self._discovery = discovery
        self._keys: Mapping[str, K] = {}
        self._expires = 0.0
        self._fetched_at = -MIN_REFETCH_SECONDS
        self._failed_until = 0.0
        self._lock = anyio.Lock()
        self.last_error: str | None = None

    async def key(self, kid: str) -> K | None:
        """The key with id `kid` (None: not among the current keys, even after a refetch).

        Raises:
            KeysUnavailable: the keys are needed and cannot be fetched.
        """
        now = time.monotonic()
        if now < self._expires and kid in self._keys:
            return self._keys[kid]
        async with self._lock:
            now = time.monotonic()
            stale = now >= self._expires
            unknown = kid not in self._keys and now - self._fetched_at >= MIN_REFETCH_SECONDS
            if stale or unknown:
                if now < self._failed_until:
                    raise KeysUnavailable(self.last_error or "the key endpoint is down")
                await self._fetch()
            return self._keys.get(kid)

    async def signer(self, header: object, refused: type[Exception], whose: str) -> tuple[str, K]:
        """The id and the key that an RS256 token's (unverified) `header` names.

        Raises:
            refused: the token is not RS256, names no key, or a key not among these (the
                message says it is not `whose`).
            KeysUnavailable: the keys are needed and cannot be fetched.
        """
        if not isinstance(header, dict) or header.get("alg") != "RS256":
            alg = header.get("alg") if isinstance(header, dict) else None
            raise refused(f"token algorithm {alg!r} is not RS256")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise refused("the token names no signing key")
        key = await self.key(kid)
        if key is None:
            raise refused(f"the token's signing key is not {whose}")
        return kid, key

    async def _fetch(self) -> None:
        url = self.url
        try:
            with anyio.fail_after(FETCH_TIMEOUT_SECONDS):
                document, ttl = await fetch_json(url)
                if self._discovery:
                    url = str(document["jwks_uri"])
                    document, keys_ttl = await fetch_json(url)
                    ttl = min(ttl, keys_ttl)
            keys = self._parse(document)
        except (httpx2.HTTPError, TimeoutError, ValueError, TypeError, KeyError) as exc:
            self.last_error = f"cannot fetch signing keys from {url}: {_describe(exc)}"
            self._failed_until = time.monotonic() + FAILED_RETRY_SECONDS
            raise KeysUnavailable(self.last_error) from exc
        now = time.monotonic()
        self._keys, self._fetched_at = keys, now
        self._expires = now + max(MIN_TTL_SECONDS, ttl)
        self.last_error = None


def bearer_token(authorization: str | None, refused: type[Exception]) -> str:
    """The token of an `Authorization: Bearer <token>` header.

    Raises:
        refused: no bearer token, or one longer than `MAX_TOKEN_CHARS`.
    """
    scheme, _, token = (authorization or "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise refused("no bearer token")
    if len(token) > MAX_TOKEN_CHARS:
        raise refused("the token is too long")
    return token


async def fetch_json(url: str) -> tuple[Any, float]:
    """GET a JSON document of at most `MAX_DOCUMENT_BYTES`; with its lifetime in seconds
    (`Cache-Control: max-age`, else a day).

    Raises:
        httpx2.HTTPError: the request failed or was answered with an error status.
        ValueError: the answer is too large or not JSON.
    """
    import json

    timeout = httpx2.Timeout(FETCH_TIMEOUT_SECONDS)
    async with (
        httpx2.AsyncClient(timeout=timeout, follow_redirects=False) as client,
        client.stream("GET", url) as response,
    ):
        response.raise_for_status()
        body = bytearray()
        async for chunk in response.aiter_bytes():
            body += chunk
            if len(body) > MAX_DOCUMENT_BYTES:
                raise ValueError("the document is larger than 1 MiB")
        found = _MAX_AGE.search(response.headers.get("cache-control", ""))
        ttl = float(found.group(1)) if found else DEFAULT_TTL_SECONDS
    return json.loads(bytes(body)), ttl


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return f"no answer within {FETCH_TIMEOUT_SECONDS:g} s"
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return str(exc) or type(exc).__name__
