"""Errors as clients see them: the OpenAI error shape and a status/code for each failure.

Every HTTP error body is `{"error": {"message", "type", "param", "code"}}`, the shape OpenAI
clients already parse, and WebSocket errors carry the same `code` and `message`. `classify`
decides once, for HTTP and WebSocket alike, what an exception raised by a turn means.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from starlette.responses import JSONResponse

from nodmix.errors import (
    ConfigError,
    NodmixError,
    PromptTooLargeError,
    ProviderAuthError,
    ProviderError,
    ProviderUnavailableError,
    ProviderUnreachableError,
    RateLimitedError,
    SessionError,
    StateUnavailableError,
    resource_exhaustion,
)
from nodmix.invocation import command

log = logging.getLogger("nodmix.gateway")

MODEL_HINT = (
    f"pick a model with `{command('config set agents.defaults.model.primary <provider/model>')}`"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class APIError(Exception):
    """A request the gateway refuses or could not serve, with what to tell the client."""

    status: int
    message: str
    kind: str = "invalid_request_error"
    """OpenAI's `type` (`invalid_request_error`, `authentication_error`, `api_error`, ...)."""
    code: str = "bad_request"
    """A stable machine-readable code, also used by the WebSocket protocol."""
    param: str | None = None

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict[str, Any]:
        """The OpenAI-shaped error body."""
        return error_body(self.message, kind=self.kind, code=self.code, param=self.param)

    def response(self) -> JSONResponse:
        """The error as an HTTP response."""
        return JSONResponse(self.body(), status_code=self.status)

    def wire(self) -> dict[str, Any]:
        """The error as a WebSocket `res` frame's `error` object."""
        return {"code": self.code, "message": self.message, "status": self.status}


class RunCancelled(Exception):
    """A run was aborted (by a client, a disconnect or shutdown) before it finished."""


def error_body(
    message: str, *, kind: str, code: str | None = None, param: str | None = None
) -> dict[str, Any]:
    """`{"error": {...}}` in OpenAI's shape."""
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def bad_request(message: str, *, param: str | None = None) -> APIError:
    """A 400 for a malformed or unsupported request."""
    return APIError(status=400, message=message, param=param)


def not_found(message: str, *, code: str = "not_found") -> APIError:
    """A 404 (unknown model, agent, tool or session)."""
    return APIError(status=404, message=message, code=code)


def classify(exc: BaseException) -> APIError:
    """What an exception from the runtime means for the client.

    Client mistakes (a bad session key) are 400s; the gateway's own misconfiguration is a 500
    that says what to fix; model failures are 502
    (the model answered wrongly or refused the credentials) or 503 (unreachable, overloaded,
    rate limited); anything unexpected is a 500 whose details stay in the gateway log.
    """
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, RunCancelled):
        return APIError(
            status=409, message="the turn was aborted", kind="api_error", code="aborted"
        )
    exhausted = resource_exhaustion(exc)
    if exhausted is not None:  # out of descriptors or disk: the client may retry later
        log.error("cannot serve a request: %s", exhausted)
        return APIError(status=503, message=exhausted, kind="api_error", code="resource_exhausted")
    message = str(exc) or type(exc).__name__
    if isinstance(exc, ProviderUnreachableError):
        message += f" ({MODEL_HINT})"
    if isinstance(exc, RateLimitedError | ProviderUnavailableError | ProviderUnreachableError):
        if "connection error" in message:
            message += f" (is the model server running? {MODEL_HINT})"
        return APIError(status=503, message=message, kind="api_error", code="model_unavailable")
    if isinstance(exc, ProviderAuthError):
        return APIError(status=502, message=message, kind="api_error", code="model_auth_failed")
    if isinstance(exc, ProviderError):
        return APIError(status=502, message=message, kind="api_error", code="model_error")
    if isinstance(exc, PromptTooLargeError):
        return APIError(
            status=400, message=message, code="context_length_exceeded", param="messages"
        )
    if isinstance(exc, StateUnavailableError):  # the shared database: retry later
        return APIError(status=503, message=message, kind="api_error", code="state_unavailable")
    if isinstance(exc, SessionError):
        return APIError(status=400, message=message, code="bad_session")
    if isinstance(exc, ConfigError):
        # The client cannot fix the gateway's config (an unknown model in it, a bad plugin).
        return APIError(status=500, message=message, kind="api_error", code="config_error")
    if isinstance(exc, NodmixError):
        return APIError(status=500, message=message, kind="api_error", code=_snake(exc))
    log.error("unexpected error serving a request", exc_info=exc)
    return APIError(
        status=500,
        message=f"internal error ({type(exc).__name__}); see the gateway log",
        kind="api_error",
        code="internal_error",
    )


def _snake(exc: BaseException) -> str:
    name = type(exc).__name__.removesuffix("Error") or "Nodmix"
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_") + "_error"
