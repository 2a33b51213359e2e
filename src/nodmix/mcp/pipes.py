"""The stdio transport: a server process, its stdout read by the event loop, its stdin
writable from any thread.

It gives the SDK's session the same streams as the SDK's own stdio transport (one message per
line, parse errors passed on as values, the same shutdown: close stdin, wait, then end the
process group) and adds what quick calls need (`quick_calls.SideDoor`): stdin is written under
a lock by whichever thread has a whole line, and the lines read from stdout that answer quick
requests go to their waiting threads instead of the session.

Reading is a pipe protocol on the event loop (asyncio's `connect_read_pipe`), so a message costs
one callback; a session slower than the server pauses reading (at most `_INBOX_HIGH` messages
are held), a message longer than `MAX_LINE_BYTES` ends the connection, and invalid UTF-8 costs
the characters it garbles. When the server exits, the rest of its process group is ended too, so
a child holding stdout open cannot keep a dead connection open. Writing is
non-blocking; what the pipe cannot take at once is queued and written when the pipe drains,
and the session's writer waits while more than `_WRITE_HIGH` bytes are queued. Quick requests
never queue: they are declined while anything is.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Final, TextIO

import anyio
import anyio.abc
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client._transport import TransportStreams
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from nodmix.mcp.failures import describe_error
from nodmix.mcp.quick_calls import SideDoor

logger = logging.getLogger("nodmix.mcp")

#: The longest message a server may send; a longer one ends the connection.
MAX_LINE_BYTES: Final = 64 << 20
_INBOX_HIGH: Final = 256
_INBOX_LOW: Final = 64
_WRITE_HIGH: Final = 1 << 20
#: The server's grace period after its stdin closes, then after SIGTERM (as the SDK's).
_EXIT_WAIT_S: Final = 2.0
_FLUSH_WAIT_S: Final = 0.5


class _StdinWriter:
    """The server's stdin, written whole lines at a time by any thread."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._loop = loop
        self._lock = threading.Lock()
        self._queued = bytearray()
        self._armed = False
        self._closed = False
        self.drained = asyncio.Event()
        self.drained.set()
        self.broken = False

    @property
    def queued(self) -> int:
        return len(self._queued)

    def write_now(self, data: bytes) -> bool:
        """Write `data` if nothing is queued and the pipe takes all of it at once."""
        with self._lock:
            if self._closed or self._queued:
                return False
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                return False
            except OSError:
                self.broken = True
                return False
            if written == len(data):
                return True
            self._queue(data[written:])  # (a line is never left half written)
        return True

    def write(self, data: bytes) -> bool:
        """Write `data`, queueing what the pipe cannot take now (on the event loop);
        False when the pipe is closed or broken."""
        with self._lock:
            if self._closed or self.broken:
                return False
            if not self._queued:
                try:
                    written = os.write(self._fd, data)
                except BlockingIOError:
                    written = 0
                except OSError:
                    self.broken = True
                    return False
                data = data[written:]
            if data:
                self._queue(data)
        return True

    def _queue(self, data: bytes) -> None:
        # (holding the lock)
        self._queued += data
        self.drained.clear() if self._on_loop() else self._loop.call_soon_threadsafe(
            self.drained.clear
        )
        if not self._armed:
            self._armed = True
            if self._on_loop():
                self._loop.add_writer(self._fd, self._flush)
            else:
                self._loop.call_soon_threadsafe(self._arm)

    def _arm(self) -> None:
        # (on the loop, for another thread) unless stdin closed meanwhile: its descriptor's
        # number may already belong to another file
        with self._lock:
            if self._closed:
                return
            self._loop.add_writer(self._fd, self._flush)

    def _on_loop(self) -> bool:
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def _flush(self) -> None:
        with self._lock:
            if self._queued and not self._closed:
                try:
                    written = os.write(self._fd, self._queued)
                except BlockingIOError:
                    return
                except OSError:
                    self.broken = True
                    self._queued.clear()
                else:
                    del self._queued[:written]
            if self._queued and not self._closed:
                return
            self._armed = False
        self._loop.remove_writer(self._fd)
        self.drained.set()

    def close(self) -> None:
        """Close stdin (on the event loop); queued output is dropped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._queued.clear()
        self._loop.remove_writer(self._fd)
        self.drained.set()
        with contextlib.suppress(OSError):
            os.close(self._fd)


class _StdoutReader(asyncio.Protocol):
    """The server's stdout: whole lines, to the quick door or the session's inbox."""

    def __init__(
        self,
        name: str,
        door: SideDoor,
        session: MemoryObjectSendStream[SessionMessage | Exception],
    ):
        self._name = name
        self._warned = False
        self._door = door
        self._session = session
        self._partial = bytearray()
        self.inbox: collections.deque[SessionMessage | Exception] = collections.deque()
        self.arrived = asyncio.Event()
        self.ended = False
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.ReadTransport)
        self._transport = transport

    def data_received(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self._partial:
                self._partial += data[start:end]
                line = bytes(self._partial)
                self._partial.clear()
            else:
                line = data[start:end]
            start = end + 1
            if line.strip():
                self._take(line)
        if start < len(data):
            self._partial += data[start:]
            if len(self._partial) > MAX_LINE_BYTES:
                # A server that never ends its line would grow this without bound.
                self._door.fault = f"sent a message longer than {MAX_LINE_BYTES} bytes"
                self._partial.clear()
                self.close()

    def _deliver(self, item: SessionMessage | Exception) -> None:
        if not self.inbox:
            try:  # the session is waiting for a message: hand it over at once
                self._session.send_nowait(item)
                return
            except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
                pass
        self.inbox.append(item)
        self.arrived.set()
        if len(self.inbox) >= _INBOX_HIGH and self._transport is not None and not self._paused:
            self._paused = True
            self._transport.pause_reading()

    def taken(self) -> None:
        """A message left the inbox: read again once it is short."""
        if self._paused and len(self.inbox) <= _INBOX_LOW and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()

    def eof_received(self) -> bool | None:
        self._end()
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._end()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self._door.close("the server closed the connection")
            self.arrived.set()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._end()

    def _take(self, line: bytes) -> None:
        """One line: an answer to a quick request to its caller, anything else to the session."""
        if self._door.claims(line):
            return
        try:
            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
        except ValueError as exc:
            fixed = line.decode("utf-8", "replace").encode()
            if fixed != line:  # invalid UTF-8 costs the characters it garbles, not the message
                self._take(fixed)
                return
            self._garbage(exc)
            self._deliver(exc)
            return
        self._deliver(SessionMessage(message))

    def _garbage(self, exc: ValueError) -> None:
        # One line, once per connection at warning level: a server writing garbage in a loop
        # must not flood the log.
        what = f"MCP server {self._name!r} sent a line that is not a JSON-RPC message"
        if self._warned:
            logger.debug("%s: %s", what, describe_error(exc))
        else:
            self._warned = True
            logger.warning("%s (later ones at debug level): %s", what, describe_error(exc))


@asynccontextmanager
async def stdio_pipes(
    command: str,
    args: Sequence[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    errlog: TextIO,
    door: SideDoor,
    name: str,
) -> AsyncIterator[TransportStreams]:
    """Start the server and give the session its streams (see the module docstring);
    `name` is the configured server's, for the log.

    Raises:
        OSError: The process cannot be started.
    """
    loop = asyncio.get_running_loop()
    stdin_read, stdin_write = os.pipe()
    try:
        stdout_read, stdout_write = os.pipe()
    except OSError:
        os.close(stdin_read)
        os.close(stdin_write)
        raise
    try:
        process = await anyio.open_process(
            [command, *args],
            stdin=stdin_read,
            stdout=stdout_write,
            stderr=errlog,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
    except BaseException:
        for fd in (stdin_write, stdout_read):
            os.close(fd)
        raise
    finally:
        os.close(stdin_read)
        os.close(stdout_write)
    to_session, session_reads = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    session_writes, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    writer = _StdinWriter(stdin_write, loop)
    reader = _StdoutReader(name, door, to_session)
    await loop.connect_read_pipe(lambda: reader, os.fdopen(stdout_read, "rb", buffering=0))
    door.attach(writer.write_now, loop, write_late=writer.write)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_forward, reader, to_session)
            group.start_soon(_write_from_session, from_session, writer, door, reader)
            group.start_soon(_end_with_server, process)
            try:
                yield session_reads, session_writes
            finally:
                with anyio.CancelScope(shield=True):
                    await _shut_down(process, writer, reader, door, session_writes)
                group.cancel_scope.cancel()
    finally:
        for stream in (to_session, session_reads, session_writes, from_session):
            stream.close()


async def _forward(
    reader: _StdoutReader, to_session: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    """Hand the inbox to the session, in order; end the session's stream at end of output."""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async with to_session:
            while True:
                while reader.inbox:
                    item = reader.inbox.popleft()
                    reader.taken()
                    await to_session.send(item)
                if reader.ended:
                    return
                reader.arrived.clear()
                await reader.arrived.wait()


async def _write_from_session(
    from_session: MemoryObjectReceiveStream[SessionMessage],
    writer: _StdinWriter,
    door: SideDoor,
    reader: _StdoutReader,
) -> None:
    async with from_session:
        async for item in from_session:
            door.note_request(item.message)
            line = item.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
            if not writer.write(line.encode()):
                # The server stopped reading: end the session's stream rather than let a
                # request wait forever for an answer.
                reader.close()
                return
            if writer.queued > _WRITE_HIGH:
                await writer.drained.wait()


async def _shut_down(
    process: anyio.abc.Process,
    writer: _StdinWriter,
    reader: _StdoutReader,
    door: SideDoor,
    session_writes: MemoryObjectSendStream[SessionMessage],
) -> None:
    """Close stdin, give the server `_EXIT_WAIT_S` to exit, then end its process group."""
    session_writes.close()
    door.close("the connection was closed")
    with anyio.move_on_after(_FLUSH_WAIT_S):
        await writer.drained.wait()
    writer.close()
    with anyio.move_on_after(_EXIT_WAIT_S):
        await process.wait()
    # Also when the server exited: what it started goes with it (returns at once if nothing).
    await terminate_posix_process_tree(process, _EXIT_WAIT_S)
    if process.returncode is None:
        with anyio.move_on_after(_EXIT_WAIT_S):
            await process.wait()
        if process.returncode is None:
            logger.warning("MCP server process %d outlived its kill; abandoning it", process.pid)
    reader.close()


async def _end_with_server(process: anyio.abc.Process) -> None:
    """Once the server exits, end the rest of its process group: a child holding its stdout
    open would keep the connection open with nobody left to answer (the session ends when
    the output does, and the next call starts the server again)."""
    await process.wait()
    await terminate_posix_process_tree(process, _EXIT_WAIT_S)
