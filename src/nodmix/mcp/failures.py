"""Turning MCP, transport and OS failures into the one-line reasons users and models read."""

from __future__ import annotations

import os
from typing import TextIO

import anyio
import httpx2
from mcp.shared.exceptions import MCPError as SDKError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND

from nodmix.errors import NodmixError

_STDERR_TAIL_BYTES = 4096
_MESSAGE_CHARS = 300

# The streamable-HTTP client turns HTTP failures that carry no JSON-RPC error into stand-in
# errors; these (code, message) pairs are the only way to recognise them.
HTTP_404_NO_SESSION = (METHOD_NOT_FOUND, "Not Found")
"""404 before a session exists: the URL is not an MCP endpoint."""
HTTP_404_SESSION_GONE = (INVALID_REQUEST, "Session terminated")
"""404 for our session id: the server forgot the session and never handled the request."""
HTTP_ERROR = (INTERNAL_ERROR, "Server returned an error response")
"""Any other HTTP error status without a JSON-RPC body."""


def leaf_error(exc: BaseException) -> BaseException:
    """The first meaningful exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [e for e in exc.exceptions if not isinstance(e, anyio.get_cancelled_exc_class())]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def sdk_error_key(exc: SDKError) -> tuple[int, str]:
    """`(code, message)`, to compare with the HTTP stand-ins above."""
    return exc.code, exc.message


def describe_error(exc: BaseException) -> str:
    """One readable line for an exception raised by the SDK, a transport or the OS."""
    leaf = leaf_error(exc)
    if isinstance(leaf, SDKError):
        text = _sdk_error_text(leaf)
    elif isinstance(leaf, NodmixError):
        text = str(leaf)
    elif isinstance(leaf, httpx2.HTTPStatusError):
        text = f"HTTP {leaf.response.status_code} from {leaf.request.url}"
    elif isinstance(leaf, httpx2.ConnectError):
        text = f"cannot connect to {_request_url(leaf)}: {leaf}"
    elif isinstance(leaf, OSError) and leaf.strerror:
        text = leaf.strerror + (f": {leaf.filename}" if leaf.filename else "")
    else:
        detail = " ".join(str(leaf).split())
        text = f"{type(leaf).__name__}: {detail}" if detail else type(leaf).__name__
    return text if len(text) <= _MESSAGE_CHARS else text[: _MESSAGE_CHARS - 1] + "…"


def is_unreachable(exc: BaseException) -> bool:
    """Whether the transport never reached the server (so no request can have run)."""
    return isinstance(leaf_error(exc), httpx2.ConnectError)


def _sdk_error_text(exc: SDKError) -> str:
    key = sdk_error_key(exc)
    if exc.code == CONNECTION_CLOSED:
        return "the server closed the connection"
    if key == HTTP_404_NO_SESSION:
        return "HTTP 404 Not Found (is the URL the server's MCP endpoint?)"
    if key == HTTP_ERROR:
        return "the server answered with an HTTP error; the next request starts a new session"
    return exc.message


def _request_url(exc: httpx2.RequestError) -> str:
    try:
        return str(exc.request.url)
    except RuntimeError:  # httpx raises when the error carries no request
        return "the server"


def stderr_tail(errlog: TextIO | None) -> str | None:
    """The last non-empty stderr line of a stdio server.

    Read with `pread` because the child shares the file offset: seeking would make its later
    writes land in the middle of the file.
    """
    if errlog is None:
        return None
    try:
        fd = errlog.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, _STDERR_TAIL_BYTES, max(0, size - _STDERR_TAIL_BYTES))
    except (OSError, ValueError):
        return None
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    last = next((line for line in reversed(lines) if line), None)
    return last[:_MESSAGE_CHARS] if last else None
