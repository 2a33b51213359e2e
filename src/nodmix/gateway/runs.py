"""Turns the gateway is running, owned by one task group so shutdown can wait for them.

A turn started for a WebSocket client outlives that connection (a page reload must not lose
the answer, which lands in the transcript either way); a turn started for an HTTP request is
cancelled when its client goes away. Either way it runs here, so that on shutdown the gateway
can stop taking new turns, give running ones a grace period, and cancel the rest (the loop
then writes a valid transcript with `stopReason: "aborted"`).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from nodmix.gateway.errors import APIError, RunCancelled

__all__ = ["ActiveRun", "RunCancelled", "RunTracker"]

RunBody = Callable[[], Awaitable[Any]]


@dataclass(slots=True, kw_only=True)
class ActiveRun:
    """One turn (or command) in flight."""

    run_id: str
    agent_id: str
    session_key: str
    origin: str
    """Who started it: `ws`, `http` or `tools`."""
    started_at: float = field(default_factory=time.time)
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)
    done: anyio.Event = field(default_factory=anyio.Event)
    outcome: Any = None
    error: BaseException | None = None
    completed: bool = False
    _callbacks: list[Callable[[], None]] = field(default_factory=list)

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call `callback()` when the run ends (at once if it already has)."""
        if self.done.is_set():
            callback()
        else:
            self._callbacks.append(callback)

    def settle(self) -> None:
        """Mark the run finished and tell whoever asked (`on_done`); called by the tracker."""
        self.done.set()
        callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def cancel(self) -> None:
        """Abort the run (a no-op once it finished: every HTTP turn ends with a cancel, and
        cancelling a scope formats the current task's repr, ~50 µs)."""
        if not self.done.is_set():
            self.scope.cancel()

    async def result(self) -> Any:
        """Wait for the run and return its outcome.

        Raises:
            RunCancelled: the run was aborted.
            Exception: whatever the run raised.
        """
        await self.done.wait()
        if self.error is not None:
            raise self.error
        if not self.completed:
            raise RunCancelled(f"run {self.run_id} was aborted")
        return self.outcome

    def describe(self) -> dict[str, Any]:
        """The run as the WebSocket protocol lists it."""
        return {
            "runId": self.run_id,
            "agentId": self.agent_id,
            "sessionKey": self.session_key,
            "origin": self.origin,
            "startedAt": int(self.started_at * 1000),
        }


class RunTracker:
    """Starts runs in a task group it owns and drains them on shutdown."""

    def __init__(self) -> None:
        """An idle tracker; `async with tracker.running(grace):` makes it accept runs."""
        self._group: TaskGroup | None = None
        self._runs: dict[str, ActiveRun] = {}
        self._closing = False
        self._idle = anyio.Event()
        self._idle.set()

    @property
    def active(self) -> list[ActiveRun]:
        """Runs in flight, oldest first."""
        return list(self._runs.values())

    def get(self, run_id: str) -> ActiveRun | None:
        """A run in flight by id."""
        return self._runs.get(run_id)

    def busy_sessions(self) -> set[str]:
        """Session keys with a run in flight."""
        return {run.session_key for run in self._runs.values()}

    def abort_all(self) -> None:
        """Refuse new runs and abort every run in flight (a forced shutdown)."""
        self._closing = True
        for run in self._runs.values():
            run.cancel()

    @contextlib.asynccontextmanager
    async def running(self, grace_seconds: float) -> AsyncIterator[RunTracker]:
        """Accept runs inside the block; on exit wait up to `grace_seconds`, then cancel."""
        async with anyio.create_task_group() as group:
            self._group, self._closing = group, False
            try:
                yield self
            finally:
                self._closing = True
                with anyio.CancelScope(shield=True), anyio.move_on_after(grace_seconds):
                    await self._idle.wait()
                group.cancel_scope.cancel()
                self._group = None

    def start(self, body: RunBody, *, agent_id: str, session_key: str, origin: str) -> ActiveRun:
        """Run `body()` in the background and return its handle at once.

        Raises:
            APIError: the gateway is shutting down (or was never started).
        """
        if self._group is None or self._closing:
            raise APIError(
                status=503,
                message="the gateway is shutting down",
                kind="api_error",
                code="shutting_down",
            )
        run = ActiveRun(
            run_id=f"run_{uuid.uuid4().hex[:16]}",
            agent_id=agent_id,
            session_key=session_key,
            origin=origin,
        )
        self._runs[run.run_id] = run
        if self._idle.is_set():
            self._idle = anyio.Event()
        self._group.start_soon(self._drive, run, body)
        return run

    async def _drive(self, run: ActiveRun, body: RunBody) -> None:
        try:
            with run.scope:
                run.outcome = await body()
                run.completed = True
        except Exception as exc:  # handed to whoever awaits the result
            run.error = exc
        finally:
            self._runs.pop(run.run_id, None)
            run.settle()
            if not self._runs:
                self._idle.set()
