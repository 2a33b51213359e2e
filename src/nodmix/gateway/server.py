"""Running the gateway: open the runtime, serve the app with uvicorn, shut down gracefully.

`run_gateway()` is the whole life of a gateway process. It binds the socket itself (so a busy
port is one clear error, and port 0 works for tests), opens the `Runtime`, serves until `stop`
is set (recording itself in `<state>/gateway.json` meanwhile, `nodmix.gateway.presence`), and
then shuts down in order: uvicorn stops accepting and lets HTTP requests finish
(up to the grace period), the app's lifespan gives WebSocket-started turns the same grace
period and cancels what is left, and finally the runtime closes MCP servers and drops
suspended code-mode runs.

Signals are handled here rather than by uvicorn: uvicorn re-raises a captured SIGTERM after it
stops, which would kill the process before the runtime closes.
"""

from __future__ import annotations

import logging
import math
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio
import uvicorn

from nodmix import __version__
from nodmix.config.loader import LoadedConfig
from nodmix.errors import NodmixError
from nodmix.gateway import webassets
from nodmix.gateway.app import create_app, gateway_of_app
from nodmix.gateway.connections import limited_http_protocol
from nodmix.gateway.locate import page_url
from nodmix.gateway.presence import announce
from nodmix.gateway.settings import GatewaySettings
from nodmix.providers.retry import RetryPolicy
from nodmix.runtime import Runtime

log = logging.getLogger("nodmix.gateway")

STOP_HINT = "Press Ctrl-C to stop (running turns get a grace period to finish)."
"""The banner's last line."""

_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


_DENIAL_NOISE = "ASGI callable returned without completing handshake."


class _DenialNoiseFilter(logging.Filter):
    """Drops uvicorn's error line after a WebSocket handshake was refused on purpose.

    uvicorn's websockets-sansio protocol logs that line whenever the app answers a handshake
    with an HTTP response (our 401/403) instead of accepting it, although the response went
    out correctly. The gateway's `/ws` endpoint always accepts, so the line only ever follows
    a deliberate refusal.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != _DENIAL_NOISE


def configure_logging(verbose: bool) -> None:
    """Make `nodmix.*` records (gateway, providers' debug logging, MCP) reach stderr.

    `NODMIX_DEBUG_MODEL_*` and `NODMIX_DEBUG_SSE` log at INFO on `nodmix.providers`, so the
    `nodmix` logger is at INFO (DEBUG with `--verbose`); uvicorn's own chatter stays at
    WARNING unless verbose.
    """
    root = logging.getLogger()
    if not root.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter(_LOG_FORMAT, datefmt="%H:%M:%S"))
        root.addHandler(handler)
    logging.getLogger("nodmix").setLevel(logging.DEBUG if verbose else logging.INFO)
    for name in ("uvicorn", "uvicorn.error"):
        logging.getLogger(name).setLevel(logging.INFO if verbose else logging.WARNING)
    error_log = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DenialNoiseFilter) for f in error_log.filters):
        error_log.addFilter(_DenialNoiseFilter())
    logging.getLogger("uvicorn.access").setLevel(logging.INFO)


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket.

    Raises:
        NodmixError: the address is in use or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP so asyncio sets TCP_NODELAY on accepted connections (no delayed-ACK stalls).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        hint = " (is another gateway running? try --port)" if port else ""
        raise NodmixError(f"cannot listen on {host}:{port}: {exc.strerror}{hint}") from None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def uvicorn_config(app: Any, settings: GatewaySettings) -> uvicorn.Config:
    """Production server settings for the app."""
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_config=None,
        access_log=settings.verbose,
        ws="websockets-sansio",
        timeout_graceful_shutdown=int(max(1, settings.grace_seconds)),
        server_header=False,
        # Slow and surplus clients (see `nodmix.gateway.connections`); bodies are capped by
        # the app (`nodmix.gateway.limits`), WebSocket messages here.
        http=limited_http_protocol(
            head_timeout_seconds=settings.request_timeout_seconds,
            max_connections=settings.max_connections,
        ),
        timeout_keep_alive=max(1, math.ceil(settings.keep_alive_seconds)),
        ws_max_size=settings.max_body_bytes,
    )
    config.load()
    return config


Ready = Callable[[GatewaySettings, Runtime], None]


@dataclass(slots=True)
class StopRequest:
    """How the owner of a gateway asks it to stop: gracefully, then (again) at once."""

    graceful: anyio.Event = field(default_factory=anyio.Event)
    forced: anyio.Event = field(default_factory=anyio.Event)

    def request(self) -> None:
        """The first call stops gracefully; a second one skips the grace period."""
        if self.graceful.is_set():
            self.forced.set()
        self.graceful.set()


async def run_gateway(
    settings: GatewaySettings,
    *,
    loaded: LoadedConfig,
    env: Mapping[str, str],
    stop: StopRequest,
    ready: Ready | None = None,
    retry: RetryPolicy | None = None,
) -> None:
    """Serve until `stop` is requested, then shut down gracefully (see the module docstring).

    `ready(settings, runtime)` is called once the socket accepts connections; its `settings`
    carry the bound port (useful with port 0). `retry` overrides the model retry policy.

    Raises:
        NodmixError: the socket cannot be bound, or the runtime cannot start.
    """
    from nodmix.gateway.settings import with_token

    sock = bind_socket(settings.host, settings.port)
    try:
        async with Runtime.open(loaded, env=env, retry=retry) as runtime:
            # After the runtime bound the state backend: replicas on PostgreSQL share the
            # token a gateway makes itself (`gateway.token.open_token_store`).
            # (Off the loop: on a database, a read or a first write the runtime's tasks
            # must not wait for.)
            port = sock.getsockname()[1]
            bound = await anyio.to_thread.run_sync(
                with_token, replace(settings, port=port), runtime.state_dir
            )
            app = create_app(runtime, bound)
            config = uvicorn_config(app, bound)
            server = uvicorn.Server(config)
            # `startup()`/`main_loop()`/`shutdown()` rather than `serve()`: see the module
            # docstring on signals. `serve()` would create the lifespan; do it here instead.
            server.lifespan = config.lifespan_class(config)
            await server.startup(sockets=[sock])
            # What other replicas' operators can reach: a wildcard bind names this host.
            host = socket.gethostname() if bound.host in ("0.0.0.0", "::", "") else bound.host
            runtime.state.coordination.url = f"http://{host}:{bound.port}"

            async def follow_stop_requests() -> None:
                await stop.graceful.wait()
                # From here on, a turn that is cancelled keeps its suspended code-mode runs
                # for the next start: a second signal may cancel turns before the app's own
                # shutdown has run.
                runtime.retire()
                server.should_exit = True
                await stop.forced.wait()
                # Cancelled turns end (with valid transcripts) and their requests answer,
                # so the normal shutdown below completes at once, lifespan included.
                gateway_of_app(app).runs.abort_all()

            with announce(
                runtime.state_dir,
                url=bound.url,
                version=__version__,
                instance=bound.instance,
                token=bound.token,
            ):
                if ready is not None:
                    ready(bound, runtime)
                async with anyio.create_task_group() as group:
                    group.start_soon(follow_stop_requests)
                    group.start_soon(webassets.ensure_installed)
                    await server.main_loop()
                    log.info(
                        "gateway stopping: letting running turns finish (up to %gs)",
                        bound.grace_seconds,
                    )
                    await server.shutdown(sockets=[sock])
                    group.cancel_scope.cancel()
    finally:
        sock.close()


async def serve_until_signal(
    settings: GatewaySettings,
    *,
    loaded: LoadedConfig,
    env: Mapping[str, str],
    ready: Ready | None = None,
) -> None:
    """`run_gateway` stopped by SIGINT or SIGTERM (a second signal skips the grace period)."""
    stop = StopRequest()

    async def watch_signals() -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async for signum in signals:
                name = signal.Signals(signum).name
                if stop.graceful.is_set():
                    log.warning("%s again: cancelling running turns now", name)
                else:
                    log.info("%s received", name)
                stop.request()

    async with anyio.create_task_group() as group:
        group.start_soon(watch_signals)
        await run_gateway(settings, loaded=loaded, env=env, stop=stop, ready=ready)
        group.cancel_scope.cancel()


def banner(settings: GatewaySettings, runtime: Runtime, *, show_token: bool = True) -> str:
    """What `nodmix gateway` prints once it listens: where, how to log in, which model.
    `show_token`: the page link carries the token (in a terminal; not into a service's log,
    where `nodmix gateway url` prints it on demand)."""
    from nodmix.invocation import command
    from nodmix.providers.router import default_model_ref

    url = settings.url
    agent = runtime.agent(None)
    model = default_model_ref(agent.model, runtime.env)
    config = runtime.loaded
    lines = [
        f"nodmix gateway {__version__} listening on {url}",
        f"  web page:   {page_url(url, settings.token)}"
        if show_token or not settings.token
        else f"  web page:   {url}/  (the link that logs it in: {command('gateway url')})",
        f'  OpenAI API: {url}/v1  (chat/completions, responses; model "nodmix" or '
        '"nodmix/<agentId>", see /v1/models)',
        "  auth:       " + _auth_line(settings, runtime.state_dir),
        f"  agents:     {', '.join(runtime.agent_ids())}; main uses {model}",
        f"  config:     {config.path}"
        + ("" if config.exists else " (not found: running on built-in defaults)"),
        f"  state:      {runtime.state_dir}",
    ]
    if agent.model is None and model.startswith("ollama/"):
        lines += [
            f"  note: no model is configured and no API key is set, so agents use {model} from",
            "        a local Ollama server. To use OpenAI instead, stop the gateway and run:",
            "          export OPENAI_API_KEY=sk-...",
            f"          {command('config set agents.defaults.model.primary openai/gpt-4.1-mini')}",
        ]
    lines.append(STOP_HINT)
    return "\n".join(lines)


def _auth_line(settings: GatewaySettings, state_dir: Path) -> str:
    if settings.token is None:
        return 'none (gateway.auth.mode "none": any local process is the owner; loopback only)'
    from nodmix.gateway.token import open_token_store

    store = open_token_store(state_dir)
    if store.load() == settings.token:
        source = f"kept in {store.where}"
    else:
        source = "gateway.auth.token / NODMIX_GATEWAY_TOKEN / --token"
    return f"bearer token required ({source}; the CLI here finds it)"
