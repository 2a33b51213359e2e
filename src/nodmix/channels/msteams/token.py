"""The bot's own token for the Bot Connector: the OAuth 2.0 client-credentials grant.

The bot asks its token endpoint (Microsoft Entra: `login.microsoftonline.com/<tenant>` for a
single-tenant bot, `.../botframework.com` for a multi-tenant one) for a token with the scope
`https://api.botframework.com/.default`, keeps it until five minutes before it expires, and
asks again. One request runs at a time; a refused secret is reported as such.
"""

from __future__ import annotations

import time

import anyio
import httpx2

SCOPE = "https://api.botframework.com/.default"
DEFAULT_TOKEN_URL = "https://login.microsoftonline.com/{tenant}/oauth2/v2.0/token"
REQUEST_TIMEOUT_SECONDS = 15.0
RENEW_BEFORE_SECONDS = 300.0


class TokenError(Exception):
    """No token: the endpoint refused the credentials (`refused`) or could not be reached."""

    def __init__(self, message: str, *, refused: bool) -> None:
        super().__init__(message)
        self.refused = refused


def token_url(tenant_id: str | None, configured: str | None) -> str:
    """The configured token endpoint, else Entra's for the tenant (or the Bot Framework's)."""
    return configured or DEFAULT_TOKEN_URL.format(tenant=tenant_id or "botframework.com")


class BotToken:
    """A cached client-credentials token."""

    def __init__(self, url: str, app_id: str, app_password: str) -> None:
        self.url = url
        self._form = {
            "grant_type": "client_credentials",
            "client_id": app_id,
            "client_secret": app_password,
            "scope": SCOPE,
        }
        self._token = ""
        self._expires = 0.0
        self._lock = anyio.Lock()

    def forget(self) -> None:
        """Drop the cached token (the connector refused it)."""
        self._expires = 0.0

    async def get(self) -> str:
        """A valid token (fetched when the cached one is about to expire).

        Raises:
            TokenError: the endpoint refused the credentials or could not be reached.
        """
        if time.monotonic() < self._expires:
            return self._token
        async with self._lock:
            if time.monotonic() >= self._expires:
                await self._fetch()
            return self._token

    async def _fetch(self) -> None:
        timeout = httpx2.Timeout(REQUEST_TIMEOUT_SECONDS)
        try:
            with anyio.fail_after(REQUEST_TIMEOUT_SECONDS + 1):
                async with httpx2.AsyncClient(timeout=timeout) as client:
                    response = await client.post(self.url, data=self._form)
        except (httpx2.HTTPError, TimeoutError) as exc:
            raise TokenError(f"token endpoint unreachable: {exc!r}", refused=False) from exc
        if response.status_code in (400, 401, 403):
            detail = _error_text(response)
            raise TokenError(f"token refused ({response.status_code}): {detail}", refused=True)
        if response.status_code != 200:
            raise TokenError(f"token endpoint answered {response.status_code}", refused=False)
        try:
            body = response.json()
            token, lifetime = str(body["access_token"]), float(body.get("expires_in", 3600))
        except (ValueError, KeyError, TypeError) as exc:
            raise TokenError(f"token endpoint answered junk: {exc}", refused=False) from exc
        self._token = token
        self._expires = time.monotonic() + max(60.0, lifetime - RENEW_BEFORE_SECONDS)


def _error_text(response: httpx2.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    if isinstance(body, dict):
        return str(body.get("error_description") or body.get("error") or body)[:200]
    return str(body)[:200]
