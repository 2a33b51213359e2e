"""Opt-in debug logging of model traffic, with secrets always redacted.

Switched on by environment variables (read once, by whoever builds the providers):

- `NODMIX_DEBUG_MODEL_TRANSPORT=1`: method, URL, status and timing of every request.
- `NODMIX_DEBUG_MODEL_PAYLOAD=tools`: the tool names of the final payload (what the model
  sees; in code mode that must be `exec` and `wait`).
- `NODMIX_DEBUG_MODEL_PAYLOAD=full-redacted`: a capped (16 KB), redacted JSON snapshot of the
  payload. Prompts and message text still appear, so use it only while debugging.
- `NODMIX_DEBUG_SSE=events` logs every server-sent event; `peek` only the first five.

Records go to the `nodmix.providers` logger at INFO level. API keys, `Authorization` and
`x-api-key` headers, and any field named like a key, token, secret or password are replaced
by `[redacted]` in everything logged here.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeAlias

import msgspec

logger = logging.getLogger("nodmix.providers")

PayloadMode: TypeAlias = Literal["off", "tools", "full-redacted"]
SSEMode: TypeAlias = Literal["off", "events", "peek"]

REDACTED = "[redacted]"
_TRUTHY = frozenset({"1", "true", "yes", "on"})
_SECRET_SUFFIXES = (
    "apikey",
    "secret",
    "password",
    "passwd",
    "token",
    "authorization",
    "cookie",
    "credential",
    "credentials",
    "key",
)
_SECRET_VALUE = r"\b(?:sk|rk|pk)-[A-Za-z0-9_\-]{8,}|\bBearer\s+[^\s\"']+"
_SECRET_QUERY = re.compile(r"([?&](?:key|api[_-]?key|token|access_token|secret)=)[^&#]*", re.I)
_SSE_DATA_CAP = 2048


def is_secret_key(name: str) -> bool:
    """Whether a field or header name is secret-like (`apiKey`, `x-api-key`, `token`, ...).

    Plural `tokens` (as in `max_tokens`) is a count, not a credential, and is not matched.
    """
    squashed = re.sub(r"[^a-z0-9]", "", name.lower())
    return squashed.endswith(_SECRET_SUFFIXES)


def redact(value: Any, *, secrets: Sequence[str] = ()) -> Any:
    """A deep copy of JSON-like `value` with secret-named fields and secret strings masked.

    Args:
        value: Dicts, lists and scalars (a vendor payload, headers, an SSE event).
        secrets: Literal strings (the API key, header values) to mask wherever they appear.
    """
    if isinstance(value, Mapping):
        return {
            k: REDACTED if is_secret_key(str(k)) else redact(v, secrets=secrets)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact(v, secrets=secrets) for v in value]
    if isinstance(value, str):
        return redact_text(value, secrets=secrets)
    return value


def redact_text(text: str, *, secrets: Sequence[str] = ()) -> str:
    """Mask known secrets, `sk-...`-style keys, bearer tokens and key-like URL parameters."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, REDACTED)
    text = re.sub(_SECRET_VALUE, REDACTED, text)
    return _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, text)


def display_url(url: str) -> str:
    """`url` fit for an error message or a log line: no `user:password@`, and key-like query
    parameters masked (a base URL may carry credentials; errors reach chats and logs)."""
    scheme, sep, rest = url.partition("://")
    if sep:
        authority, slash, path = rest.partition("/")
        if "@" in authority:
            authority = REDACTED + "@" + authority.rpartition("@")[2]
        url = f"{scheme}{sep}{authority}{slash}{path}"
    return _SECRET_QUERY.sub(lambda m: m.group(1) + REDACTED, url)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [truncated, {len(text)} chars total]"


class DebugSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Which kinds of model traffic to log. The default logs nothing."""

    transport: bool = False
    payload: PayloadMode = "off"
    sse: SSEMode = "off"
    payload_cap: int = 16 * 1024
    """Characters of the `full-redacted` payload snapshot to keep."""
    sse_peek: int = 5
    """Events logged per response in `peek` mode."""

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> DebugSettings:
        """Read the `NODMIX_DEBUG_*` variables; unknown values count as off."""
        transport = env.get("NODMIX_DEBUG_MODEL_TRANSPORT", "").strip().lower() in _TRUTHY
        raw_payload = env.get("NODMIX_DEBUG_MODEL_PAYLOAD", "").strip().lower()
        payload: PayloadMode = "off"
        if raw_payload in ("full-redacted", "full"):
            payload = "full-redacted"
        elif raw_payload == "tools" or raw_payload in _TRUTHY:
            payload = "tools"
        raw_sse = env.get("NODMIX_DEBUG_SSE", "").strip().lower()
        sse: SSEMode = "off"
        if raw_sse == "peek":
            sse = "peek"
        elif raw_sse == "events" or raw_sse in _TRUTHY:
            sse = "events"
        return cls(transport=transport, payload=payload, sse=sse)

    @property
    def enabled(self) -> bool:
        """Whether anything at all is logged."""
        return self.transport or self.payload != "off" or self.sse != "off"

    def request_log(self, *, provider: str, secrets: Sequence[str] = ()) -> RequestLog:
        """A logger for one request, masking `secrets` in everything it writes."""
        return RequestLog(self, provider=provider, secrets=tuple(s for s in secrets if s))


class RequestLog:
    """Debug logging for one model request. Every method is a no-op unless enabled."""

    def __init__(self, settings: DebugSettings, *, provider: str, secrets: Sequence[str]) -> None:
        self._settings = settings
        self._provider = provider
        self._secrets = secrets
        self._sse_count = 0

    def payload(self, payload: Mapping[str, Any], tool_names: Sequence[str]) -> None:
        """Log the final vendor payload according to the payload mode."""
        mode = self._settings.payload
        if mode == "tools":
            names = ",".join(tool_names) or "none"
            logger.info("%s payload tools: %s", self._provider, names)
        elif mode == "full-redacted":
            snapshot = json.dumps(redact(payload, secrets=self._secrets), ensure_ascii=False)
            logger.info(
                "%s payload: %s", self._provider, _cap(snapshot, self._settings.payload_cap)
            )

    def response(self, method: str, url: str, status: int, elapsed_s: float) -> None:
        """Log the response status once headers arrived (time to first byte)."""
        if self._settings.transport:
            logger.info(
                "%s %s %s -> %d in %.0f ms",
                self._provider,
                method,
                redact_text(url, secrets=self._secrets),
                status,
                elapsed_s * 1000,
            )

    def failure(self, method: str, url: str, error: str, elapsed_s: float) -> None:
        """Log a request that failed without a response (timeout, refused connection)."""
        if self._settings.transport:
            logger.info(
                "%s %s %s failed after %.0f ms: %s",
                self._provider,
                method,
                redact_text(url, secrets=self._secrets),
                elapsed_s * 1000,
                redact_text(error, secrets=self._secrets),
            )

    def finished(self, elapsed_s: float) -> None:
        """Log the end of a streamed response."""
        if self._settings.transport:
            logger.info(
                "%s stream finished in %.0f ms (%d events)",
                self._provider,
                elapsed_s * 1000,
                self._sse_count,
            )

    def sse(self, event: str, data: str) -> None:
        """Log one server-sent event (all of them, or the first few in peek mode)."""
        self._sse_count += 1
        mode = self._settings.sse
        if mode == "off" or (mode == "peek" and self._sse_count > self._settings.sse_peek):
            return
        try:
            shown = json.dumps(redact(json.loads(data), secrets=self._secrets), ensure_ascii=False)
        except ValueError:
            shown = redact_text(data, secrets=self._secrets)
        logger.info(
            "%s sse #%d %s: %s", self._provider, self._sse_count, event, _cap(shown, _SSE_DATA_CAP)
        )
