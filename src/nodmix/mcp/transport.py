"""Server config → an open MCP transport (stdio subprocess, streamable HTTP or SSE).

Also home of two things every transport needs: the environment a stdio server is started with,
and the read-stream watcher that tells the connection owner the server went away.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO

import anyio
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from nodmix.config.loader import resolve_secret
from nodmix.config.schema import MCPServerConfig
from nodmix.errors import MCPError
from nodmix.mcp.pipes import stdio_pipes
from nodmix.mcp.quick_calls import SideDoor
from nodmix.mcp.targets import transport_kind

INHERITED_ENV = (
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    # Windows needs these to start most programs at all.
    "SYSTEMROOT",
    "PATHEXT",
    "APPDATA",
    "LOCALAPPDATA",
    "USERPROFILE",
    "TEMP",
)
"""The only parent variables a stdio server sees, besides its own `env`: secrets in the gateway's
environment (provider keys, tokens) must not leak into third-party processes."""


def server_env(name: str, config: MCPServerConfig, parent: Mapping[str, str]) -> dict[str, str]:
    """The environment of a stdio server: a few inherited variables plus its own `env`.

    Values of the form `${VAR}` are looked up in `parent`.

    Raises:
        ConfigError: A `${VAR}` reference names an unset variable.
    """
    env = {key: parent[key] for key in INHERITED_ENV if parent.get(key)}
    for key, value in config.env.items():
        resolved = resolve_secret(value, key=f"mcp.servers.{name}.env.{key}", env=parent)
        env[key] = resolved if resolved is not None else ""
    return env


def _resolve_headers(
    name: str, config: MCPServerConfig, parent: Mapping[str, str]
) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in config.headers.items():
        resolved = resolve_secret(value, key=f"mcp.servers.{name}.headers.{key}", env=parent)
        out[key] = resolved if resolved is not None else ""
    return out


def _find_command(command: str, env: Mapping[str, str], cwd: str | None) -> str:
    """Fail early, with a readable message, when the command cannot be started."""
    if os.sep in command or (os.altsep and os.altsep in command):
        path = Path(cwd or ".", command).expanduser()
        if not path.exists():
            raise MCPError(f"command not found: {command}")
        if not os.access(path, os.X_OK):
            raise MCPError(f"command is not executable: {command}")
        return command
    if shutil.which(command, path=env.get("PATH", os.defpath)) is None:
        raise MCPError(f"command not found on PATH: {command}")
    return command


@asynccontextmanager
async def open_transport(
    name: str,
    config: MCPServerConfig,
    parent_env: Mapping[str, str],
    *,
    errlog: TextIO | None,
    timeout: float,
    door: SideDoor | None = None,
) -> AsyncIterator[TransportStreams]:
    """Open the transport a server config describes.

    Args:
        name: The configured server name (used in error messages).
        config: The server's config section.
        parent_env: Where inherited variables and `${VAR}` references come from.
        errlog: Receives a stdio server's stderr (default: ours).
        timeout: Seconds allowed for each HTTP operation of remote servers.
        door: Attached to a stdio server's pipes, for quick calls from other threads
            (`quick_calls`); other transports leave it unattached.

    Raises:
        MCPError: The command cannot be found.
        ConfigError: A `${VAR}` reference names an unset variable.
    """
    kind = transport_kind(config)
    if kind == "stdio":
        assert config.command is not None
        env = server_env(name, config, parent_env)
        cwd = str(Path(config.cwd).expanduser()) if config.cwd else None
        if cwd is not None and not Path(cwd).is_dir():
            raise MCPError(f"working directory does not exist: {config.cwd}")
        command = _find_command(config.command, env, cwd)
        if door is not None and sys.platform != "win32":
            async with stdio_pipes(
                command,
                list(config.args),
                env=get_default_environment() | env,
                cwd=cwd,
                errlog=errlog or sys.stderr,
                door=door,
                name=name,
            ) as streams:
                yield streams
            return
        params = StdioServerParameters(command=command, args=list(config.args), env=env, cwd=cwd)
        async with stdio_client(params, errlog=errlog or sys.stderr) as streams:
            yield streams
        return
    assert config.url is not None
    headers = _resolve_headers(name, config, parent_env)
    if kind == "sse":
        async with sse_client(config.url, headers=headers, timeout=timeout) as streams:
            yield streams
        return
    import httpx2

    # A long read timeout as in the SDK's default client: a GET stream may idle for minutes.
    # Requests are bounded separately by the connection's per-call timeout.
    http_timeout = httpx2.Timeout(timeout, read=max(timeout, 300.0))
    async with (
        httpx2.AsyncClient(headers=headers, timeout=http_timeout) as http,
        streamable_http_client(config.url, http_client=http) as streams,
    ):
        yield streams


class WatchedReadStream:
    """A read stream that sets `ended` when the server side of the transport is gone.

    A stdio server that exits (or is killed) only shows up as end-of-stream on its stdout; the
    SDK then fails pending requests but keeps the dead session open. The connection owner
    waits on `ended` to close that session, reap the process and let the next call restart it.
    """

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ended: anyio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        """The sender's context of the last item (the SDK's context-propagating streams)."""
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        """Receive the next message, noting the end of the stream."""
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        """Close the underlying stream."""
        self._ended.set()
        await self._inner.aclose()

    def __aiter__(self) -> WatchedReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> WatchedReadStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@asynccontextmanager
async def watched(
    transport: AbstractAsyncContextManager[TransportStreams], ended: anyio.Event
) -> AsyncIterator[TransportStreams]:
    """Wrap an opened transport so that `ended` is set when its read side ends."""
    async with transport as (read_stream, write_stream):
        yield WatchedReadStream(read_stream, ended), write_stream
