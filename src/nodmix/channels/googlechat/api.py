"""The Google Chat REST API as the app uses it, with its service account's token.

`google-auth` signs the service account's assertion and exchanges it for an access token at
the key file's `token_uri` (scope `chat.bot`); the token is kept until shortly before it
expires. Requests go to `apiBaseUrl` (the scripted server in `nodmix.testing` in tests) under
a deadline. Errors keep their HTTP status so the adapter can tell a passing failure (5xx, 429,
network) from a final one.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import httpx2
from google.auth import exceptions as google_errors
from google.auth.transport.requests import Request as RequestsTransport
from google.oauth2 import service_account

from nodmix.channels.attachments import check_declared, write_capped
from nodmix.channels.webhook_bot import with_token

SCOPE = "https://www.googleapis.com/auth/chat.bot"
DEFAULT_API = "https://chat.googleapis.com"
REQUEST_TIMEOUT_SECONDS = 30.0
TOKEN_TIMEOUT_SECONDS = 15.0
DOWNLOAD_SECONDS = 300.0
_RESOURCE = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_\-./=+]{0,1999}")


class _Transport(RequestsTransport):
    """google-auth's requests transport, with a deadline on every token request."""

    def __call__(self, url: str, method: str = "GET", body: Any = None, headers: Any = None,
                 timeout: float | None = None, **kwargs: Any) -> Any:  # fmt: skip
        return super().__call__(
            url, method, body, headers, timeout=timeout or TOKEN_TIMEOUT_SECONDS, **kwargs
        )


class TokenRefused(Exception):
    """The token endpoint refused the service account (a deleted key, a wrong file)."""


def load_credentials(info: dict[str, Any]) -> service_account.Credentials:
    """Service-account credentials for the Chat API from a parsed key file.

    Raises:
        ValueError: the key file is not a service account's.
    """
    creds: service_account.Credentials = service_account.Credentials.from_service_account_info(
        info, scopes=[SCOPE]
    )
    return creds


class ChatApi:
    """The REST calls the channel makes."""

    def __init__(self, credentials: service_account.Credentials, base_url: str) -> None:
        self.credentials = credentials
        self.base_url = base_url.rstrip("/")
        self._lock = anyio.Lock()
        self._client = httpx2.AsyncClient(
            timeout=httpx2.Timeout(REQUEST_TIMEOUT_SECONDS, connect=10.0)
        )

    @property
    def account(self) -> str:
        """The service account's email."""
        return str(self.credentials.service_account_email)

    async def token(self) -> str:
        """A valid access token (refreshed in a worker thread when needed).

        Raises:
            TokenRefused: the token endpoint refused the credentials.
            google.auth.exceptions.TransportError: it could not be reached.
        """
        async with self._lock:
            if not self.credentials.valid:
                try:
                    with anyio.fail_after(TOKEN_TIMEOUT_SECONDS + 5):
                        await anyio.to_thread.run_sync(self.credentials.refresh, _Transport())
                except google_errors.RefreshError as exc:
                    if getattr(exc, "retryable", False):
                        raise google_errors.TransportError(str(exc)) from exc
                    raise TokenRefused(str(exc)) from exc
                except TimeoutError as exc:
                    raise google_errors.TransportError("token endpoint timed out") from exc
            return str(self.credentials.token)

    async def _request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        async def attempt(token: str) -> httpx2.Response:
            headers = {"Authorization": f"Bearer {token}"}
            response = await self._client.request(
                method, f"{self.base_url}/v1/{path}", headers=headers, **kwargs
            )
            response.raise_for_status()
            return response

        response = await with_token(  # a token revoked or expired early: renewed once, at once
            attempt, token=self.token, forget=self._forget_token, refused=_unauthorized
        )
        body = response.json() if response.content else {}
        return body if isinstance(body, dict) else {}

    def _forget_token(self) -> None:
        self.credentials.token = None

    async def create_message(self, space: str, text: str, thread: str | None) -> str:
        """`spaces.messages.create` (in the thread, else a new one); the message's name."""
        body: dict[str, Any] = {"text": text}
        params = {}
        if thread:
            body["thread"] = {"name": thread}
            params["messageReplyOption"] = "REPLY_MESSAGE_FALLBACK_TO_NEW_THREAD"
        created = await self._request("POST", f"{space}/messages", json=body, params=params)
        return str(created.get("name", ""))

    async def update_message(self, name: str, text: str) -> None:
        """`spaces.messages.patch` of the text."""
        await self._request("PATCH", name, json={"text": text}, params={"updateMask": "text"})

    async def download(self, resource: str, target: Path, max_bytes: int) -> Path:
        """`media.download` of an attachment, streamed under the cap.

        Raises:
            ValueError: `resource` is not an attachment's resource name (it goes into the URL
                the app's token is sent to, so `..` and the like could reach other endpoints).
        """
        if not _RESOURCE.fullmatch(resource) or ".." in resource.split("/"):
            raise ValueError(f"not a Chat attachment resource: {resource[:80]!r}")
        headers = {"Authorization": f"Bearer {await self.token()}"}
        url = f"{self.base_url}/v1/media/{resource}"
        with anyio.fail_after(DOWNLOAD_SECONDS):
            async with self._client.stream(
                "GET", url, params={"alt": "media"}, headers=headers
            ) as response:
                response.raise_for_status()
                length = response.headers.get("content-length", "")
                check_declared(int(length) if length.isdigit() else None, max_bytes)
                return await write_capped(response.aiter_bytes(), target, max_bytes)

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._client.aclose()


def _unauthorized(exc: Exception) -> bool:
    return isinstance(exc, httpx2.HTTPStatusError) and exc.response.status_code == 401


def read_key_file(path: str | None, inline: str | None) -> dict[str, Any]:
    """The service-account key: the file at `path`, or the JSON in `inline`.

    Raises:
        OSError: the file cannot be read.
        ValueError: it is not JSON.
    """
    raw = Path(path).expanduser().read_text() if path else (inline or "")
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("the key is not a JSON object")
    return data
