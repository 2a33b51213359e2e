"""A gateway on a background thread, for tests, benchmarks and programs that embed one.

    with BackgroundGateway(GatewaySettings(port=0, token="t")) as gateway:
        httpx2.get(f"{gateway.url}/health")

It is the same `run_gateway` the `nodmix gateway` command runs (real uvicorn, real socket,
real runtime), only started and stopped from another thread.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Self, TypeVar

import anyio
import anyio.from_thread

from nodmix.config.loader import LoadedConfig, load_config
from nodmix.gateway.server import Ready, StopRequest, run_gateway
from nodmix.gateway.settings import GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime import Runtime

START_TIMEOUT_S = 30.0
T = TypeVar("T")


class BackgroundGateway:
    """Runs a gateway on its own thread and event loop until `stop()`."""

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        loaded: LoadedConfig | None = None,
        env: Mapping[str, str] | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        """Prepare (not start) a gateway; config and env default to the process's."""
        self._retry = retry
        self._env = dict(os.environ if env is None else env)
        self._loaded = loaded or load_config(env=self._env)
        self._requested = settings
        self._settings: GatewaySettings | None = None
        self._runtime: Runtime | None = None
        self._ready = threading.Event()
        self._stop: StopRequest | None = None
        self._portal_cm: AbstractContextManager[anyio.from_thread.BlockingPortal] | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._future: Future[None] | None = None

    @property
    def settings(self) -> GatewaySettings:
        """The settings it runs with (the bound port filled in)."""
        if self._settings is None:
            raise RuntimeError("the gateway is not running")
        return self._settings

    @property
    def url(self) -> str:
        """`http://host:port` of the running gateway."""
        return self.settings.url

    @property
    def runtime(self) -> Runtime:
        """The runtime it serves (touch it only through the portal's thread)."""
        if self._runtime is None:
            raise RuntimeError("the gateway is not running")
        return self._runtime

    def start(self) -> Self:
        """Start and wait until the socket accepts connections.

        Raises:
            Exception: whatever made the gateway fail to start.
        """
        portal_cm = anyio.from_thread.start_blocking_portal()
        portal = portal_cm.__enter__()
        self._portal_cm, self._portal = portal_cm, portal
        self._stop = portal.call(StopRequest)

        def ready(settings: GatewaySettings, runtime: Runtime) -> None:
            self._settings, self._runtime = settings, runtime
            self._ready.set()

        future = portal.start_task_soon(self._run, ready)
        self._future = future
        future.add_done_callback(lambda _: self._ready.set())
        if not self._ready.wait(START_TIMEOUT_S) or self._settings is None:
            error = future.exception() if future.done() else None
            with contextlib.suppress(Exception):
                self.stop()
            raise error or RuntimeError("the gateway did not start in time")
        return self

    async def _run(self, ready: Ready) -> None:
        assert self._stop is not None
        await run_gateway(
            self._requested,
            loaded=self._loaded,
            env=self._env,
            stop=self._stop,
            ready=ready,
            retry=self._retry,
        )

    def call(self, fn: Callable[..., T], *args: object) -> T:
        """Run a plain function on the gateway's event loop (a test's `ManualClock.advance`)."""
        if self._portal is None:
            raise RuntimeError("the gateway is not running")
        return self._portal.call(fn, *args)

    def stop(self) -> None:
        """Shut down gracefully and wait for it."""
        portal, self._portal = self._portal, None
        portal_cm, self._portal_cm = self._portal_cm, None
        if portal is None or portal_cm is None:
            return
        try:
            if self._stop is not None:
                portal.call(self._stop.request)
            if self._future is not None:
                self._future.result()
        finally:
            portal_cm.__exit__(*sys.exc_info())
            self._settings = self._runtime = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
