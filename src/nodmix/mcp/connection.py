"""One configured MCP server: lazy start, sharing, crash detection, restart and shutdown.

The SDK's `Client` enters anyio task groups and cancel scopes, which must be exited by the task
that entered them. So each live session is owned by a dedicated task in the manager's task
group (`_own`): it enters the client, reports readiness, then sleeps until the transport ends or
a stop is requested, and exits the client in the same task. Requests are sent from the callers'
own tasks (the SDK's dispatcher allows that), which means a cancelled caller cancels exactly its
request: the SDK then sends `notifications/cancelled` to the server.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from contextlib import ExitStack
from typing import TextIO, TypeVar

import anyio
import anyio.lowlevel
import mcp_types as types
from anyio.abc import TaskGroup
from mcp.client import Client, IncomingMessage
from mcp.shared.exceptions import MCPError as SDKError
from mcp_types import CONNECTION_CLOSED

from nodmix import __version__
from nodmix.config.schema import MCPServerConfig
from nodmix.errors import MCPError
from nodmix.mcp.failures import (
    HTTP_404_SESSION_GONE,
    HTTP_ERROR,
    describe_error,
    is_unreachable,
    sdk_error_key,
    stderr_tail,
)
from nodmix.mcp.info import MCPServerInfo, ServerState, server_info
from nodmix.mcp.quick_calls import Parking, SideDoor
from nodmix.mcp.results import all_pages
from nodmix.mcp.targets import transport_kind
from nodmix.mcp.transport import open_transport, watched

logger = logging.getLogger("nodmix.mcp")
# Server failures are reported through the status API; without this, Python's last-resort
# handler would print our warnings to stderr whenever the application has not set up logging.
logger.addHandler(logging.NullHandler())

T = TypeVar("T")


DEFAULT_TIMEOUT_S = 60.0
"""Per-request timeout when `timeoutMs` is not set."""
MIN_START_TIMEOUT_S = 30.0
"""Start-up gets at least this long, whatever `timeoutMs` says: `npx`/`uvx` servers may have to
download themselves on first use, which a per-request budget of a few seconds cannot cover."""
MAX_BACKOFF_S = 30.0
"""Longest wait between start attempts of a server that keeps failing to start."""
_CLOSE_WAIT_S = 10.0
"""Bound on waiting for an old session to close; the SDK's own stdio shutdown needs ≤ 6 s."""
_LOST_REASON_WAIT_S = 2.0


class _Live:
    """One session (starting, live or closed) and the state its owner task shares with callers."""

    def __init__(self, name: str, timeout: float) -> None:
        self.name = name
        self.door = SideDoor(timeout)
        """Quick `tools/call` requests from other threads (stdio servers only)."""
        self.settled = anyio.Event()
        """Set once the session is up or its start failed."""
        self.ending = anyio.Event()
        """Set when the transport ended or a stop was requested: the owner closes the session."""
        self.done = anyio.Event()
        """Set when the owner has closed the session (and reaped a stdio server)."""
        self.scope = anyio.CancelScope()
        """The owner's scope; cancelled to abandon a start that takes too long."""
        self.client: Client | None = None
        self.info: MCPServerInfo | None = None
        self.tools: list[types.Tool] | None = None
        self.started = False
        self.failed = False
        self.error: str | None = None
        self.errlog: TextIO | None = None
        self.stopping = False
        self.undelivered = False
        """The failure happened before any request reached the server, so retrying is safe."""

    @property
    def usable(self) -> bool:
        return self.client is not None and not self.ending.is_set()

    @property
    def pending(self) -> bool:
        """Still starting: callers should wait for it rather than start another."""
        return not self.settled.is_set()

    def stop(self) -> None:
        self.stopping = True
        self.ending.set()
        if not self.started:
            self.scope.cancel()

    async def on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools = None
        elif isinstance(message, types.LoggingMessageNotification):
            params = message.params
            logger.debug("MCP server %r logs (%s): %s", self.name, params.level, params.data)
        await anyio.lowlevel.checkpoint()


class ServerConnection:
    """The shared connection to one configured server (used through `MCPManager`).

    Args:
        name: The configured server name.
        config: Its config section.
        env: Where inherited variables and `${VAR}` references come from.
        task_group: The manager's task group, which runs the session owner tasks.
        backoff: First delay after a failed start; doubles per failure up to `MAX_BACKOFF_S`.
        start_timeout: Seconds allowed for spawn + handshake (default: the request timeout, at
            least `MIN_START_TIMEOUT_S`).
    """

    def __init__(
        self,
        name: str,
        config: MCPServerConfig,
        env: Mapping[str, str],
        *,
        task_group: TaskGroup,
        backoff: float,
        start_timeout: float | None = None,
    ) -> None:
        self.name = name
        self.config = config
        self.timeout = (config.timeout_ms / 1000) if config.timeout_ms else DEFAULT_TIMEOUT_S
        self.start_timeout = (
            start_timeout if start_timeout is not None else max(self.timeout, MIN_START_TIMEOUT_S)
        )
        self.state: ServerState = "idle" if config.enabled else "disabled"
        self.last_error: str | None = None
        """Why the server is not usable: `failed to start: …` or `connection lost: …`."""
        self.starts = 0
        self._env = env
        self._tg = task_group
        self._backoff = backoff
        self._failures = 0
        self._retry_at = 0.0
        self._live: _Live | None = None
        self._lock = anyio.Lock()
        self.parking = Parking()
        """Quick requests handed to the event loop (`quick_calls`)."""

    @property
    def door(self) -> SideDoor | None:
        """The live session's quick-request door, when it can take a request now (any thread)."""
        live = self._live
        if live is None or not live.usable or not live.door.usable:
            return None
        return live.door

    @property
    def info(self) -> MCPServerInfo | None:
        """What the server said about itself in its current session."""
        return self._live.info if self._live is not None and self._live.usable else None

    @property
    def cached_tool_count(self) -> int | None:
        """How many tools the current session listed, if it listed them."""
        live = self._live
        if live is None or not live.usable or live.tools is None:
            return None
        return len(live.tools)

    # ---- lifecycle ------------------------------------------------------------------------------

    async def session(self) -> _Live:
        """The live session, starting (or restarting) the server when needed.

        Concurrent callers share one start. A caller that gives up waiting (cancelled) does not
        abort the start, which other runs may be waiting for; a start that exceeds the timeout
        is abandoned and its process reaped in the background.

        Raises:
            MCPError: The server cannot be started; the message says why.
        """
        live = self._live
        if live is None or not (live.usable or live.pending):
            async with self._lock:
                live = self._live
                if live is None or not (live.usable or live.pending):
                    if live is not None:
                        await self._close(live)  # reap the old process before a new one
                    live = self._spawn()
        with anyio.move_on_after(self.start_timeout):
            await live.settled.wait()
        if not live.settled.is_set():
            self._start_failed(live, f"did not start within {self.start_timeout:g} s")
            live.stop()
        if live.usable:
            return live
        raise MCPError(f"MCP server {self.name!r} {self.last_error or 'failed to start'}")

    def _spawn(self) -> _Live:
        wait = self._retry_at - anyio.current_time()
        if self._failures and wait > 0:
            raise MCPError(
                f"MCP server {self.name!r} {self.last_error} (next attempt in {math.ceil(wait)} s)"
            )
        self.state = "connecting"
        self.starts += 1
        live = self._live = _Live(self.name, self.timeout)
        self._tg.start_soon(self._own, live)
        return live

    def _start_failed(self, live: _Live, reason: str) -> None:
        if live.failed:
            return
        live.failed = True
        stderr = stderr_tail(live.errlog)
        if stderr and stderr not in reason:
            reason += f" (stderr: {stderr})"
        self._failures += 1
        delay = min(MAX_BACKOFF_S, self._backoff * 2 ** (self._failures - 1))
        self._retry_at = anyio.current_time() + delay
        self.state, self.last_error = "failed", f"failed to start: {reason}"
        logger.warning("MCP server %r %s", self.name, self.last_error)

    async def _own(self, live: _Live) -> None:
        """Own one session from start to close (runs in the manager's task group)."""
        with ExitStack() as files, live.scope:
            if transport_kind(self.config) == "stdio":
                # Server stderr goes to a file, not our terminal; its last line explains crashes.
                live.errlog = files.enter_context(
                    tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
                )
            try:
                await self._serve(live)
            except Exception as exc:
                # Never let the task group see it: one broken server must not take the others
                # (and the manager) down.
                # (a protocol breach the transport caught says more than the SDK's error)
                live.error = live.door.fault or describe_error(exc)
                if not live.started:
                    self._start_failed(live, live.error)
                live.undelivered = is_unreachable(exc)
            finally:
                live.client = None
                live.error = live.door.fault or live.error
                live.door.close(live.error or "the server closed the connection")
                live.ending.set()
                if live.started and not live.stopping:
                    self._lost(live)
                elif not live.started and not live.stopping:
                    self._start_failed(live, live.error or "the server closed the connection")
                live.settled.set()
                live.done.set()

    async def _serve(self, live: _Live) -> None:
        transport = open_transport(
            self.name,
            self.config,
            self._env,
            errlog=live.errlog,
            timeout=self.timeout,
            door=live.door,
        )
        client = Client(
            watched(transport, live.ending),
            cache=None,
            message_handler=live.on_message,
            client_info=types.Implementation(name="nodmix", version=__version__),
        )
        async with client:
            live.client, live.info, live.started = client, server_info(self.name, client), True
            self._failures, self.state, self.last_error = 0, "connected", None
            live.settled.set()
            logger.info("MCP server %r connected (start #%d)", self.name, self.starts)
            await live.ending.wait()

    def _lost(self, live: _Live) -> None:
        reason = live.error or "the server closed the connection"
        stderr = stderr_tail(live.errlog)
        if stderr and stderr not in reason:
            reason += f" (stderr: {stderr})"
        self.state, self.last_error = "idle", f"connection lost: {reason}"
        logger.warning("MCP server %r %s; it restarts on next use", self.name, self.last_error)

    async def _close(self, live: _Live) -> None:
        live.stop()
        with anyio.move_on_after(_CLOSE_WAIT_S):
            await live.done.wait()

    async def aclose(self) -> None:
        """Close the current session, if any, and wait (bounded) until it is closed."""
        live = self._live
        if live is not None:
            await self._close(live)
        if self.state in ("connected", "connecting"):
            self.state = "idle"

    def stop(self) -> None:
        """Ask the current session to close without waiting (used to stop all at once)."""
        if self._live is not None:
            self._live.stop()

    async def lost_reason(self) -> str:
        """Why the current session ended, once its owner knows (waited for, bounded)."""
        live = self._live
        if live is not None:
            with anyio.move_on_after(_LOST_REASON_WAIT_S):
                await live.done.wait()
        return self.last_error or "closed the connection"

    # ---- requests -------------------------------------------------------------------------------

    async def _request(self, what: str, fn: Callable[[_Live, Client], Awaitable[T]]) -> T:
        for attempt in (1, 2):
            live = await self.session()
            client = live.client
            if client is None:
                continue
            with anyio.move_on_after(self.timeout) as scope:
                try:
                    return await fn(live, client)
                except SDKError as exc:
                    if sdk_error_key(exc) == HTTP_404_SESSION_GONE:
                        # The server forgot the session (an HTTP server restarted between two
                        # requests), so it never handled this one: retry on a fresh session.
                        live.undelivered = True
                        live.stop()
                    elif exc.code != CONNECTION_CLOSED:
                        if sdk_error_key(exc) == HTTP_ERROR:
                            # Not a JSON-RPC answer: possibly a server that restarted and rejects
                            # our old session id with a 400. The request may have run, so do
                            # not retry it, but do not reuse a session that may be gone.
                            live.stop()
                        raise MCPError(
                            f"MCP server {self.name!r} rejected {what}: {describe_error(exc)}"
                        ) from None
                except Exception as exc:
                    # The SDK raises RuntimeError for a client closed under the request; that is
                    # a lost connection, handled below.
                    if not isinstance(exc, RuntimeError) or live.usable:
                        raise MCPError(
                            f"MCP server {self.name!r} {what} failed: {describe_error(exc)}"
                        ) from None
            if scope.cancelled_caught:
                raise MCPError(
                    f"MCP server {self.name!r} did not answer {what} within {self.timeout:g} s"
                )
            if not live.undelivered:
                # The connection closed under the request: the owner task learns why (and
                # whether the request could have been delivered at all).
                with anyio.move_on_after(_LOST_REASON_WAIT_S):
                    await live.done.wait()
            if attempt == 1 and live.undelivered:
                continue
            raise MCPError(
                f"MCP server {self.name!r} {self.last_error or 'closed the connection'} "
                f"during {what}"
            )
        raise MCPError(f"MCP server {self.name!r} closed the connection during {what}")

    async def request(self, what: str, fn: Callable[[Client], Awaitable[T]]) -> T:
        """Run one request on the live session, within the server's timeout.

        A session found dead is restarted first. A request that failed because the transport
        could not reach the server at all is retried once on a fresh session; anything that may
        have reached the server is not, since tools can have side effects.

        Raises:
            MCPError: The server could not be started, timed out, lost the connection or
                answered with an error.
        """
        return await self._request(what, lambda _live, client: fn(client))

    async def list_tools(self) -> list[types.Tool]:
        """The server's tools, listed once per session (and again after `list_changed`)."""

        async def fetch(live: _Live, client: Client) -> list[types.Tool]:
            if live.tools is None:
                live.tools = await all_pages(
                    lambda cursor: client.list_tools(cursor=cursor), lambda page: page.tools
                )
            return live.tools

        return await self._request("tools/list", fetch)
