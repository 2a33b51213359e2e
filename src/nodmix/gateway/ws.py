"""The WebSocket endpoint `/ws`: JSON request/response frames plus a stream of run events.

Frames (full protocol in docs/gateway.md):

- client -> gateway: `{"type": "req", "id": "7", "method": "sessions.list", "params": {...}}`
- gateway -> client: `{"type": "res", "id": "7", "ok": true, "payload": {...}}` or
  `{"type": "res", "id": "7", "ok": false, "error": {"code", "message", "status"}}`
- gateway -> client: `{"type": "event", "event": "agent", "payload": {"reqId", "runId",
  "seq", "kind", ...}}` while a run started by request `reqId` is going.

Requests are handled concurrently (a `sessions.list` is not stuck behind a running `agent`),
and every frame a connection sends goes through one writer task, so frames never interleave.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import anyio
from anyio.abc import TaskGroup
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from nodmix.gateway.auth import WS_PROTOCOL
from nodmix.gateway.errors import APIError, bad_request, classify
from nodmix.gateway.state import Gateway, gateway_of

Method = Callable[["Connection", str | int, dict[str, Any]], Awaitable[Any]]
"""A WebSocket method: (connection, request id, params) -> the response's payload."""

MAX_BUFFERED_FRAMES = 100_000
"""Frames queued for a client that reads too slowly before the gateway hangs up on it."""


class Connection:
    """One client connection: reads requests, dispatches them, writes frames in order."""

    def __init__(
        self, websocket: WebSocket, gateway: Gateway, methods: Mapping[str, Method]
    ) -> None:
        """Serve `websocket` (already accepted) for `gateway`, answering `methods`."""
        self.websocket = websocket
        self.gateway = gateway
        self._methods = methods
        self._send, self._outbox = anyio.create_memory_object_stream[str](math.inf)
        self._group: TaskGroup | None = None
        self._closed = False
        self.overflowed = False
        """True when the client read too slowly and the gateway gave up on it."""

    def send(self, frame: dict[str, Any]) -> None:
        """Queue a frame; dropped once the connection is gone (runs may outlive it)."""
        if self._closed:
            return
        if self._send.statistics().current_buffer_used >= MAX_BUFFERED_FRAMES:
            self.overflowed = True
            self._close()  # the writer drains what is queued, then the connection ends
            return
        try:
            self._send.send_nowait(json.dumps(frame, ensure_ascii=False, separators=(",", ":")))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._closed = True

    def _close(self) -> None:
        self._closed = True
        self._send.close()

    def event(self, event: str, payload: dict[str, Any]) -> None:
        """Queue an event frame."""
        self.send({"type": "event", "event": event, "payload": payload})

    async def serve(self) -> None:
        """Read frames until the client disconnects."""
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._write)
            try:
                await self._read(group)
            finally:
                self._close()
                group.cancel_scope.cancel()

    async def _read(self, group: TaskGroup) -> None:
        while True:
            message = await self.websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            if text is None:
                self.send(_error_frame(None, bad_request("frames must be JSON text")))
                continue
            self._dispatch(group, text)

    async def _write(self) -> None:
        try:
            async with self._outbox:
                async for text in self._outbox:
                    await self.websocket.send_text(text)
        except (WebSocketDisconnect, OSError, RuntimeError):
            pass  # the client is gone; the reader sees the disconnect
        if self._group is not None:
            self._group.cancel_scope.cancel()

    def _dispatch(self, group: TaskGroup, text: str) -> None:
        try:
            frame = json.loads(text)
        except (ValueError, RecursionError):
            self.send(_error_frame(None, bad_request("frame is not valid JSON")))
            return
        req_id = frame.get("id") if isinstance(frame, dict) else None
        if not isinstance(frame, dict) or frame.get("type") != "req":
            self.send(_error_frame(req_id, bad_request("expected {type: 'req', id, method}")))
            return
        if not isinstance(req_id, str | int) or isinstance(req_id, bool):
            self.send(_error_frame(None, bad_request("a request needs a string or number id")))
            return
        params = frame.get("params") or {}
        method = self._methods.get(str(frame.get("method")))
        if method is None or not isinstance(params, dict):
            problem = (
                bad_request("params must be an object")
                if method is not None
                else APIError(
                    status=404,
                    message=f"unknown method {frame.get('method')!r}",
                    code="unknown_method",
                )
            )
            self.send(_error_frame(req_id, problem))
            return
        group.start_soon(self._handle, req_id, method, params)

    async def _handle(self, req_id: str | int, method: Any, params: dict[str, Any]) -> None:
        try:
            payload = await method(self, req_id, params)
        except Exception as exc:
            self.send(_error_frame(req_id, classify(exc)))
            return
        self.send({"type": "res", "id": req_id, "ok": True, "payload": payload})


def _error_frame(req_id: Any, error: APIError) -> dict[str, Any]:
    return {"type": "res", "id": req_id, "ok": False, "error": error.wire()}


def websocket_endpoint(methods: Mapping[str, Method]) -> Callable[[WebSocket], Awaitable[None]]:
    """The `/ws` endpoint answering `methods` (`rpc.METHODS`)."""

    async def endpoint(websocket: WebSocket) -> None:
        """Accept the connection (selecting `nodmix.v1` when offered) and serve it."""
        offered = websocket.scope.get("subprotocols", [])
        await websocket.accept(subprotocol=WS_PROTOCOL if WS_PROTOCOL in offered else None)
        gateway = gateway_of(websocket)
        connection = Connection(websocket, gateway, methods)
        gateway.approvals.connections.add(connection)
        try:
            await connection.serve()
        finally:
            gateway.approvals.connections.discard(connection)
        if connection.overflowed and websocket.client_state == WebSocketState.CONNECTED:
            with contextlib.suppress(WebSocketDisconnect, OSError, RuntimeError):
                await websocket.close(code=1013, reason="client too slow")

    return endpoint
