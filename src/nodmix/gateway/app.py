"""The gateway's ASGI app: `create_app(runtime, settings)` and the state its routes share.

The app serves an already open `Runtime` (the CLI opens it around uvicorn, and closes it, with
its MCP servers and code-mode engine, after the server stopped). The app's lifespan owns what
belongs to serving: the task group that runs turns (drained on shutdown) and the config
watcher.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route, WebSocketRoute
from starlette.staticfiles import StaticFiles

from nodmix import __version__
from nodmix.agents import AgentProfile
from nodmix.events import EventSink
from nodmix.gateway.approvals import APPROVAL_ANSWER, ApprovalFanout, answer_forwarded
from nodmix.gateway.approvals_shared import ApprovalRecorder, open_shared_approvals
from nodmix.gateway.auth import GuardMiddleware
from nodmix.gateway.automation import serve_automation
from nodmix.gateway.channel_turns import GatewayTurns, channel_webhook_routes
from nodmix.gateway.errors import APIError, classify, not_found
from nodmix.gateway.limits import BodyLimitMiddleware
from nodmix.gateway.reload import ConfigWatcher
from nodmix.gateway.runs import ActiveRun, RunTracker
from nodmix.gateway.session_pointers import (
    CLIENT_CALLS_FILE,
    RESPONSES_FILE,
    open_session_pointers,
)
from nodmix.gateway.settings import GatewaySettings
from nodmix.gateway.stateless import StatelessSessions
from nodmix.gateway.subagents import serve_subagents
from nodmix.origin import TurnOrigin
from nodmix.runtime import Runtime
from nodmix.runtime.client_results import ClientTurn
from nodmix.runtime.reconfigure import apply_config
from nodmix.sessions import CustomMessageEntry, Entry, MessageEntry

if TYPE_CHECKING:
    from nodmix.media.files import InboundFile

STATIC_DIR = Path(__file__).parent / "static"
"""The web page (plain HTML, JS and CSS shipped as package data; nothing is built)."""

Endpoint = Callable[[Request], Awaitable[Response]]


class Gateway:
    """What every route shares: the runtime, the settings, running turns, config state."""

    def __init__(self, runtime: Runtime, settings: GatewaySettings) -> None:
        """Serve `runtime` (already open) as `settings` say."""
        self.runtime = runtime
        self.settings = settings
        self.runs = RunTracker()
        self.approvals = ApprovalFanout(runtime.security.broker, self.event)
        """WebSocket clients told about approval requests (`gateway/approvals.py`)."""
        self.shared_approvals = open_shared_approvals(runtime.state_dir)
        """Requests of every replica (postgres backend; `gateway/approvals_shared.py`)."""
        self.stateless = StatelessSessions(runtime, self._start_background)
        self.client_calls = open_session_pointers(runtime.state_dir, CLIENT_CALLS_FILE)
        """Sessions of the client tool calls handed out (for stateless continuations)."""
        self.responses = open_session_pointers(runtime.state_dir, RESPONSES_FILE)
        """Sessions of stored Responses API responses (`previous_response_id`)."""
        self._group: anyio.abc.TaskGroup | None = None
        self.watcher = ConfigWatcher(
            runtime.loaded,
            env=runtime.env,
            poll_seconds=settings.config_poll_seconds,
            apply=lambda loaded, changed: apply_config(runtime, loaded, changed),
        )
        self.started_monotonic = time.monotonic()
        self.started_at = time.time()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[Gateway]:
        """Accept turns (and watch the config) inside the block; drain turns on exit."""
        async with anyio.create_task_group() as group:
            self._group = group
            if self.shared_approvals is not None:
                recorder = ApprovalRecorder(self.shared_approvals)
                recorder.attach(self.runtime.security.broker)
                group.start_soon(recorder.detach_on_exit, self.runtime.security.broker)
            self.approvals.start()
            group.start_soon(self.approvals.stop_on_exit)
            coordination = self.runtime.state.coordination
            stop_listening = coordination.listen(self._deliver)
            group.start_soon(coordination.serve)
            if self.settings.watch_config:
                group.start_soon(self.watcher.watch)
            group.start_soon(self.runtime.channels.run, GatewayTurns(self))
            group.start_soon(serve_automation, self)
            group.start_soon(serve_subagents, self.runtime.subagents, lambda: (self,))
            async with self.runs.running(self.settings.grace_seconds):
                try:
                    yield self
                finally:
                    self.runtime.retire()  # turns cancelled by the shutdown keep their runs
            self._group = None
            stop_listening()
            group.cancel_scope.cancel()

    def event(self, name: str, payload: Any) -> None:
        """Tell every WebSocket client, of this replica and of the others (with the
        postgres state backend), about `name` (`session`, `approval`)."""
        self.runtime.state.coordination.publish(f"ws.{name}", payload)

    def _deliver(self, topic: str, payload: dict[str, Any]) -> None:
        if topic.startswith("ws."):
            for conn in list(self.approvals.connections):
                conn.event(topic[3:], payload)
        elif topic == APPROVAL_ANSWER:
            answer_forwarded(self.runtime, payload)

    def busy_sessions(self) -> set[str]:
        """Sessions with a turn running: a run of the gateway's, or a subagent's."""
        return self.runs.busy_sessions() | self.runtime.subagents.running_sessions()

    def _start_background(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> bool:
        """Start housekeeping nobody waits for (shutdown waits for it); False when the gateway
        is not serving, and the caller should do the work itself."""
        if self._group is None:
            return False
        self._group.start_soon(fn, *args)
        return True

    # ---- agents and sessions ------------------------------------------------------------------

    def agent(self, agent_id: str | None) -> AgentProfile:
        """A configured agent (`main` by default).

        Raises:
            APIError: 404 when no such agent is configured.
        """
        known = self.runtime.agent_ids()
        if agent_id is not None and agent_id not in known:
            raise not_found(
                f"unknown agent {agent_id!r} (configured: {', '.join(known)})",
                code="unknown_agent",
            )
        return self.runtime.agent(agent_id)

    def session_key(self, agent: AgentProfile, session_key: str | None) -> str:
        """The full session key of `session_key` for `agent`.

        Raises:
            APIError: 400 when the key is malformed or belongs to another agent.
        """
        try:
            return self.runtime.session_key(agent, session_key)
        except Exception as exc:
            raise classify(exc) from None

    def start_turn(
        self,
        text: str,
        *,
        agent: AgentProfile,
        session_key: str,
        emit: EventSink,
        origin: str,
        model: str | None = None,
        seed: Callable[[], Awaitable[None]] | None = None,
        disable_tools: bool = False,
        after: Callable[[], object] | None = None,
        turn_origin: TurnOrigin | None = None,
        client: ClientTurn | None = None,
        files: Sequence[InboundFile] = (),
    ) -> ActiveRun:
        """Run a chat message (a turn, or a command such as `/new`) in the background.

        Raises:
            APIError: 503 while the gateway shuts down.
        """
        runtime = self.runtime

        async def body() -> Any:
            try:
                if seed is not None:
                    await seed()
                return await runtime.submit(
                    text,
                    agent_id=agent.id,
                    session_key=session_key,
                    emit=emit,
                    model=model,
                    disable_tools=disable_tools,
                    origin=turn_origin,
                    client=client,
                    files=files,
                )
            finally:
                if after is not None:
                    after()

        return self.runs.start(body, agent_id=agent.id, session_key=session_key, origin=origin)

    async def seed_session(
        self,
        agent: AgentProfile,
        session_key: str,
        *,
        note: str | None,
        history: list[Any],
        note_type: str,
    ) -> None:
        """Record a client's earlier conversation, but only into a session with no messages."""
        async with self.runtime.sessions.hold_turn(session_key, timeout=agent.timeout_seconds):
            session = self.runtime.open_session(agent, session_key)
            if any(_is_conversation(entry) for entry in session.entries):
                return
            if note:
                session.transcript.append_custom_message(note_type, note, display=False)
            for message in history:
                session.append_message(message)

    # ---- health -------------------------------------------------------------------------------

    def health(self, *, detailed: bool) -> dict[str, Any]:
        """`/health` (public) or, with `detailed`, the WebSocket `health` answer."""
        out: dict[str, Any] = {
            "status": "ok",
            "version": __version__,
            "uptimeSeconds": round(time.monotonic() - self.started_monotonic, 3),
            "auth": "token" if self.settings.token else "none",
        }
        if detailed:
            runtime = self.runtime
            main = runtime.agent(None)
            out.update(
                startedAt=int(self.started_at * 1000),
                agents=[
                    {"id": agent_id, "model": _model_ref(runtime, agent_id)}
                    for agent_id in runtime.agent_ids()
                ],
                defaultAgent=main.id,
                activeRuns=[run.describe() for run in self.runs.active],
                config=self.watcher.state.describe(),
                stateDir=str(runtime.state_dir),
            )
        return out


def _is_conversation(entry: Entry) -> bool:
    return isinstance(entry, MessageEntry | CustomMessageEntry)


def _model_ref(runtime: Runtime, agent_id: str) -> str | None:
    try:
        return runtime.model_refs(runtime.agent(agent_id))[0]
    except Exception:  # a broken model config must not break health; turns report it
        return None


def gateway_of(connection: HTTPConnection) -> Gateway:
    """The `Gateway` behind a request or WebSocket."""
    gateway: Gateway = connection.app.state.gateway
    return gateway


def gateway_of_app(app: Starlette) -> Gateway:
    """The `Gateway` behind an app made by `create_app`."""
    gateway: Gateway = app.state.gateway
    return gateway


def api_route(endpoint: Endpoint) -> Endpoint:
    """Turn `APIError`s (and unexpected failures) into OpenAI-shaped error responses."""

    async def wrapped(request: Request) -> Response:
        try:
            return await endpoint(request)
        except Exception as exc:
            error = classify(exc)
            gateway_of(request).runtime.observer.metrics.errors.labels(error.code or "api").inc()
            return error.response()

    wrapped.__name__ = endpoint.__name__
    wrapped.__doc__ = endpoint.__doc__
    return wrapped


async def _health(request: Request) -> Response:
    return JSONResponse(gateway_of(request).health(detailed=False))


async def _http_error(request: Request, exc: Exception) -> Response:
    # Unknown paths and methods (and anything that escaped a route) answer in the same error
    # shape as everything else.
    if not isinstance(exc, HTTPException):
        return classify(exc).response()
    status = exc.status_code
    code = HTTP_CODES.get(status, "http_error")
    kind = "invalid_request_error" if status < 500 else "api_error"
    detail = exc.detail
    if status == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    return APIError(status=status, message=str(detail), kind=kind, code=code).response()


HTTP_CODES = {404: "not_found", 405: "method_not_allowed", 422: "unprocessable_entity"}


async def _index(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})


async def _favicon(request: Request) -> Response:
    return FileResponse(STATIC_DIR / "favicon.svg", media_type="image/svg+xml")


class _Revalidated(StaticFiles):
    """Static files that browsers revalidate on every load (cheap with ETags), so an upgraded
    gateway never runs yesterday's script against today's protocol."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers["cache-control"] = "no-cache"
        return response


def create_app(runtime: Runtime, settings: GatewaySettings) -> Starlette:
    """The gateway app for an open `runtime`.

    Its lifespan must run (uvicorn does that; in-process tests use
    `app.router.lifespan_context(app)`), because turns run in the task group it owns.
    """
    from nodmix.gateway.hooks_api import get_hook_run, hook_token, post_hook
    from nodmix.gateway.media_api import (
        UPLOAD_LIMIT_KEY,
        UPLOAD_PATH,
        media_file,
        upload,
        upload_limit,
    )
    from nodmix.gateway.metrics_api import metrics
    from nodmix.gateway.models_api import list_models, retrieve_model
    from nodmix.gateway.openai_api import chat_completions
    from nodmix.gateway.responses_api import create_response
    from nodmix.gateway.tools_api import invoke_tool
    from nodmix.gateway.webassets import vendor_script
    from nodmix.gateway.ws import websocket_endpoint

    gateway = Gateway(runtime, settings)
    runtime.observer.enable_metrics()  # served at /metrics

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with gateway.serving():
            yield

    routes: list[BaseRoute] = [
        Route("/", _index, methods=["GET"]),
        Route("/health", _health, methods=["GET"]),
        Route("/v1/models", api_route(list_models), methods=["GET"]),
        Route("/v1/models/{model:path}", api_route(retrieve_model), methods=["GET"]),
        Route("/v1/chat/completions", api_route(chat_completions), methods=["POST"]),
        Route("/v1/responses", api_route(create_response), methods=["POST"]),
        Route("/tools/invoke", api_route(invoke_tool), methods=["POST"]),
        Route("/hooks/runs/{run_id}", api_route(get_hook_run), methods=["GET"]),
        Route("/hooks/{name}", api_route(post_hook), methods=["POST"]),
        Route("/metrics", metrics, methods=["GET"]),
        Route(UPLOAD_PATH, api_route(upload), methods=["POST"]),
        Route("/media/file", api_route(media_file), methods=["GET"]),
        WebSocketRoute("/ws", websocket_endpoint),
        Route("/favicon.ico", _favicon, methods=["GET"]),
        Route("/static/vendor/{name}", vendor_script, methods=["GET"]),
        Mount("/static", _Revalidated(directory=STATIC_DIR), name="static"),
    ]
    webhooks = channel_webhook_routes(gateway, routes)
    routes += webhooks
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(
                GuardMiddleware,
                token=settings.token,
                hook_token=lambda: hook_token(gateway),
                channel_paths=frozenset(route.path for route in webhooks),
            ),
            Middleware(
                BodyLimitMiddleware,
                max_bytes=settings.max_body_bytes,
                timeout_seconds=settings.request_timeout_seconds,
                path_limits={UPLOAD_PATH: (lambda: upload_limit(gateway), UPLOAD_LIMIT_KEY)},
            ),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: _http_error, Exception: _http_error},
    )
    app.state.gateway = gateway
    return app


__all__ = ["APIError", "Gateway", "create_app", "gateway_of", "gateway_of_app"]
