"""A scripted signal-cli daemon in multi-account mode: JSON-RPC over HTTP (`POST /api/v1/rpc`,
the `GET /api/v1/events` server-sent event stream with ids and `Last-Event-ID` replay,
`GET /api/v1/check`) and over a UNIX socket (one JSON object per line, `receive`
notifications pushed to every connection), as `signal-cli daemon --http --socket` serves them.

Account-scoped methods need the `account` param, as in signal-cli's multi-account mode:
`version`, `listAccounts`, `listContacts`, `send` (text, data-URI attachments, `voiceNote`,
`editTimestamp`), `sendTyping`, `sendReceipt` and `getAttachment`. `inject_text()` /
`inject_attachment()` deliver messages from a sender to the account; `drop()` ends every
event stream and socket connection (the daemon restarting), `pause()` refuses new ones until
`resume()`::

    with ScriptedSignalDaemon(socket_path=tmp / "signal.sock") as daemon:
        daemon.inject_text(ANN, "hello")
        daemon.wait_for(lambda: daemon.sent_texts(ANN))
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream
from anyio.streams.memory import MemoryObjectSendStream
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from nodmix.testing import signal_payloads as payloads
from nodmix.testing.http_thread import ThreadedServer
from nodmix.testing.polling import poll_until

T = TypeVar("T")
KEPT_EVENTS = 1000
ACCOUNT_UUID = "7f3c2a10-5b6e-4d8f-9a1b-2c3d4e5f6a7b"


class ScriptedSignalDaemon(ThreadedServer):
    """signal-cli's daemon for one account. Thread-safe for test code."""

    def __init__(
        self,
        *,
        account: str = "+15550100000",
        socket_path: Path | None = None,
        keepalive_seconds: float = 15.0,
        version: str = "0.14.1",
    ) -> None:
        super().__init__()
        self.account = account
        self.account_uuid = ACCOUNT_UUID
        self.socket_path = socket_path
        self.keepalive_seconds = keepalive_seconds
        self.version = version
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.sent: list[payloads.Sent] = []
        self.typing: list[tuple[str, str]] = []
        """`(recipient, action)` of each `sendTyping`."""
        self.receipts: list[tuple[str, list[int], str]] = []
        self.connections = 0
        """Event streams and socket connections opened so far."""
        self.attachments: dict[str, tuple[bytes, str]] = {}
        self._events: deque[tuple[int, dict[str, Any]]] = deque(maxlen=KEPT_EVENTS)
        self._subscribers: list[MemoryObjectSendStream[tuple[int, dict[str, Any]]]] = []
        self._event_ids = itertools.count(1)
        self._stamps = itertools.count(payloads.now_ms())
        self._paused = False
        self._drop: anyio.Event | None = None
        self._lock = threading.Lock()

    # ---- test API -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The `httpUrl` to configure."""
        return f"http://{self.host}:{self.port}"

    def config(self, *, socket: bool = False, **extra: Any) -> dict[str, Any]:
        """A `channels.signal` section for this daemon (its HTTP endpoint, or the socket)."""
        where = {"socketPath": str(self.socket_path)} if socket else {"httpUrl": self.url}
        return {"account": self.account, **where, **extra}

    def inject(self, params: dict[str, Any]) -> None:
        """Deliver a `receive` notification to every listener (and keep it for replay)."""
        self._call_soon(lambda: self._publish(params))

    def inject_text(
        self,
        sender: str,
        text: str,
        *,
        number: str | None = None,
        name: str = "Ann",
        group_id: str | None = None,
        mention: bool = False,
        quote_own: int | None = None,
    ) -> int:
        """A message from `sender` (an ACI); `mention` starts it with a mention of the
        account, `quote_own` quotes one of the account's messages. Its timestamp."""
        stamp = next(self._stamps)
        mentions = None
        if mention:
            text = f"{payloads.PLACEHOLDER} {text}"
            mentions = [payloads.mention_of(self.account, self.account_uuid)]
        quote = None
        if quote_own is not None:
            quote = {
                "id": quote_own,
                "authorNumber": self.account,
                "authorUuid": self.account_uuid,
                "text": "an earlier reply",
            }
        data = payloads.data_message(
            text, timestamp=stamp, group_id=group_id, mentions=mentions, quote=quote
        )
        self.inject(self._envelope(sender, number, name, stamp, data))
        return stamp

    def inject_attachment(
        self,
        sender: str,
        data: bytes,
        content_type: str,
        *,
        name: str | None = None,
        text: str | None = None,
    ) -> int:
        """A message from `sender` carrying one file (a voice note: audio without a name)."""
        stamp = next(self._stamps)
        ext = content_type.split("/")[-1].split(";")[0]
        attachment_id = f"{base64.urlsafe_b64encode(stamp.to_bytes(8, 'big')).decode()[:11]}.{ext}"
        with self._lock:
            self.attachments[attachment_id] = (data, content_type)
        item = payloads.attachment(attachment_id, content_type, len(data), name)
        message = payloads.data_message(text, timestamp=stamp, attachments=[item])
        self.inject(self._envelope(sender, None, "Ann", stamp, message))
        return stamp

    def drop(self) -> None:
        """End every event stream and socket connection (a restart of the daemon)."""
        self._call_soon(self._drop_all)

    def pause(self) -> None:
        """Refuse connections and calls (503 / closed sockets) until `resume()`."""
        with self._lock:
            self._paused = True
        self.drop()

    def resume(self) -> None:
        with self._lock:
            self._paused = False

    def sent_texts(self, to: str | None = None) -> list[str]:
        """Texts sent (not edits), oldest first."""
        with self._lock:
            return [s.text for s in self.sent if s.edit_of is None and to in (None, s.to)]

    def calls_of(self, method: str) -> list[dict[str, Any]]:
        with self._lock:
            return [params for name, params in self.calls if name == method]

    def wait_for(self, check: Callable[[], T], *, timeout: float = 15.0) -> T:
        """Poll `check()` until it returns something truthy (raises after `timeout`)."""
        return poll_until(check, timeout, self._recent)

    def _recent(self) -> str:
        with self._lock:
            return f"calls: {[name for name, _ in self.calls[-10:]]}"

    # ---- events ---------------------------------------------------------------------------

    def _envelope(
        self, sender: str, number: str | None, name: str, stamp: int, data: dict[str, Any]
    ) -> dict[str, Any]:
        return payloads.envelope(
            account=self.account,
            sender_uuid=sender,
            sender_number=number,
            name=name,
            timestamp=stamp,
            data=data,
        )

    def _publish(self, params: dict[str, Any]) -> None:
        event = (next(self._event_ids), params)
        self._events.append(event)
        for subscriber in list(self._subscribers):
            try:
                subscriber.send_nowait(event)
            except (anyio.WouldBlock, anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass

    def _drop_all(self) -> None:
        for subscriber in self._subscribers:
            subscriber.close()
        self._subscribers.clear()
        if self._drop is not None:
            self._drop.set()
        self._drop = anyio.Event()

    @contextlib.contextmanager
    def _subscription(self, after: int | None) -> Any:
        send, receive = anyio.create_memory_object_stream[tuple[int, dict[str, Any]]](10_000)
        if after is not None:
            for event in self._events:
                if event[0] > after:
                    send.send_nowait(event)
        self._subscribers.append(send)
        with self._lock:
            self.connections += 1
        try:
            yield receive
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
            send.close()
            receive.close()

    # ---- JSON-RPC -------------------------------------------------------------------------

    def _answer(self, request: Any) -> dict[str, Any]:
        request_id = request.get("id") if isinstance(request, dict) else None
        try:
            if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                raise payloads.RpcRefused(-32600, "method field must be set")
            params = request.get("params") or {}
            result = self._dispatch(request["method"], dict(params))
        except payloads.RpcRefused as exc:
            error = {"code": exc.code, "message": str(exc), "data": None}
            return {"jsonrpc": "2.0", "error": error, "id": request_id}
        return {"jsonrpc": "2.0", "result": result, "id": request_id}

    def _dispatch(self, method: str, params: dict[str, Any]) -> Any:
        with self._lock:
            self.calls.append((method, params))
        if method in payloads.SCOPED and params.get("account") != self.account:
            raise payloads.RpcRefused(-32602, "Method requires valid account parameter")
        if method == "version":
            return {"version": self.version}
        if method == "listAccounts":
            return [{"number": self.account}]
        if method == "listContacts":
            return [{"number": self.account, "uuid": self.account_uuid, "username": None}]
        if method == "send":
            return self._send(params)
        if method == "sendTyping":
            action = "STOP" if params.get("stop") else "START"
            with self._lock:
                self.typing.append((payloads.target(params), action))
            return {"timestamp": next(self._stamps), "results": []}
        if method == "sendReceipt":
            stamps = params.get("targetTimestamp")
            stamps = stamps if isinstance(stamps, list) else [stamps]
            with self._lock:
                self.receipts.append(
                    (payloads.target(params), stamps, str(params.get("type", "read")))
                )
            return {"timestamp": next(self._stamps), "results": []}
        if method == "getAttachment":
            with self._lock:
                stored = self.attachments.get(str(params.get("id")))
            if stored is None:
                raise payloads.RpcRefused(-1, "Attachment file not found")
            return {"data": base64.b64encode(stored[0]).decode("ascii")}
        raise payloads.RpcRefused(-32601, "Method not implemented")

    def _send(self, params: dict[str, Any]) -> dict[str, Any]:
        sent = payloads.decode_send(params, next(self._stamps))
        with self._lock:
            self.sent.append(sent)
        recipient = (None, sent.to) if "groupId" not in params else (None, "member")
        return payloads.send_result(sent.timestamp, [recipient])

    # ---- HTTP -----------------------------------------------------------------------------

    def build_app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/api/v1/rpc", self._rpc, methods=["POST"]),
                Route("/api/v1/events", self._events_stream, methods=["GET"]),
                Route("/api/v1/check", self._check, methods=["GET"]),
            ]
        )

    def _refusing(self) -> bool:
        with self._lock:
            return self._paused

    async def _check(self, request: Request) -> Response:
        return PlainTextResponse("", status_code=503 if self._refusing() else 200)

    async def _rpc(self, request: Request) -> Response:
        if self._refusing():
            return PlainTextResponse("unavailable", status_code=503)
        try:
            body = json.loads(await request.body())
        except ValueError:
            error = {"code": -32700, "message": "Parse error", "data": None}
            return JSONResponse({"jsonrpc": "2.0", "error": error, "id": None})
        if isinstance(body, dict) and "id" not in body:
            self._answer(body)
            return Response(status_code=201)
        return JSONResponse(self._answer(body))

    async def _events_stream(self, request: Request) -> Response:
        if self._refusing():
            return PlainTextResponse("unavailable", status_code=503)
        last = request.headers.get("last-event-id")
        after = int(last) if last and last.isdigit() else None
        return StreamingResponse(self._sse(after), media_type="text/event-stream")

    async def _sse(self, after: int | None) -> AsyncIterator[bytes]:
        with self._subscription(after) as events:
            while True:
                with anyio.move_on_after(self.keepalive_seconds):
                    try:
                        event_id, params = await events.receive()
                    except (anyio.EndOfStream, anyio.ClosedResourceError):
                        return
                    data = json.dumps(params)
                    yield f"id:{event_id}\nevent:receive\ndata:{data}\n\n".encode()
                    continue
                yield b":\n\n"

    # ---- UNIX socket ----------------------------------------------------------------------

    def _before_stop(self) -> None:
        with self._lock:
            self._paused = True
        self._drop_all()

    async def _serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        self._drop = anyio.Event()
        if self.socket_path is None:
            await super()._serve(task_status=task_status)
            return
        listener = await anyio.create_unix_listener(self.socket_path)
        async with listener, anyio.create_task_group() as group:
            group.start_soon(listener.serve, self._socket_client)
            await super()._serve(task_status=task_status)
            group.cancel_scope.cancel()

    async def _socket_client(self, stream: ByteStream) -> None:
        if self._refusing() or self._drop is None:
            await stream.aclose()
            return
        dropped = self._drop
        write = anyio.Lock()

        async def send(message: dict[str, Any]) -> None:
            async with write:
                await stream.send(json.dumps(message).encode() + b"\n")

        async def push(events: Any) -> None:
            async for _, params in events:
                await send({"jsonrpc": "2.0", "method": "receive", "params": params})

        async def serve_requests() -> None:
            reader = BufferedByteReceiveStream(stream)
            while True:
                line = await reader.receive_until(b"\n", 8 * 1024 * 1024)
                try:
                    request = json.loads(line)
                except ValueError:
                    await send(
                        {
                            "jsonrpc": "2.0",
                            "id": None,
                            "error": {"code": -32700, "message": "Parse error"},
                        }
                    )
                    continue
                answer = self._answer(request)
                if isinstance(request, dict) and "id" in request:
                    await send(answer)

        with self._subscription(None) as events, contextlib.suppress(Exception):
            async with stream, anyio.create_task_group() as group:
                group.start_soon(push, events)
                group.start_soon(serve_requests)
                await dropped.wait()
                group.cancel_scope.cancel()
