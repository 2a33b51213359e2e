"""What every route of the gateway shares: the `Gateway` (the runtime it serves, its settings,
running turns, config state) and how a request finds it (`gateway_of`).

The routes import this module; `app.py` imports the routes and builds the ASGI app.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from starlette.applications import Starlette
from starlette.requests import HTTPConnection, Request
from starlette.responses import Response

from nodmix import __version__
from nodmix.agents import AgentProfile
from nodmix.events import EventSink
from nodmix.gateway.approval_fanout import ApprovalFanout
from nodmix.gateway.approvals_shared import (
    APPROVAL_ANSWER,
    ApprovalRecorder,
    ForwardedAnswers,
    answer_forwarded,
    open_shared_approvals,
)
from nodmix.gateway.errors import classify, not_found
from nodmix.gateway.media_writes import InboxClaims
from nodmix.gateway.reload import ConfigWatcher
from nodmix.gateway.runs import ActiveRun, RunTracker
from nodmix.gateway.session_pointers import (
    CLIENT_CALLS_FILE,
    RESPONSES_FILE,
    open_session_pointers,
)
from nodmix.gateway.settings import GatewaySettings
from nodmix.gateway.stateless import StatelessSessions
from nodmix.origin import TurnOrigin
from nodmix.runtime import Runtime
from nodmix.runtime.client_results import ClientTurn
from nodmix.runtime.reconfigure import apply_config

if TYPE_CHECKING:
    from nodmix.media.files import InboundFile

Endpoint = Callable[[Request], Awaitable[Response]]


class Gateway:
    """What every route shares: the runtime, the settings, running turns, config state."""

    def __init__(self, runtime: Runtime, settings: GatewaySettings) -> None:
        """Serve `runtime` (already open) as `settings` say."""
        self.runtime = runtime
        self.settings = settings
        self.runs = RunTracker()
        self.inbox_claims = InboxClaims()
        self.approvals = ApprovalFanout(runtime.security.broker, self.event)
        """WebSocket clients told about approval requests (`gateway/approvals.py`)."""
        self.shared_approvals = open_shared_approvals(runtime.state_dir)
        """Requests of every replica (postgres backend; `gateway/approvals_shared.py`)."""
        if self.shared_approvals is not None:  # a chat /approve for another replica's turn
            forwarded = ForwardedAnswers(self.shared_approvals, runtime.state.coordination)
            runtime.security.remote.source = forwarded
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
    async def serving(
        self, *services: Callable[[], Coroutine[Any, Any, None]]
    ) -> AsyncIterator[Gateway]:
        """Accept turns (and watch the config) inside the block, running `services` (the
        channels, automation) beside them; drain turns on exit."""
        async with anyio.create_task_group() as group:
            self._group = group
            broker = self.runtime.security.broker
            if self.shared_approvals is not None:
                recorder = ApprovalRecorder(self.shared_approvals)
                recorder.attach(broker)
                group.start_soon(recorder.detach_on_exit, broker)
            self.approvals.start()
            group.start_soon(self.approvals.stop_on_exit)
            coordination = self.runtime.state.coordination
            stop_listening = coordination.listen(self._deliver)
            group.start_soon(coordination.serve)
            if self.settings.watch_config:
                group.start_soon(self.watcher.watch)
            for service in services:
                group.start_soon(service)
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
            answer_forwarded(self.runtime.security.broker, payload)

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

    # ---- health -------------------------------------------------------------------------------

    def health(self, *, detailed: bool) -> dict[str, Any]:
        """`/health` (public) or, with `detailed`, the WebSocket `health` answer."""
        out: dict[str, Any] = {
            "status": "ok",
            "version": __version__,
            "uptimeSeconds": round(time.monotonic() - self.started_monotonic, 3),
            "auth": "token" if self.settings.token else "none",
            "instance": self.settings.instance,
        }
        problem = self.runtime.state.problem()
        if problem is not None:  # a newer Nodmix migrated the state database
            out.update(status="degraded", state=problem)
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
