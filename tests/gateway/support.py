"""Helpers for the gateway tests: config for a scripted model, gateways in process and on a
socket, and a WebSocket client.

Every gateway here is the real thing: a real `Runtime` from a real config file, the real app,
and (for socket tests) real uvicorn started by `BackgroundGateway`. The model behind it is a
`ScriptedModelServer` on its own socket.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx2

from nodmix.config.loader import load_config
from nodmix.gateway import BackgroundGateway, GatewaySettings, create_app
from nodmix.gateway.presence import read_presence
from nodmix.gateway.server import STOP_HINT
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime import Runtime
from tests.support.cli import run_nodmix as run_nodmix
from tests.support.config import scripted_config
from tests.support.config import write_config as write_config

if TYPE_CHECKING:
    import openai

TOKEN = "test-token-0123"
NO_RETRY = RetryPolicy(attempts=1)
DEADLINE_S = 10.0


def workspace_file(state: Path, name: str, text: str) -> Path:
    """Write a file into the default agent workspace."""
    workspace = state / "workspace"
    workspace.mkdir(exist_ok=True)
    path = workspace / name
    path.write_text(text, encoding="utf-8")
    return path


def vision_config(state: Path, base_url: str, *, keep: int | None = None) -> None:
    """Write a config whose scripted model at `base_url` takes images; `keep` sets the agents'
    `keepImageTurns` (and shrinks images to 512 px)."""
    config = scripted_config(base_url)
    config["models"]["providers"]["local"]["models"][0]["input"] = ["text", "image"]
    if keep is not None:
        config["agents"]["defaults"]["media"] = {"keepImageTurns": keep, "maxImagePixels": 512}
    (state / "nodmix.json").write_text(json.dumps(config), encoding="utf-8")


@contextlib.contextmanager
def openai_client(url: str, *, timeout: float = 60) -> Iterator[openai.OpenAI]:
    """The official `openai` client of the gateway at `url`, closed at the end (its pooled
    connection is not left to the collector)."""
    import openai

    with openai.OpenAI(
        base_url=f"{url}/v1", api_key=TOKEN, max_retries=0, timeout=timeout
    ) as client:
        yield client


@contextlib.asynccontextmanager
async def asgi_client(
    *, token: str | None = TOKEN, watch_config: bool = False, **more: Any
) -> AsyncIterator[httpx2.AsyncClient]:
    """An HTTP client talking to a gateway app in this process (lifespan running).

    `more` sets further `GatewaySettings` fields (limits, timeouts).
    """
    env = dict(os.environ)
    settings = GatewaySettings(port=0, token=token, watch_config=watch_config, **more)
    async with Runtime.open(load_config(env=env), env=env, retry=NO_RETRY) as runtime:
        app = create_app(runtime, settings)
        async with app.router.lifespan_context(app):
            headers = {"authorization": f"Bearer {token}"} if token else {}
            transport = httpx2.ASGITransport(app=app)
            async with httpx2.AsyncClient(
                transport=transport, base_url="http://127.0.0.1:18789", headers=headers
            ) as client:
                yield client


@contextlib.contextmanager
def socket_gateway(
    *,
    token: str | None = TOKEN,
    grace_seconds: float = 5.0,
    watch_config: bool = False,
    **more: Any,
) -> Iterator[BackgroundGateway]:
    """A gateway on a free port (real uvicorn), stopped gracefully at the end.

    `more` sets further `GatewaySettings` fields (limits, timeouts).
    """
    settings = GatewaySettings(
        port=0,
        token=token,
        grace_seconds=grace_seconds,
        watch_config=watch_config,
        config_poll_seconds=0.05,
        **more,
    )
    with BackgroundGateway(settings, retry=NO_RETRY) as gateway:
        yield gateway


def sse_payloads(text: str) -> list[Any]:
    """The `data:` payloads of an SSE body (`[DONE]` kept as the string)."""
    out: list[Any] = []
    for block in text.split("\n\n"):
        for line in block.splitlines():
            if line.startswith("data: "):
                data = line.removeprefix("data: ")
                out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def poll_until(
    check: Callable[[], Awaitable[bool]], *, what: str, timeout: float = DEADLINE_S
) -> None:
    """Await `check()` until it holds, under a deadline (polling, never a fixed sleep)."""
    try:
        with anyio.fail_after(timeout):
            while not await check():
                await anyio.sleep(0.01)
    except TimeoutError:
        raise AssertionError(f"timed out waiting for {what}") from None


def wait_until(predicate: Callable[[], bool], *, what: str, timeout: float = DEADLINE_S) -> None:
    """Poll `predicate` until it holds (a deadline, never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class GatewayProcess:
    """`nodmix gateway` as a subprocess: started, its banner read, stopped with a signal."""

    def __init__(
        self,
        state: Path,
        *args: str,
        env: dict[str, str] | None = None,
        preexec_fn: Callable[[], object] | None = None,
    ) -> None:
        """`nodmix gateway --port 0 *args`; `preexec_fn` runs in the child before it starts
        (to lower its resource limits, say)."""
        self.preexec_fn = preexec_fn
        self.env = {
            **os.environ,
            "NODMIX_STATE_DIR": str(state),
            "NODMIX_CONFIG_PATH": str(state / "nodmix.json"),
            **(env or {}),
        }
        self.args = ["gateway", "--port", "0", *args]
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.errors: list[str] = []
        self._error_pump: threading.Thread | None = None
        self.banner: list[str] = []
        self.url = ""
        self.state = state
        self.token: str | None = None
        """The token in force, read from `gateway.json` once it listens (where `nodmix gateway
        url` finds it)."""
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> GatewayProcess:
        """Start and wait for the banner (fails with the process output if it exits)."""
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nodmix", *self.args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.env,
            preexec_fn=self.preexec_fn,
        )
        threading.Thread(target=self._pump, daemon=True).start()
        self._error_pump = threading.Thread(target=self._pump_errors, daemon=True)
        self._error_pump.start()
        deadline = time.monotonic() + DEADLINE_S
        while True:
            line = self.lines.get(timeout=max(0.01, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"the gateway exited early: {self.stop()[1]}")
            self.banner.append(line)
            if "listening on" in line:
                self.url = line.split("listening on ", 1)[1].strip()
            if line == STOP_HINT:
                record = read_presence(self.state) or {}
                token = record.get("token")
                self.token = token if isinstance(token, str) else None
                return self

    @property
    def headers(self) -> dict[str, str]:
        """`Authorization: Bearer <token>` (empty for a gateway without auth)."""
        return {"authorization": f"Bearer {self.token}"} if self.token else {}

    def _pump(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def _pump_errors(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for line in self.proc.stderr:
            self.errors.append(line)

    def stderr_so_far(self) -> str:
        """What the process wrote to stderr until now."""
        return "".join(self.errors)

    def stop(self, sig: int = signal.SIGTERM) -> tuple[int, str]:
        """Signal the process and return its exit code and stderr."""
        assert self.proc is not None and self._error_pump is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=DEADLINE_S * 2)
        self._error_pump.join(DEADLINE_S)
        return code, self.stderr_so_far()

    def __enter__(self) -> GatewayProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        proc = self.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None and not pipe.closed:
                pipe.close()
