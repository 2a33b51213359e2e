"""signal-cli's JSON-RPC, over its HTTP endpoint or its UNIX socket.

No well-kept async client exists for it (the one on PyPI is synchronous, HTTP-only and has no
event stream), and JSON-RPC 2.0 over these two transports is small, so Nodmix speaks it here
with the core's httpx2 (HTTP, and its server-sent events) and anyio (the socket):

- HTTP (`signal-cli daemon --http HOST:PORT`): every call is a `POST /api/v1/rpc`; incoming
  messages arrive on `GET /api/v1/events`, a server-sent event stream with a keep-alive
  comment every 15 seconds, so a stream silent for `STREAM_IDLE_SECONDS` is taken as lost.
- Socket (`signal-cli daemon --socket PATH`): one connection carries both, one JSON object
  per line; calls are matched to answers by id, `receive` notifications are the messages.
  The daemon sends nothing while idle, so an idle connection is probed with a `version`
  call every `PROBE_EVERY_SECONDS`; a probe without answer drops the connection.

Every call has a deadline, every line and event a size limit (`max_message_bytes`, which
leaves room for an attachment fetched with `getAttachment`), and a malformed line is skipped
with a warning; a line over the limit drops the connection (the reconnect starts clean).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
from collections import deque
from collections.abc import AsyncIterator
from typing import Any, Protocol

import anyio
import httpx2
from anyio.abc import ByteStream
from anyio.streams.buffered import BufferedByteReceiveStream

log = logging.getLogger("nodmix.channels.signal")

STREAM_IDLE_SECONDS = 45.0
"""The HTTP event stream sends a keep-alive every 15 s: three missed mean it is gone."""
PROBE_EVERY_SECONDS = 30.0
CONNECT_SECONDS = 10.0
EVENT_LIMIT = 1024 * 1024
"""The largest message notification accepted (attachments come as references)."""
INBOX_BYTES = 64 * 1024 * 1024


class RpcError(Exception):
    """The daemon answered a call with an error."""

    def __init__(self, code: int, message: str) -> None:
        self.code = code
        super().__init__(f"signal-cli error {code}: {message}")


class DaemonUnavailable(Exception):
    """The daemon cannot be reached, did not answer in time, or broke the protocol."""


class Transport(Protocol):
    """One way of talking to the daemon."""

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """The call's result.

        Raises:
            RpcError: the daemon refused the call.
            DaemonUnavailable: no answer (unreachable, timed out, malformed).
        """
        ...

    def listen(self) -> contextlib.AbstractAsyncContextManager[AsyncIterator[dict[str, Any]]]:
        """Connect to the event stream; iterating yields each `receive` notification's params
        and ends (or raises `DaemonUnavailable`) when the connection is lost."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def request(request_id: int, method: str, params: dict[str, Any] | None) -> dict[str, Any]:
    """A JSON-RPC 2.0 request object."""
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params:
        body["params"] = params
    return body


def result_of(answer: Any) -> Any:
    """The `result` of a response object.

    Raises:
        RpcError: it carries an `error`.
        DaemonUnavailable: it is not a JSON-RPC response.
    """
    if not isinstance(answer, dict):
        raise DaemonUnavailable("the daemon's answer is not a JSON-RPC response")
    error = answer.get("error")
    if isinstance(error, dict):
        code = error.get("code")
        raise RpcError(code if isinstance(code, int) else -1, str(error.get("message", ""))[:500])
    return answer.get("result")


def receive_params(message: Any) -> dict[str, Any] | None:
    """The params of a `receive` notification (automatic or subscribed), else None."""
    if not isinstance(message, dict) or message.get("method") != "receive":
        return None
    params = message.get("params")
    if isinstance(params, dict) and isinstance(params.get("result"), dict):
        params = params["result"]  # `subscribeReceive` wraps it
    return params if isinstance(params, dict) else None


class HttpTransport:
    """`POST /api/v1/rpc` and the `GET /api/v1/events` stream."""

    def __init__(self, base_url: str, *, timeout: float, max_message_bytes: int) -> None:
        self.base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._limit = max_message_bytes
        self._ids = itertools.count(1)
        self._client = httpx2.AsyncClient(timeout=httpx2.Timeout(timeout, connect=CONNECT_SECONDS))
        self.last_event_id = ""
        """The id of the last event read (the stream resumes after it; the adapter keeps it
        across restarts)."""

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        body = request(next(self._ids), method, params)
        try:
            with anyio.fail_after(self._timeout):
                async with self._client.stream(
                    "POST", f"{self.base_url}/api/v1/rpc", json=body
                ) as response:
                    if response.status_code == 201:
                        return None  # answered as a notification
                    if response.status_code != 200:
                        raise DaemonUnavailable(f"HTTP {response.status_code} from {method}")
                    raw = await _read_capped(response.aiter_bytes(), self._limit)
        except (httpx2.HTTPError, OSError) as exc:
            raise DaemonUnavailable(f"{method}: {type(exc).__name__}: {exc}") from exc
        except TimeoutError as exc:
            raise DaemonUnavailable(f"{method}: no answer within {self._timeout:g} s") from exc
        try:
            answer = json.loads(raw)
        except ValueError as exc:
            raise DaemonUnavailable(f"{method}: the answer is not JSON") from exc
        return result_of(answer)

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        timeout = httpx2.Timeout(STREAM_IDLE_SECONDS, connect=CONNECT_SECONDS)
        # After a drop, the daemon first sends what arrived since the last event seen.
        resume = {"Last-Event-ID": self.last_event_id} if self.last_event_id else None
        try:
            async with self._client.sse(
                f"{self.base_url}/api/v1/events",
                timeout=timeout,
                max_event_size=EVENT_LIMIT,
                headers=resume,
            ) as source:
                if source.response.status_code != 200:
                    raise DaemonUnavailable(f"HTTP {source.response.status_code} from /events")
                yield self._events(source)
        except (httpx2.HTTPError, OSError) as exc:
            raise DaemonUnavailable(f"event stream: {type(exc).__name__}: {exc}") from exc

    async def _events(self, source: httpx2.EventSource) -> AsyncIterator[dict[str, Any]]:
        async for event in source:
            if event.id:
                self.last_event_id = event.id
            if event.event != "receive" or not event.data:
                continue
            try:
                params = receive_params({"method": "receive", "params": json.loads(event.data)})
            except ValueError:
                log.warning("signal: skipped a malformed event from the daemon")
                continue
            if params is not None:
                yield params

    async def aclose(self) -> None:
        await self._client.aclose()


class SocketTransport:
    """JSON-RPC lines over the daemon's UNIX socket (one connection for calls and events)."""

    def __init__(self, path: str, *, timeout: float, max_message_bytes: int) -> None:
        self.path = path
        self._timeout = timeout
        self._limit = max_message_bytes
        self._ids = itertools.count(1)
        self._stream: ByteStream | None = None
        self._write_lock = anyio.Lock()
        self._waiting: dict[int, tuple[anyio.Event, list[Any]]] = {}
        self._connected = anyio.Event()
        self._traffic_at = 0.0
        self._inbox: _Inbox | None = None

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        with anyio.move_on_after(self._timeout):
            await self._connected.wait()
        stream = self._stream
        if stream is None:
            raise DaemonUnavailable(f"{method}: not connected to {self.path}")
        request_id = next(self._ids)
        done, box = anyio.Event(), list[Any]()
        self._waiting[request_id] = (done, box)
        line = json.dumps(request(request_id, method, params)).encode() + b"\n"
        try:
            with anyio.fail_after(self._timeout):
                async with self._write_lock:
                    await stream.send(line)
                await done.wait()
        except TimeoutError as exc:
            raise DaemonUnavailable(f"{method}: no answer within {self._timeout:g} s") from exc
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            raise DaemonUnavailable(f"{method}: the connection broke") from exc
        finally:
            self._waiting.pop(request_id, None)
        if not box:
            raise DaemonUnavailable(f"{method}: the connection closed before the answer")
        return result_of(box[0])

    @contextlib.asynccontextmanager
    async def listen(self) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        try:
            with anyio.fail_after(CONNECT_SECONDS):
                stream = await anyio.connect_unix(self.path)
        except (OSError, TimeoutError) as exc:
            raise DaemonUnavailable(f"cannot connect to {self.path}: {exc}") from exc
        inbox = self._inbox = _Inbox()
        try:
            async with anyio.create_task_group() as group:
                group.start_soon(self._read, stream, inbox)
                group.start_soon(self._probe, inbox)
                self._stream = stream
                self._traffic_at = anyio.current_time()
                self._connected.set()
                try:
                    yield inbox.drain()
                finally:
                    group.cancel_scope.cancel()
        except BaseExceptionGroup as failed:
            # The reader and the probe end quietly, so the one error is the consumer's own
            # (`DaemonUnavailable` from the inbox): raise it as it is, not wrapped.
            if len(failed.exceptions) == 1:
                raise failed.exceptions[0] from None
            raise
        finally:
            self._stream = None
            self._connected = anyio.Event()
            for done, _ in self._waiting.values():
                done.set()  # callers see an empty box: the connection is gone
            with anyio.CancelScope(shield=True):
                await stream.aclose()

    async def _read(self, stream: ByteStream, inbox: _Inbox) -> None:
        reader = BufferedByteReceiveStream(stream)
        try:
            while True:
                line = await reader.receive_until(b"\n", self._limit)
                self._traffic_at = anyio.current_time()
                self._dispatch(line, inbox)
        except anyio.IncompleteRead:
            inbox.fail(DaemonUnavailable("the daemon closed the connection"))
        except anyio.DelimiterNotFound:
            inbox.fail(DaemonUnavailable("the daemon sent a line over the size limit"))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            inbox.fail(DaemonUnavailable(f"the connection broke: {exc}"))
        for done, _ in self._waiting.values():
            done.set()

    def _dispatch(self, line: bytes, inbox: _Inbox) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.warning("signal: skipped a malformed line from the daemon")
            return
        if isinstance(message, dict) and "id" in message and "method" not in message:
            key = message["id"]
            waiting = self._waiting.get(key) if type(key) is int else None
            if waiting is not None:
                waiting[1].append(message)
                waiting[0].set()
            return
        params = receive_params(message)
        if params is not None:
            inbox.put(params, len(line))

    async def _probe(self, inbox: _Inbox) -> None:
        """Ask an idle daemon for its version; no answer in time ends the connection."""
        while True:
            await anyio.sleep(PROBE_EVERY_SECONDS / 3)
            if anyio.current_time() - self._traffic_at < PROBE_EVERY_SECONDS:
                continue
            try:
                await self.call("version")
            except (DaemonUnavailable, RpcError) as exc:
                inbox.fail(DaemonUnavailable(f"the daemon did not answer a probe: {exc}"))
                return

    async def aclose(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            await stream.aclose()


class _Inbox:
    """Notifications read from the socket, waiting for the adapter. Reading never waits for
    the adapter (a call the adapter makes while handling one message must get its answer),
    so the queue is bounded by bytes instead: past `INBOX_BYTES` the connection is given up."""

    def __init__(self) -> None:
        self._items: deque[tuple[dict[str, Any], int]] = deque()
        self._bytes = 0
        self._error: DaemonUnavailable | None = None
        self._changed = anyio.Event()

    def put(self, params: dict[str, Any], size: int) -> None:
        if self._bytes + size > INBOX_BYTES:
            self.fail(DaemonUnavailable("the channel fell too far behind the daemon"))
            return
        self._items.append((params, size))
        self._bytes += size
        self._changed.set()

    def fail(self, error: DaemonUnavailable) -> None:
        if self._error is None:
            self._error = error
        self._changed.set()

    async def drain(self) -> AsyncIterator[dict[str, Any]]:
        while True:
            while self._items:
                params, size = self._items.popleft()
                self._bytes -= size
                yield params
            if self._error is not None:
                raise self._error
            await self._changed.wait()
            self._changed = anyio.Event()


async def _read_capped(chunks: AsyncIterator[bytes], limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise DaemonUnavailable(f"the daemon's answer is larger than {limit} bytes")
        parts.append(chunk)
    return b"".join(parts)
