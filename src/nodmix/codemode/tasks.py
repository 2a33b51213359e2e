"""Where nested tool calls run: a task per call, owned by the engine.

On asyncio (the gateway and the CLI) each call is a plain `asyncio` task: starting one costs a
few microseconds, against ~40 µs for a task-group child, and a cell awaiting a hundred quick
tools starts a hundred of them. Each call is stopped through its own `CallCancel` (see
`nested.dispatch`), which cancels the call's task directly instead of entering an anyio cancel
scope for every call (~8 µs each), and `cancel()` ends them all at shutdown. An unexpected
exception is logged instead of tearing down the engine's task group. Other backends use the
task group, and each call an anyio cancel scope.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import sniffio
from anyio.abc import TaskGroup

log = logging.getLogger("nodmix.codemode")


def loop_context() -> contextvars.Context:
    """A copy of the current context for loop callbacks that run outside any task (a worker
    asks the loop to run them): anyio (cancel scopes, task groups) needs to know which async
    library it is on there, so it is named explicitly."""
    context = contextvars.copy_context()
    context.run(sniffio.current_async_library_cvar.set, "asyncio")
    return context


class CallCancel:
    """Stops one nested call: before its task starts (the tool then never runs) or while it
    runs. The call's task registers itself with `running_in` and catches its own cancellation
    with `caught` (so the call still ends with a cancelled result)."""

    __slots__ = ("cancel_called", "_scope", "_task")

    def __init__(self) -> None:
        self.cancel_called = False
        self._task: asyncio.Task[Any] | None = None
        self._scope: anyio.CancelScope | None = None

    def cancel(self) -> None:
        """Stop the call (on the event loop thread; idempotent)."""
        if self.cancel_called:
            return
        self.cancel_called = True
        if self._task is not None:
            self._task.cancel()
        elif self._scope is not None:
            self._scope.cancel()

    def running_in(self, task: asyncio.Task[Any] | None) -> None:
        """The call runs in `task` from now on (None once it no longer awaits anything); a
        call cancelled just before is stopped at its first await, like in a cancelled scope."""
        self._task = task
        if task is not None and self.cancel_called:
            task.cancel()

    def scope(self) -> anyio.CancelScope:
        """A cancel scope for a call that runs outside an asyncio task (other backends)."""
        scope = self._scope = anyio.CancelScope()
        if self.cancel_called:
            scope.cancel()
        return scope

    def caught(self, exc: BaseException) -> bool:
        """True when `exc`, raised in the call's task, is this handle's own cancellation (and
        nothing else, such as shutdown, cancelled the task as well): the call ends cancelled
        instead of propagating it."""
        task = self._task
        if not self.cancel_called or task is None or not isinstance(exc, asyncio.CancelledError):
            return False
        self._task = None
        return task.uncancel() == 0


class NestedTasks:
    """The running nested calls of one engine."""

    def __init__(self, group: TaskGroup) -> None:
        """Start tasks in `group`'s event loop (call from inside it)."""
        self._group = group
        self._loop = (
            asyncio.get_running_loop() if sniffio.current_async_library() == "asyncio" else None
        )
        self._tasks: set[asyncio.Task[Any]] = set()

    def __len__(self) -> int:
        """Tasks started and not finished yet."""
        return len(self._tasks)

    def start(self, fn: Callable[..., Coroutine[Any, Any, None]], *args: Any) -> None:
        """Run `fn(*args)` as a new task (on the event loop thread)."""
        if self._loop is None:
            self._group.start_soon(fn, *args)
            return
        task = self._loop.create_task(self._run(fn(*args)))
        if not task.done():  # (an eager task may already have finished)
            self._tasks.add(task)

    async def _run(self, call: Coroutine[Any, Any, None]) -> None:
        # Bookkeeping inside the task rather than in a done callback, which would cost the
        # loop another round per call.
        try:
            await call
        except Exception:
            log.error("a nested tool call task failed", exc_info=True)
        finally:
            task = asyncio.current_task()
            if task is not None:
                self._tasks.discard(task)

    def cancel(self) -> None:
        """Cancel every running task (shutdown); the task group's own are cancelled with it."""
        for task in list(self._tasks):
            task.cancel()

    async def wait(self) -> None:
        """Wait until the tasks cancelled by `cancel()` have ended (shielded)."""
        pending = list(self._tasks)
        if pending:
            with anyio.CancelScope(shield=True):
                await asyncio.wait(pending)
