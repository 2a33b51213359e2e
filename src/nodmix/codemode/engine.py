"""The code-mode engine: runs `exec` and `wait` steps over fresh QuickJS-WASI VMs.

One step:

```
exec: check input ─► (TypeScript transform) ─► boot VM + run program ─┐
wait: check runId + scope ─► wait for a result ─► restore snapshot ───┤
                                                                      ▼
            ┌──────────────► outcome? completed / failed ─► result (run dropped)
            │                    │ pending
            │     dispatch recorded tool calls (over the pending cap: fail, run none)
            │     wait until one settles or the step's time budget ends
            │           │ settled                               │ budget over / yield
            └── deliver results + drain jobs            snapshot ─► park ─► "waiting"
```

Calls that settle within the step's budget are delivered inline, so a program whose tools
answer quickly completes in one `exec` without any `wait`. Nested calls run as tasks of the
engine's own task group, so they keep running while a run is parked, and they are cancelled
when the run completes, fails, expires, is aborted, or the process shuts down.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio
from anyio.abc import TaskGroup

from nodmix.codemode import results
from nodmix.codemode.bridge import StepHandler
from nodmix.codemode.guest import SETUP_SCRIPT
from nodmix.codemode.nested import RunServices, cancel_all, delivery, project, run_nested
from nodmix.codemode.results import ErrorCode, Result
from nodmix.codemode.runs import NestedCall, RunState, RunStore, RunStoreFull, SuspendedRun
from nodmix.codemode.settings import CodeModeSettings
from nodmix.codemode.source import prepare
from nodmix.errors import RuntimeUnavailableError, SandboxError
from nodmix.sandbox import (
    Completed,
    Failed,
    FailureKind,
    Outcome,
    SandboxLimits,
    TypeScriptTransformError,
)

log = logging.getLogger("nodmix.codemode")
CELL_FILENAME = "cell.js"
_SWEEP_SECONDS = 1.0

_FAILURE_CODES: dict[FailureKind, ErrorCode | None] = {
    FailureKind.GUEST_ERROR: None,
    FailureKind.TIMEOUT: "timeout",
    FailureKind.MEMORY: "memory_limit_exceeded",
    FailureKind.STALLED: None,
    FailureKind.ABORTED: "aborted",
    FailureKind.TRAP: "internal_error",
    FailureKind.INTERNAL: "internal_error",
}


class CodeModeEngine:
    """Process-wide: owns the suspended-run store and the task group of nested calls."""

    def __init__(self, store: RunStore | None = None) -> None:
        self.store = store or RunStore()
        self._group: TaskGroup | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CodeModeEngine]:
        """Run the engine's background work; on exit every run and nested call is dropped."""
        async with anyio.create_task_group() as group:
            self._group = group
            group.start_soon(self._sweeper)
            try:
                yield self
            finally:
                for run in self.store.clear():
                    cancel_all(run.state)
                self._group = None
                group.cancel_scope.cancel()

    # ---- exec -----------------------------------------------------------------------------

    async def exec(
        self,
        services: RunServices,
        settings: CodeModeSettings,
        boot_json: str,
        args: dict[str, Any],
        call_id: str,
        namespace_targets: dict[str, Any] | None = None,
    ) -> Result:
        """Run a new cell."""
        self._expire()
        state = RunState(
            scope=services.scope,
            settings=settings,
            catalog=services.catalog,
            boot_json=boot_json,
            parent_call_id=call_id,
            namespace_targets=dict(namespace_targets or {}),
        )
        prepared = prepare(args, settings.languages)
        if prepared.error is not None:
            return self._failed(state, prepared.error, prepared.code_kind)
        source, wrapped = prepared.code, False
        if prepared.language == "typescript":
            from nodmix.sandbox import run_in_worker, transform_typescript

            try:
                source = await run_in_worker(transform_typescript, source)
            except TypeScriptTransformError as exc:
                return self._failed(state, f"TypeScript: {exc}", "typescript_transform_failed")
            except RuntimeUnavailableError as exc:
                return self._failed(state, str(exc), "runtime_unavailable")
            wrapped = True
        handler = StepHandler(state)
        limits = _limits(settings)
        deadline = anyio.current_time() + settings.timeout_ms / 1000
        try:
            cell, outcome = await _in_worker(_boot_and_run, handler, limits, source, wrapped)
        except RuntimeUnavailableError as exc:
            return self._failed(state, str(exc), "runtime_unavailable")
        except SandboxError as exc:
            return self._failed(state, f"code mode sandbox failed: {exc}", "internal_error")
        return await self._guarded_drive(services, state, cell, outcome, deadline)

    # ---- wait -----------------------------------------------------------------------------

    async def wait(self, services: RunServices, args: dict[str, Any], call_id: str) -> Result:
        """Resume a parked run."""
        self._expire()
        empty = services.catalog.telemetry()
        run_id = args.get("runId")
        if not isinstance(run_id, str) or not run_id.strip():
            return results.failed(
                "wait needs the runId of a waiting code-mode result.", "invalid_input", [], empty
            )
        run_id = run_id.strip()
        parked = self.store.get(run_id)
        problem = self._check_wait(parked, run_id, services)
        if problem is not None:
            message, code = problem
            return results.failed(message, code, [], empty)
        assert parked is not None
        parked.resuming = True
        state = parked.state
        state.parent_call_id = call_id
        deadline = anyio.current_time() + state.settings.timeout_ms / 1000
        try:
            if state.yield_request is not None:  # a yield resumes at once
                settled = sorted(
                    (c for c in state.calls.values() if c.done.is_set()),
                    key=lambda c: c.request_id,
                )
            else:
                settled = await _settled_by(state, deadline)
        except BaseException:
            parked.resuming = False
            raise
        if not settled and state.yield_request is None:
            parked.resuming = False
            return results.waiting(
                parked.id,
                "pending_tools",
                [c.describe() for c in state.calls.values()],
                state.output,
                state.catalog.telemetry(),
            )
        self.store.drop(parked.id)
        handler = StepHandler(state)
        items = self._deliveries(services, state, settled)
        try:
            cell, outcome = await _in_worker(
                _restore_and_pump, parked.snapshot, handler, _limits(state.settings), items
            )
        except (SandboxError, RuntimeUnavailableError) as exc:
            failure: ErrorCode = (
                "runtime_unavailable"
                if isinstance(exc, RuntimeUnavailableError)
                else "internal_error"
            )
            return self._failed(state, f"could not restore the code-mode run: {exc}", failure)
        return await self._guarded_drive(services, state, cell, outcome, deadline)

    def _check_wait(
        self, parked: SuspendedRun | None, run_id: str, services: RunServices
    ) -> tuple[str, ErrorCode] | None:
        scope = services.scope
        if parked is None:
            expired = self.store.was_expired(run_id)
            if expired is not None and expired.session_id == scope.session_id:
                return (
                    f"code mode run {run_id} expired and was discarded; start over with exec.",
                    "snapshot_expired",
                )
            return (
                f"code mode run {run_id} is unavailable or expired. Only the runId of a "
                '"waiting" exec/wait result in this conversation can be resumed; '
                "start over with exec.",
                "invalid_input",
            )
        own = parked.state.scope
        if (own.agent_id, own.session_id) != (scope.agent_id, scope.session_id):
            return (
                f"code mode run {run_id} belongs to a different session and cannot be resumed "
                "here; start a new program with exec.",
                "invalid_input",
            )
        if parked.resuming:
            return (
                f"a wait for code mode run {run_id} is already in progress; wait for it to "
                "return instead of calling wait again.",
                "invalid_input",
            )
        return None

    # ---- stepping -------------------------------------------------------------------------

    async def _guarded_drive(
        self,
        services: RunServices,
        state: RunState,
        cell: Any,
        outcome: Outcome,
        deadline: float,
    ) -> Result:
        try:
            return await self._drive(services, state, cell, outcome, deadline)
        except BaseException:
            # Aborted (the turn was cancelled) or broken: nothing of this run may keep running.
            cancel_all(state)
            raise

    async def _drive(
        self,
        services: RunServices,
        state: RunState,
        cell: Any,
        outcome: Outcome,
        deadline: float,
    ) -> Result:
        while True:
            if isinstance(outcome, Completed):
                return self._completed(state, outcome)
            if isinstance(outcome, Failed):
                return self._from_failure(state, outcome)
            if state.overflow:
                return self._failed(
                    state,
                    f"too many pending tool calls: at most "
                    f"{state.settings.max_pending_tool_calls} may be in flight at once, so none "
                    "of the new calls were started. Await calls in smaller batches.",
                    "too_many_pending_tool_calls",
                )
            if state.output_exceeded:
                return self._failed(
                    state, "code mode output limit exceeded.", "output_limit_exceeded"
                )
            self._dispatch(services, state)
            settled = [] if state.yield_request else await _settled_by(state, deadline)
            if not settled:
                return await self._suspend(state, cell)
            items = self._deliveries(services, state, settled)
            outcome = await _in_worker(_deliver_and_pump, cell, items)

    def _dispatch(self, services: RunServices, state: RunState) -> None:
        assert self._group is not None, "CodeModeEngine.running() is not active"
        for call in state.new_calls:
            state.calls[call.request_id] = call
            self._group.start_soon(run_nested, services, state, call)
        state.new_calls.clear()

    def _deliveries(
        self, services: RunServices, state: RunState, settled: list[NestedCall]
    ) -> list[tuple[int, bool, str]]:
        items: list[tuple[int, bool, str]] = []
        if state.yield_request is not None:
            request_id, reason = state.yield_request
            items.append((request_id, True, json.dumps({"status": "yielded", "reason": reason})))
            state.yield_request = None
        for call in settled:
            state.calls.pop(call.request_id, None)
            state.catalog.counters.call += 1
            ok, payload = delivery(call)
            if not ok:
                state.nested_errors.add(payload)
            items.append((call.request_id, ok, payload))
            project(services, call)
        return items

    async def _suspend(self, state: RunState, cell: Any) -> Result:
        reason = "yield" if state.yield_request is not None else "pending_tools"
        try:
            blob = await _in_worker(cell.snapshot)
        except SandboxError as exc:
            return self._failed(state, f"could not suspend the program: {exc}", "internal_error")
        if len(blob) > state.settings.max_snapshot_bytes:
            return self._failed(
                state,
                f"code mode snapshot limit exceeded: the suspended program needs {len(blob)} "
                f"bytes, the limit is {state.settings.max_snapshot_bytes}. Keep less data in "
                "memory while tools run.",
                "snapshot_limit_exceeded",
            )
        try:
            parked = self.store.park(state, blob, reason)
        except RunStoreFull:
            return self._failed(
                state,
                "too many suspended code mode runs; finish or abandon some first.",
                "invalid_input",
            )
        if debug_enabled():
            log.info("code mode run %s suspended (%s, %d bytes)", parked.id, reason, len(blob))
        return results.waiting(
            parked.id,
            "yield" if reason == "yield" else "pending_tools",
            [c.describe() for c in state.calls.values()],
            state.output,
            state.catalog.telemetry(),
        )

    # ---- results --------------------------------------------------------------------------

    def _completed(self, state: RunState, outcome: Completed) -> Result:
        cancel_all(state)
        if state.output_exceeded:
            return self._failed(state, "code mode output limit exceeded.", "output_limit_exceeded")
        if len(outcome.value_json.encode()) > state.settings.max_output_bytes:
            return self._failed(
                state,
                f"code mode output limit exceeded: the returned value is larger than "
                f"{state.settings.max_output_bytes} bytes; return a summary instead.",
                "output_limit_exceeded",
            )
        return results.completed(outcome.value(), state.output, state.catalog.telemetry())

    def _from_failure(self, state: RunState, outcome: Failed) -> Result:
        code = _FAILURE_CODES.get(outcome.kind)
        message = outcome.message
        if outcome.kind is FailureKind.GUEST_ERROR:
            if message.startswith("SyntaxError"):
                code = "invalid_input"
            elif any(message.startswith(f"Error: {e}") for e in state.nested_errors):
                code = "nested_tool_failed"
        if state.output_exceeded:
            code, message = "output_limit_exceeded", "code mode output limit exceeded."
        return self._failed(state, message, code)

    def _failed(self, state: RunState, message: str, code: ErrorCode | None) -> Result:
        cancel_all(state)
        return results.failed(message, code, state.output, state.catalog.telemetry())

    # ---- expiry ---------------------------------------------------------------------------

    def _expire(self) -> None:
        for run in self.store.expire():
            cancel_all(run.state)

    async def _sweeper(self) -> None:
        while True:
            await anyio.sleep(_SWEEP_SECONDS)
            self._expire()


def debug_enabled() -> bool:
    """`NODMIX_DEBUG_CODE_MODE=1`."""
    import os

    return os.environ.get("NODMIX_DEBUG_CODE_MODE", "") not in ("", "0", "false")


def _limits(settings: CodeModeSettings) -> SandboxLimits:
    return SandboxLimits(
        timeout=settings.timeout_ms / 1000, memory_bytes=settings.memory_limit_bytes
    )


async def _settled_by(state: RunState, deadline: float) -> list[NestedCall]:
    """Nested calls that have settled, waiting until at least one has or the deadline passes."""
    while True:
        settled = [c for c in state.calls.values() if c.done.is_set()]
        if settled or not state.calls:
            return sorted(settled, key=lambda c: c.request_id)
        state.changed = anyio.Event()
        remaining = deadline - anyio.current_time()
        if remaining <= 0:
            return []
        with anyio.move_on_after(remaining):
            await state.changed.wait()


async def _in_worker(fn: Any, *args: Any) -> Any:
    from nodmix.sandbox import run_in_worker

    return await run_in_worker(fn, *args)


def _boot_and_run(
    handler: StepHandler, limits: SandboxLimits, source: str, wrapped: bool
) -> tuple[Any, Outcome]:
    from nodmix.sandbox import Cell

    cell = Cell.boot(SETUP_SCRIPT, handler, limits=limits)
    return cell, cell.run(source, filename=CELL_FILENAME, wrapped=wrapped)


def _deliver_and_pump(cell: Any, items: list[tuple[int, bool, str]]) -> Outcome:
    for request_id, ok, payload in items:
        cell.deliver(request_id, ok, payload)
    return cell.pump()  # type: ignore[no-any-return]


def _restore_and_pump(
    blob: bytes, handler: StepHandler, limits: SandboxLimits, items: list[tuple[int, bool, str]]
) -> tuple[Any, Outcome]:
    from nodmix.sandbox import Cell

    cell = Cell.restore(blob, handler, limits=limits)
    return cell, _deliver_and_pump(cell, items)
