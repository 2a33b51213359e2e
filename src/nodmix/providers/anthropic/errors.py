"""Anthropic error bodies and stream `error` events -> `ProviderError`s.

Anthropic answers `{"type": "error", "error": {"type": "overloaded_error", "message": ...}}`.
The error type is kept next to the message (`request_too_large` is itself an overflow
signature), and for errors inside a `200` stream it stands in for the missing HTTP status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nodmix.errors import ProviderError
from nodmix.providers.errors import classify_error, one_line, parse_retry_after

ERROR_TYPE_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
"""Anthropic's documented error types and the HTTP status each one comes with."""


def error_message(error: Any) -> str:
    """`message (type)` from an Anthropic `error` object; strings pass through."""
    if isinstance(error, str):
        return error
    if not isinstance(error, Mapping):
        return ""
    message = str(error.get("message") or "")
    kind = error.get("type")
    if isinstance(kind, str) and kind and kind not in message:
        message = f"{message} ({kind})" if message else kind
    return message


def extract_message(body: str) -> str:
    """The provider's message from an error response body (falls back to the raw text)."""
    try:
        data = json.loads(body)
    except ValueError:
        return one_line(body)
    if isinstance(data, Mapping) and data.get("error"):
        return error_message(data["error"])
    if isinstance(data, Mapping) and isinstance(data.get("message"), str):
        return str(data["message"])
    return one_line(body)


def error_from_response(
    provider: str, status: int, headers: Mapping[str, str], body: str
) -> ProviderError:
    """Map a failed Messages response to a `ProviderError`."""
    return classify_error(
        provider=provider,
        status=status,
        message=extract_message(body),
        retry_after=parse_retry_after(headers),
        body=body,
    )


def error_from_stream(provider: str, error: Any) -> ProviderError:
    """Map an `error` event that arrived inside the stream (after a `200`)."""
    kind = error.get("type") if isinstance(error, Mapping) else None
    status = ERROR_TYPE_STATUS.get(kind) if isinstance(kind, str) else None
    return classify_error(provider=provider, status=status, message=error_message(error))
