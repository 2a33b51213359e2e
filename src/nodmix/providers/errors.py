"""Turn an HTTP status and a provider's message into the right `ProviderError`.

Both adapters, the scripted in-process model and mid-stream error events share this one
classification, so a 429 means the same thing wherever it comes from. Vendor-specific work
(digging the message out of the vendor's error JSON) stays in each adapter's `errors.py`.

Messages are one line: `<provider>: <status> <short reason>: <provider message>`.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Mapping
from http import HTTPStatus

from nodmix.errors import (
    ContextOverflowError,
    ProviderAuthError,
    ProviderError,
    ProviderRequestError,
    ProviderUnavailableError,
    RateLimitedError,
)

_MAX_MESSAGE = 400

_REASONS = {
    400: "bad request",
    401: "unauthorized",
    402: "payment required",
    403: "forbidden",
    404: "not found",
    408: "request timeout",
    413: "request too large",
    422: "unprocessable request",
    429: "rate limited",
    500: "server error",
    502: "bad gateway",
    503: "unavailable",
    504: "gateway timeout",
    529: "overloaded",
}

_RATE_LIMIT_TEXT = r"(?i)rate[ _-]?limit|too many requests"


def short_reason(status: int) -> str:
    """A short lowercase phrase for an HTTP status (`429` -> `rate limited`)."""
    if status in _REASONS:
        return _REASONS[status]
    try:
        return HTTPStatus(status).phrase.lower()
    except ValueError:
        return "server error" if status >= 500 else "error"


def one_line(text: str, *, limit: int = _MAX_MESSAGE) -> str:
    """Collapse whitespace to single spaces and cap the length, so errors stay one line."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait according to `retry-after-ms` or `retry-after` (seconds or HTTP date).

    Header lookup is case-insensitive only if `headers` is (httpx headers are); pass
    lowercase keys otherwise.
    """
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def classify_error(
    *,
    provider: str,
    status: int | None,
    message: str,
    retry_after: float | None = None,
    body: str | None = None,
) -> ProviderError:
    """Build the `ProviderError` subclass that fits a failed provider call.

    Args:
        provider: Provider id for the message prefix (`openai`, `anthropic`, `ollama`, ...).
        status: HTTP status, or `None` for a failure reported inside a stream without one.
        message: The provider's own message (already extracted from its error JSON).
        retry_after: Seconds the provider asked us to wait, if any.
        body: The raw response body, kept on the error for debugging.

    Returns:
        `ProviderAuthError` (401/403), `RateLimitedError` (429), `ContextOverflowError`
        (overflow text on any other status), `ProviderUnavailableError` (408, 5xx but 501,
        529 and status-less stream errors), otherwise `ProviderRequestError` (404, 501 and
        other 4xx: retrying cannot help).
    """
    text = one_line(message)
    if status is None:
        headline = f"{provider}: stream error"
    else:
        headline = f"{provider}: {status} {short_reason(status)}"
    full = f"{headline}: {text}" if text else headline
    kind: type[ProviderError]
    if status in (401, 403):
        kind = ProviderAuthError
    elif status == 429 or (status is None and re.search(_RATE_LIMIT_TEXT, text)):
        return RateLimitedError(
            full, retry_after=retry_after, provider=provider, status=status, body=body
        )
    elif _is_overflow(text):
        kind = ContextOverflowError
    elif status is None or status == 408 or (status >= 500 and status != 501):
        kind = ProviderUnavailableError
    else:
        kind = ProviderRequestError
    return kind(full, provider=provider, status=status, body=body)


def _is_overflow(text: str) -> bool:
    # The signature list compiles a large pattern: load it only once an error happens.
    from nodmix.providers.overflow import is_context_overflow

    return is_context_overflow(text)
