"""A SOCKS5 proxy on loopback through which a launched Chromium makes every connection.

Chromium started with `--proxy-server=socks5://127.0.0.1:<port>` and
`--proxy-bypass-list=<-loopback>` hands each connection (page loads, subresources, redirects,
fetch/XHR, WebSockets, for http and https alike) to this proxy with the host *name*: Chromium
resolves nothing itself. The proxy resolves the name through `NetworkPolicy` (every address
checked), connects to a checked address and then only copies bytes, so TLS stays end to end
between Chromium and the site. A refused host gets SOCKS reply 2 ("not allowed by ruleset"),
which Chromium reports as a failed load, and is logged for the tool's result.

Only CONNECT is served (no BIND, no UDP ASSOCIATE); Chromium is also told to keep WebRTC off
non-proxied UDP. Connections are bounded (`MAX_CONNECTIONS`) and each has a connect timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import struct

from nodmix.browser.policy import BlockedAddress, NetworkPolicy, RefusedLog

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 256
CONNECT_TIMEOUT_SECONDS = 15.0
HANDSHAKE_TIMEOUT_SECONDS = 10.0
_BUFFER = 64 * 1024

_OK, _FAILURE, _NOT_ALLOWED, _HOST_UNREACHABLE, _REFUSED, _NO_COMMAND, _NO_ADDRESS_TYPE = (
    0,
    1,
    2,
    4,
    5,
    7,
    8,
)


class GuardProxy:
    """A loopback SOCKS5 proxy that connects only where `policy` allows."""

    def __init__(self, policy: NetworkPolicy, refused: RefusedLog | None = None) -> None:
        self.policy = policy
        self.refused = refused or RefusedLog()
        self._server: asyncio.Server | None = None
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def url(self) -> str:
        """`socks5://127.0.0.1:<port>`."""
        return f"socks5://127.0.0.1:{self.port}"

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening and drop every open tunnel."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if server is not None:
            with contextlib.suppress(Exception):
                await server.wait_closed()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        _no_delay(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            if self._slots.locked():
                return  # full: the browser sees a failed connection and may retry
            async with self._slots:
                await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, TimeoutError, ValueError):
            pass
        except asyncio.CancelledError:
            # `close()` ends open tunnels; asyncio's stream callback would log a cancelled
            # connection task as an error, and nothing waits on this task's outcome.
            pass
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async with asyncio.timeout(HANDSHAKE_TIMEOUT_SECONDS):
            version, methods = await reader.readexactly(2)
            offered = await reader.readexactly(methods)
            if version != 5 or 0 not in offered:
                writer.write(b"\x05\xff")
                return
            writer.write(b"\x05\x00")
            _, command, _, kind = await reader.readexactly(4)
            host = await _read_address(reader, kind)
            (port,) = struct.unpack("!H", await reader.readexactly(2))
        if host is None:
            await _reply(writer, _NO_ADDRESS_TYPE)
            return
        if command != 1:
            await _reply(writer, _NO_COMMAND)
            return
        upstream = await self._connect(host, port, writer)
        if upstream is None:
            return
        up_reader, up_writer = upstream
        await _reply(writer, _OK)
        try:
            await _pipe(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()

    async def _connect(
        self, host: str, port: int, writer: asyncio.StreamWriter
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
        try:
            addresses = await self.policy.resolve(host, port)
        except BlockedAddress as exc:
            self.refused.add(f"{exc}:{port}")
            log.info("browser: refused a connection to %s:%s", exc, port)
            await _reply(writer, _NOT_ALLOWED)
            return None
        except (OSError, TimeoutError):
            await _reply(writer, _HOST_UNREACHABLE)
            return None
        for address in addresses:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_SECONDS):
                    opened = await asyncio.open_connection(address, port, limit=_BUFFER)
                _no_delay(opened[1])
                return opened
            except (OSError, TimeoutError):
                continue
        await _reply(writer, _REFUSED)
        return None


def _no_delay(writer: asyncio.StreamWriter) -> None:
    """Small writes go out at once (a tunnel must not wait on delayed ACKs)."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


async def _read_address(reader: asyncio.StreamReader, kind: int) -> str | None:
    if kind == 1:
        return str(ipaddress.IPv4Address(await reader.readexactly(4)))
    if kind == 3:
        (length,) = await reader.readexactly(1)
        return (await reader.readexactly(length)).decode("ascii", "replace")
    if kind == 4:
        return str(ipaddress.IPv6Address(await reader.readexactly(16)))
    return None


async def _reply(writer: asyncio.StreamWriter, code: int) -> None:
    writer.write(bytes([5, code, 0, 1, 0, 0, 0, 0, 0, 0]))
    with contextlib.suppress(OSError):
        await writer.drain()


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_BUFFER):
            writer.write(data)
            await writer.drain()
    finally:
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()


async def _pipe(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Copy both ways until both sides have ended (or one fails)."""
    tasks = [
        asyncio.ensure_future(_copy(reader, up_writer)),
        asyncio.ensure_future(_copy(up_reader, writer)),
    ]
    try:
        await asyncio.gather(*tasks)
    except OSError:
        pass
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
