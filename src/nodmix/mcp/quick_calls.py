"""Quick `tools/call` requests: sent by any thread straight into a stdio server's stdin.

Code mode's awaited MCP calls come from sandbox workers. Through the session, each would cost
two crossings of the event loop (the worker asks the loop to send; the loop hands the answer
back) and the SDK's request machinery on the loop, about a millisecond of CPU per call. A
`SideDoor` lets the calling thread write the request itself; the event loop, which reads the
server's stdout anyway (`mcp.pipes`), routes the answer by its id straight to the waiting
thread, and nothing else of the session is involved.

The request is the one the session would send: the same `tools/call` shape, and the `_meta`
of the session's own latest request (protocol version, client info and capabilities, as the
negotiated protocol requires). Ids are strings (`nodmix-quick-<n>`), never an id of the
session's, which counts integers. Everything else the server sends (notifications, its own
requests during a call, answers to the session) goes to the session unchanged and in order.

A request whose answer takes longer than the caller wants to wait is `park`ed: the event loop
then adopts it (`adopt`) and awaits the same answer, so a request is sent once whatever path
finishes it. A parked request nobody adopts within its timeout is cancelled on the server.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import mcp_types as types
from jsonschema import exceptions as schema_errors
from jsonschema import validators
from mcp.shared.exceptions import MCPError as SDKError
from pydantic import ValidationError

from nodmix.mcp.failures import describe_error
from nodmix.mcp.results import error_result, tool_result
from nodmix.tools.base import ToolResult

#: Most requests in flight through one door; past this, calls go through the session.
MAX_IN_FLIGHT: Final = 256
#: Most parked requests per server; the oldest is cancelled when another would exceed it.
MAX_PARKED: Final = 256
ID_PREFIX: Final = "nodmix-quick-"
CANCELLED: Final = "cancelled"
"""`QuickRequest.failure` of a request its caller cancelled."""
_MARKER: Final = b'"nodmix-quick-'

Writer = Callable[[bytes], bool]
"""Writes one whole line to the server's stdin now (any thread); False when it cannot (the
pipe is closed, or earlier output is still queued), having written nothing."""


class QuickRequest:
    """One `tools/call` sent through a `SideDoor`, and its answer when it comes."""

    __slots__ = (
        "answer",
        "arguments",
        "deadline",
        "done",
        "failure",
        "future",
        "id",
        "on_settle",
        "sent_at",
        "settled_at",
        "tool",
    )

    def __init__(
        self, request_id: str, tool: str, arguments: dict[str, Any], deadline: float
    ) -> None:
        self.id = request_id
        self.tool = tool
        self.arguments = arguments
        self.deadline = deadline
        """`time.monotonic()` after which the server is considered not to answer."""
        self.done = threading.Event()
        self.answer: dict[str, Any] | None = None
        """The JSON-RPC response (with `result` or `error`)."""
        self.failure: str | None = None
        """Why no answer will come (the connection closed), when it will not."""
        self.future: asyncio.Future[None] | None = None
        """Set while the event loop awaits the answer (`SideDoor.adopt`)."""
        self.on_settle: Callable[[], None] | None = None
        """Called (on the thread that settles it) once the request is settled."""
        self.sent_at = time.perf_counter()
        self.settled_at: float | None = None
        """`time.perf_counter()` when the answer was read (the server's time is the span)."""

    def settle(self, answer: dict[str, Any] | None, failure: str | None = None) -> None:
        """Record the answer or the failure and wake whoever waits (on the event loop)."""
        if self.done.is_set():
            return
        self.answer, self.failure = answer, failure
        self.settled_at = time.perf_counter()
        self.done.set()
        future = self.future
        if future is not None and not future.done():
            future.set_result(None)
        if self.on_settle is not None:
            self.on_settle()


class SideDoor:
    """The quick request path of one stdio server session (see the module docstring).

    `attach` is called by the transport once its pipes are open; until then (and for servers
    on other transports) `send` declines, and calls go through the session.
    """

    def __init__(self, timeout: float) -> None:
        """`timeout`: seconds a request may take, as for requests through the session."""
        self.timeout = timeout
        self._write: Writer | None = None
        self._write_late: Writer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._meta: dict[str, Any] | None = None
        self._seen_request = False
        self._lock = threading.Lock()
        self._waiting: dict[str, QuickRequest] = {}
        self._ids = itertools.count(1)
        self._closed = False
        self.fault: str | None = None
        """Why the transport ended the connection itself (the server broke the protocol)."""

    # ---- transport side (the event loop) ---------------------------------------------------

    def attach(
        self, write: Writer, loop: asyncio.AbstractEventLoop, *, write_late: Writer | None = None
    ) -> None:
        """The server's stdin is open: requests may be sent through `write`; `write_late`
        (any thread) queues what the pipe cannot take now, for messages that must not be
        dropped (cancellations), defaulting to `write`."""
        self._write, self._loop = write, loop
        self._write_late = write_late or write

    def note_request(self, message: types.JSONRPCMessage) -> None:
        """Remember the `_meta` of a request the session sends, to send the same."""
        if isinstance(message, types.JSONRPCRequest):
            params = message.params
            meta = params.get("_meta") if isinstance(params, dict) else None
            # (a progress token names one request of the session's; it is not carried over)
            self._meta = (
                {k: v for k, v in meta.items() if k != "progressToken"}
                if isinstance(meta, dict)
                else None
            )
            self._seen_request = True

    def claims(self, line: bytes) -> bool:
        """Whether `line` answers a request of this door; if so it is delivered."""
        if not self._waiting or _MARKER not in line:
            return False
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):  # (nested deeper than the parser goes)
            return False
        if not isinstance(message, dict) or not ("result" in message or "error" in message):
            return False
        with self._lock:
            request = self._waiting.pop(str(message.get("id")), None)
        if request is None:
            return False
        request.settle(message)
        return True

    def close(self, reason: str) -> None:
        """The connection ended: every waiting request fails with `reason`."""
        with self._lock:
            self._closed = True
            waiting, self._waiting = list(self._waiting.values()), {}
        for request in waiting:
            request.settle(None, reason)

    # ---- callers (any thread) --------------------------------------------------------------

    @property
    def usable(self) -> bool:
        """Whether a request can be sent now."""
        return self._write is not None and self._seen_request and not self._closed

    def send(self, tool: str, arguments: Mapping[str, Any]) -> QuickRequest | None:
        """Send `tools/call` for `tool`; None (nothing sent) when this door cannot now."""
        write = self._write
        if write is None or not self._seen_request:
            return None
        request_id = f"{ID_PREFIX}{next(self._ids)}"
        params: dict[str, Any] = {"name": tool, "arguments": dict(arguments)}
        if self._meta is not None:
            params["_meta"] = self._meta
        try:
            line = json.dumps(
                {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params},
                ensure_ascii=False,
                separators=(",", ":"),
            )
        except (TypeError, ValueError):  # not JSON: the session's path reports it
            return None
        request = QuickRequest(
            request_id, tool, params["arguments"], time.monotonic() + self.timeout
        )
        with self._lock:
            if self._closed or len(self._waiting) >= MAX_IN_FLIGHT:
                return None
            self._waiting[request_id] = request
        if not write((line + "\n").encode("utf-8", "surrogatepass")):
            with self._lock:
                self._waiting.pop(request_id, None)
            return None
        return request

    def cancel(self, request: QuickRequest, reason: str) -> None:
        """Stop waiting for `request` and tell the server (`notifications/cancelled`)."""
        with self._lock:
            pending = self._waiting.pop(request.id, None) is not None
        write = self._write_late
        if not pending or write is None:
            return
        note = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request.id, "reason": reason},
        }
        # (queued behind the session's pending output rather than dropped: the server must
        # learn that nobody waits for this request any more)
        write((json.dumps(note, separators=(",", ":")) + "\n").encode())

    async def adopt(self, request: QuickRequest) -> bool:
        """Await `request`'s answer on the event loop; False when it did not come in time
        (the request is then cancelled). Cancelling the awaiting task cancels the request."""
        if request.done.is_set():
            return True
        loop = asyncio.get_running_loop()
        request.future = future = loop.create_future()
        if request.done.is_set():  # settled on another thread meanwhile
            return True
        try:
            await asyncio.wait_for(future, max(0.0, request.deadline - time.monotonic()))
        except TimeoutError:
            self.cancel(request, "timed out")
            return request.done.is_set()
        except asyncio.CancelledError:
            self.cancel(request, "cancelled")
            raise
        return True


class Parking:
    """Quick requests whose callers stopped waiting, kept for the event loop to adopt.

    Keys name the call (`(run id, call id)`) with its tool and arguments (call ids come from
    the model, which may repeat one: two calls never take each other's answer). It outlives
    the session the request went out on, so a call whose server died meanwhile still finds
    its failure here and is never sent a second time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parked: dict[tuple[str, ...], tuple[QuickRequest, SideDoor]] = {}

    def park(self, key: tuple[str, ...], request: QuickRequest, door: SideDoor) -> None:
        """Keep `request` for `take(key, …)`; requests left past their timeout are cancelled
        (and one parked under the same key, tool and arguments)."""
        now = time.monotonic()
        stale: list[tuple[QuickRequest, SideDoor]] = []
        full = _full_key(key, request.tool, request.arguments)
        with self._lock:
            expired = [k for k, (old, _) in self._parked.items() if old.deadline < now]
            stale.extend(self._parked.pop(k) for k in expired)
            while len(self._parked) >= MAX_PARKED:
                stale.append(self._parked.pop(next(iter(self._parked))))
            if full in self._parked:
                stale.append(self._parked.pop(full))
            self._parked[full] = (request, door)
        for old, old_door in stale:
            old_door.cancel(old, "abandoned")

    def take(
        self, key: tuple[str, ...], tool: str, arguments: Mapping[str, Any]
    ) -> tuple[QuickRequest, SideDoor] | None:
        """The request parked for this call, if any (it is no longer kept)."""
        if not self._parked:
            return None
        try:
            full = _full_key(key, tool, arguments)
        except (TypeError, ValueError):  # not JSON: never sent, so never parked
            return None
        with self._lock:
            return self._parked.pop(full, None)

    def __len__(self) -> int:
        return len(self._parked)


def _full_key(key: tuple[str, ...], tool: str, arguments: Mapping[str, Any]) -> tuple[str, ...]:
    return (*key, tool, json.dumps(arguments, sort_keys=True, separators=(",", ":")))


def answer_result(
    server: str, tool: str, answer: dict[str, Any], output_schema: dict[str, Any] | None
) -> ToolResult | None:
    """The tool result of a quick request's answer, as the session's path would give it
    (the same conversion, output-schema check and error wording); None when the answer asks
    for what only the session does (re-listing a tool whose schema changed: the server ran
    nothing, and the call should go through the session)."""
    error = answer.get("error")
    if error is not None:
        try:
            failure = SDKError.from_error_data(types.ErrorData.model_validate(error))
        except ValidationError:
            failure = SDKError(types.INTERNAL_ERROR, "malformed error response")
        if failure.code == types.HEADER_MISMATCH:
            return None
        return error_result(
            f"MCP server {server!r} rejected tools/call {tool!r}: {describe_error(failure)}"
        )
    what = f"MCP server {server!r} tools/call {tool!r} failed"
    raw = answer.get("result")
    if not isinstance(raw, dict) or raw.get("resultType", "complete") != "complete":
        kind = raw.get("resultType") if isinstance(raw, dict) else type(raw).__name__
        return error_result(f"{what}: the server answered with a {kind!r} result")
    try:
        result = types.CallToolResult.model_validate(raw, by_name=False)
    except ValidationError as exc:
        return error_result(f"{what}: {describe_error(exc)}")
    if output_schema is not None and not result.is_error:
        problem = _output_problem(tool, result, output_schema)
        if problem is not None:
            return error_result(f"{what}: {describe_error(RuntimeError(problem))}")
    return tool_result(result)


def _output_problem(tool: str, result: types.CallToolResult, schema: dict[str, Any]) -> str | None:
    if result.structured_content is None and "structured_content" not in result.model_fields_set:
        return f"Tool {tool} has an output schema but did not return structured content"
    try:
        error = schema_errors.best_match(
            _validator(json.dumps(schema, sort_keys=True)).iter_errors(result.structured_content)
        )
    except Exception as exc:  # an unresolvable $ref, a broken schema
        return f"Invalid schema for tool {tool}: {exc}"
    if error is None:
        return None
    return f"Invalid structured content returned by tool {tool}: {error}"


@functools.lru_cache(maxsize=256)
def _validator(schema_json: str) -> Any:
    """A compiled validator per schema (compiling costs many times a validation)."""
    schema = json.loads(schema_json)
    cls = validators.validator_for(schema, default=validators.Draft202012Validator)
    return cls(schema)
