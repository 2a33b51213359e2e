"""Graph API calls through pywa's async client: each bounded in time and retried with backoff
when the failure is the platform's or the network's (5xx, throttling, timeouts, refused
connections), never when it is ours (a bad token, a closed window, a wrong recipient)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import anyio
from pywa_async.client import WhatsApp
from pywa_async.errors import WhatsAppError

if TYPE_CHECKING:  # httpx comes with pywa; imported where it is used
    import httpx

log = logging.getLogger("nodmix.channels.whatsapp")

T = TypeVar("T")
ATTEMPTS = 4
FIRST_BACKOFF_SECONDS = 1.0
MAX_BACKOFF_SECONDS = 8.0
CALL_SECONDS = 45.0
"""One attempt of one call, at most (the HTTP client's own timeout is usually shorter)."""
TRANSIENT_CODES = frozenset({1, 2, 4, 80007, 130429, 131000, 131016})
"""Graph error codes Meta documents as temporary (unknown, service, rate limits)."""


class GraphUnavailable(Exception):
    """The Graph API kept failing (after the retries): the platform or the network is down."""


class GraphRefused(Exception):
    """The Graph API answered with an error (pywa's `WhatsAppError`, as our own type: pywa's
    errors are frozen dataclasses that cannot pass through a generator-based context manager,
    which sets their traceback)."""

    def __init__(self, code: int, status: int | None, message: str, *, transient: bool) -> None:
        self.code = code
        self.status = status
        self.transient = transient
        where = f"HTTP {status}, " if status is not None else ""
        super().__init__(f"{where}error {code}: {message}"[:300])

    @property
    def auth(self) -> bool:
        """The token was refused."""
        return self.code in (0, 190) or self.status == 401

    @classmethod
    def of(cls, exc: WhatsAppError) -> GraphRefused:
        status = exc.status_code
        transient = (
            (status is not None and (status >= 500 or status == 429))
            or exc.code in TRANSIENT_CODES
            or bool(exc.is_transient)
        )
        return cls(exc.code, status, str(exc.message), transient=transient)


def http_client(timeout: float) -> httpx.AsyncClient:
    """The client pywa makes its requests with (pywa sets its base URL and token)."""
    import httpx

    return httpx.AsyncClient(timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)))


def new_client(
    phone_number_id: str,
    token: str,
    session: httpx.AsyncClient,
    *,
    api_base_url: str,
    api_version: str | None,
) -> WhatsApp:
    """pywa's client for one business number, pointed at `api_base_url`."""
    if api_version is None:
        wa = WhatsApp(phone_id=phone_number_id, token=token, session=session)
    else:
        wa = WhatsApp(
            phone_id=phone_number_id, token=token, session=session, api_version=api_version
        )
    import httpx

    # pywa sets `https://graph.facebook.com/v<version>`; keep its version, use our server.
    version = str(session.base_url).rstrip("/").rsplit("/", 1)[-1]
    session.base_url = httpx.URL(f"{api_base_url}/{version}")
    return wa


def transient(exc: BaseException) -> bool:
    """Whether trying again later may succeed."""
    import httpx

    if isinstance(exc, httpx.TransportError | TimeoutError):
        return True
    return isinstance(exc, GraphRefused) and exc.transient


async def retrying(
    call: Callable[[], Awaitable[T]], what: str, *, seconds: float = CALL_SECONDS
) -> T:
    """`call()`, again after 1, 2 and 4 s while it fails transiently.

    Raises:
        GraphUnavailable: every attempt failed transiently.
        GraphRefused: the platform refused the call (not retried).
    """
    backoff = FIRST_BACKOFF_SECONDS
    for attempt in range(ATTEMPTS):
        try:
            return await bounded(call, seconds)
        except Exception as exc:
            if not transient(exc):
                raise
            if attempt == ATTEMPTS - 1:
                raise GraphUnavailable(f"{what}: {describe(exc)}") from exc
            log.warning("whatsapp %s failed (%s); retrying in %gs", what, describe(exc), backoff)
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_SECONDS)
    raise AssertionError("unreachable")


async def bounded(call: Callable[[], Awaitable[T]], seconds: float) -> T:
    """`call()`, cancelled after `seconds`.

    A bare cancel scope rather than `anyio.fail_after`: pywa's errors are frozen dataclasses,
    which a generator-based context manager fails to re-raise (it sets their traceback).

    Raises:
        TimeoutError: no answer within `seconds`.
        GraphRefused: the Graph API answered with an error.
    """
    with anyio.CancelScope(deadline=anyio.current_time() + seconds):
        try:
            return await call()
        except WhatsAppError as exc:
            raise GraphRefused.of(exc) from None
    raise TimeoutError(f"no answer within {seconds:g} s")


def describe(exc: BaseException) -> str:
    """One line for a failed call (never the request, which carries the token)."""
    import httpx

    if isinstance(exc, GraphRefused):
        return str(exc)
    if isinstance(exc, TimeoutError | httpx.TimeoutException):
        return "no answer in time"
    return f"{type(exc).__name__}: {exc}"[:300]
