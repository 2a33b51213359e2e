"""A Starlette app served by uvicorn on 127.0.0.1 from a background thread (for test servers
that sync test code drives). Subclasses provide `build_app()`.

A client that goes away while its request body is still arriving (a killed process, a
cancelled test) is logged at debug level, not as uvicorn's "Exception in ASGI application"
traceback: for a scripted server that is ordinary, not a failure."""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.from_thread
import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect
from starlette.types import Receive, Scope, Send

log = logging.getLogger("nodmix.testing")


class QuietDisconnects:
    """ASGI wrapper: a request whose client hung up mid-body ends quietly (debug log)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            log.debug("client went away during %s %s", scope.get("method"), scope.get("path"))


async def start_uvicorn(
    app: Starlette, host: str, port: int, *, ws: str = "none"
) -> tuple[uvicorn.Server, socket.socket]:
    """uvicorn serving `app` on a fresh listening socket bound to `host:port` (0: any free).

    `startup()` without `serve()`: uvicorn's main loop polls every 100 ms and its shutdown
    sleeps; tests start and stop many servers, so the caller waits and shuts down itself.
    """
    # proto=IPPROTO_TCP matters: asyncio only sets TCP_NODELAY on accepted sockets whose
    # proto says TCP, and without it every keep-alive response stalls on delayed ACKs.
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
        sock.setblocking(False)
        config = uvicorn.Config(
            QuietDisconnects(app),
            lifespan="off",
            log_level="warning",
            access_log=False,
            http="h11",
            ws=ws,
        )
        config.load()
        server = uvicorn.Server(config)
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[sock])
    except BaseException:
        sock.close()
        raise
    return server, sock


class ThreadedServer:
    """Start with `with server:` (or `start()`/`stop()`); `port` is known once started."""

    ws_protocol = "none"
    """uvicorn's WebSocket implementation: `none`, or `websockets` for servers that take
    WebSocket connections."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self._requested_port = port
        self.port = 0
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._loop_thread: int | None = None
        self._stop: anyio.Event | None = None
        self._done: Any = None

    def build_app(self) -> Starlette:
        """The app to serve."""
        raise NotImplementedError

    def _before_stop(self) -> None:
        """Called on the server's loop before it stops (end long polls here)."""

    @property
    def _loop_token(self) -> object | None:
        return self._portal

    def _call_soon(self, fn: Callable[[], object]) -> None:
        """Run `fn` on the server's event loop (from any thread)."""
        portal = self._portal
        if portal is None:
            return
        if threading.get_ident() == self._loop_thread:
            fn()
            return

        async def run() -> None:
            fn()

        try:
            portal.start_task_soon(run)
        except RuntimeError:  # the portal is shutting down
            pass

    async def _serve(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        self._loop_thread = threading.get_ident()
        server, sock = await start_uvicorn(
            self.build_app(), self.host, self._requested_port, ws=self.ws_protocol
        )
        self.port = sock.getsockname()[1]
        self._stop = anyio.Event()
        task_status.started()
        try:
            await self._stop.wait()
        finally:
            with anyio.CancelScope(shield=True):
                server.should_exit = True
                await server.shutdown(sockets=[sock])
            sock.close()

    def start(self) -> Self:
        """Serve on a background thread."""
        portal_cm = anyio.from_thread.start_blocking_portal()
        portal = portal_cm.__enter__()
        try:
            self._done, _ = portal.start_task(self._serve)
        except BaseException:
            portal_cm.__exit__(*sys.exc_info())
            raise
        self._portal_cm, self._portal = portal_cm, portal
        return self

    def stop(self) -> None:
        """Stop serving and join the thread."""
        portal_cm, self._portal_cm = self._portal_cm, None
        portal, self._portal = self._portal, None
        if portal is None or portal_cm is None:
            return
        stop = self._stop
        portal.call(self._before_stop)
        if stop is not None:
            portal.call(stop.set)
        portal_cm.__exit__(None, None, None)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
