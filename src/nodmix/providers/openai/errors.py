"""OpenAI-style error bodies -> `ProviderError`s.

OpenAI answers `{"error": {"message", "type", "code"}}`; compatible servers vary: Ollama and
vLLM may send `{"error": "text"}`, FastAPI-based servers `{"detail": ...}`, OpenRouter wraps
the upstream provider's own error in `error.metadata.raw`. The extractor reads all of those
and keeps the machine code (`context_length_exceeded`, `invalid_api_key`) next to the text,
because overflow detection can rely on it when the prose is vague.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from nodmix.errors import ProviderError
from nodmix.providers.errors import classify_error, one_line, parse_retry_after


def error_message(error: Any) -> str:
    """The readable message of an `error` value (object or string), with its code."""
    if isinstance(error, str):
        return error
    if not isinstance(error, Mapping):
        return ""
    message = str(error.get("message") or "")
    code = error.get("code")
    if isinstance(code, str) and code and code not in message:
        message = f"{message} ({code})" if message else code
    metadata = error.get("metadata")
    raw = metadata.get("raw") if isinstance(metadata, Mapping) else None
    if raw:
        message = f"{message}: {raw if isinstance(raw, str) else json.dumps(raw)}"
    return message


def extract_message(body: str) -> str:
    """The provider's message from an error response body (falls back to the raw text)."""
    try:
        data = json.loads(body)
    except ValueError:
        return one_line(body)
    if isinstance(data, Mapping):
        if "error" in data:
            return error_message(data["error"]) or one_line(body)
        for key in ("message", "detail"):
            value = data.get(key)
            if value:
                return value if isinstance(value, str) else json.dumps(value)
    return one_line(body)


def error_from_response(
    provider: str, status: int, headers: Mapping[str, str], body: str
) -> ProviderError:
    """Map a failed chat-completions response to a `ProviderError`."""
    return classify_error(
        provider=provider,
        status=status,
        message=extract_message(body),
        retry_after=parse_retry_after(headers),
        body=body,
    )


def error_from_stream(provider: str, error: Any) -> ProviderError:
    """Map an `error` object sent inside the event stream (after a `200`)."""
    status: int | None = None
    if isinstance(error, Mapping):
        for key in ("status", "code"):
            value = error.get(key)
            if isinstance(value, int) or (isinstance(value, str) and value.isdigit()):
                status = int(value)
                break
    return classify_error(provider=provider, status=status, message=error_message(error))
