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

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.lowlevel
import sniffio
from anyio.abc import TaskGroup

from nodmix.codemode import fanout, results
from nodmix.codemode.bridge import StepHandler
from nodmix.codemode.client_calls import ClientCalls, is_client_call, waiting_reason
from nodmix.codemode.detach import Detached, DetachedRuns, start_detached
from nodmix.codemode.handoff import Handoff
from nodmix.codemode.locations import SourceMap, output_too_large
from nodmix.codemode.nested import RunServices, cancel_all
from nodmix.codemode.quick import QuickLane
from nodmix.codemode.restore import adopt
from nodmix.codemode.results import ErrorCode, Result, returned
from nodmix.codemode.run_results import run_completed, run_failed, run_failure
from nodmix.codemode.runs import (
    RunNotSaved,
    RunState,
    RunStore,
    RunStoreFull,
    Settled,
    SuspendedRun,
    SuspendedRunStore,
)
from nodmix.codemode.settings import CodeModeSettings
from nodmix.codemode.source import prepare
from nodmix.codemode.steps import (
    CellRef,
    boot_and_run,
    debug_enabled,
    deliver_and_drive,
    guest_step,
    in_worker,
    limits_for,
    raise_step_error,
    restore_and_pump,
    settled_by,
    snapshot_and_close,
    step,
)
from nodmix.codemode.tasks import NestedTasks, loop_context
from nodmix.codemode.wait_checks import wait_problem
from nodmix.crashpoints import crash_point
from nodmix.errors import RuntimeUnavailableError, SandboxError
from nodmix.sandbox import (
    Completed,
    Failed,
    Outcome,
    TypeScriptTransformError,
)

log = logging.getLogger("nodmix.codemode")
_SWEEP_SECONDS = 1.0


class CodeModeEngine:
    """Process-wide: owns the suspended-run store and the task group of nested calls."""

    def __init__(
        self, store: SuspendedRunStore | None = None, *, group: TaskGroup | None = None
    ) -> None:
        """`group` is a task group owned by the caller (the runtime); without one, use
        `running()`."""
        # Not `store or RunStore()`: an empty store has len() 0 and is falsy, so an injected
        # store (e.g. with a test clock) would silently be replaced.
        self.store: SuspendedRunStore = store if store is not None else RunStore()
        self._tasks: NestedTasks | None = None
        self._retiring = False
        self.client_calls = ClientCalls()
        """Calls of client tools held for the application that started the turn."""
        self._detached = DetachedRuns()
        """Runs whose programs returned with calls still running (`codemode.detach`)."""
        if group is not None:
            self.attach(group)

    def attach(self, group: TaskGroup) -> None:
        """Run nested calls and the expiry sweeper in `group`'s event loop."""
        self._tasks = NestedTasks(group)
        group.start_soon(self._sweeper)

    def retire(self) -> None:
        """The process is stopping: turns cancelled from now on leave their runs where they
        are (a durable store keeps them for the next start) instead of aborting them."""
        self._retiring = True

    def recorded(self, call_id: str) -> None:
        """The result of `exec`/`wait` call `call_id` is in the transcript (the agent loop
        says so): a run that call resumed no longer needs to survive a restart."""
        self.store.recorded(call_id)
        crash_point("codemode.result-recorded")

    def shutdown(self) -> None:
        """Drop every suspended run and cancel its nested calls (process shutdown)."""
        for run in self.store.clear():
            cancel_all(run.state)
        if self._tasks is not None:
            self._tasks.cancel()
        self._tasks = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[CodeModeEngine]:
        """Run the engine's background work; on exit every run and nested call is dropped."""
        async with anyio.create_task_group() as group:
            self.attach(group)
            try:
                yield self
            finally:
                tasks = self._tasks
                self.shutdown()
                if tasks is not None:
                    await tasks.wait()
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
        services.catalog.counters.steps += 1
        state = RunState(
            scope=services.scope,
            settings=settings,
            catalog=services.catalog,
            boot_json=boot_json,
            parent_call_id=call_id,
            turn_id=services.scope.run_id,
            namespace_targets=dict(namespace_targets or {}),
        )
        prepared = prepare(args, settings.languages, settings.max_source_bytes)
        if prepared.error is not None:
            return run_failed(state, prepared.error, prepared.code_kind)
        source, wrapped = prepared.code, False
        if prepared.language == "typescript":
            from nodmix.sandbox import transform_typescript

            try:
                source = await in_worker(transform_typescript, source)
            except TypeScriptTransformError as exc:
                return run_failed(state, f"TypeScript: {exc}", "typescript_transform_failed")
            except RuntimeUnavailableError as exc:
                return run_failed(state, str(exc), "runtime_unavailable")
            wrapped = True
        state.source_map = SourceMap(prepared.code, source if wrapped else None)
        handler = StepHandler(state)
        limits = limits_for(settings)
        deadline = anyio.current_time() + settings.timeout_ms / 1000
        ref = CellRef(handoff=self._fast_lane(services, state, deadline))
        try:
            outcome = await step(ref, state, boot_and_run, ref, handler, limits, source, wrapped)
        except RuntimeUnavailableError as exc:
            return run_failed(state, str(exc), "runtime_unavailable")
        except SandboxError as exc:
            return run_failed(state, f"code mode sandbox failed: {exc}", "internal_error")
        except BaseException:
            cancel_all(state)  # the step may have dispatched calls through its fast lane
            raise
        return await self._guarded_drive(services, state, ref, outcome, deadline)

    # ---- wait -----------------------------------------------------------------------------

    async def wait(
        self,
        services: RunServices,
        args: dict[str, Any],
        call_id: str,
        namespace_targets: dict[str, Any] | None = None,
    ) -> Result:
        """Resume a parked run (`namespace_targets` serve a run written by an earlier
        process, which has none of its own)."""
        self._expire()
        services.catalog.counters.steps += 1
        run_id = args.get("runId")
        if not isinstance(run_id, str) or not run_id.strip():
            return results.failed(
                "wait needs the runId of a waiting exec/wait result; to run a new program, "
                "call exec.",
                "invalid_input",
                [],
                services.catalog.telemetry(),
            )
        run_id = run_id.strip()
        parked = self.store.get(run_id)
        problem = wait_problem(self.store, parked, run_id, services.scope)
        if problem is not None:
            message, code = problem
            return results.failed(message, code, [], services.catalog.telemetry())
        assert parked is not None
        if parked.detached:
            adopt(parked, services, namespace_targets)
            self._dispatch(services, parked.state)  # re-queued calls and re-armed timers
            if parked.state.on_settle is not None:
                parked.state.on_settle()  # the file now shows the calls that started
        parked.resuming = True
        try:
            result = await self._resume(services, parked, call_id)
        except BaseException:
            # The wait was cancelled (its turn was aborted) or broke. The run ends here, like a
            # cancelled exec: its snapshot is dropped, its nested calls are cancelled, and a
            # later wait on the id is told the run was aborted. (Leaving it parked would keep
            # nested calls running for a turn that no longer exists.) A process that is
            # stopping keeps it instead, for the next start.
            if not self._retiring:
                self.store.drop(parked.id)
                self.store.mark_ended(parked.id, parked.state.scope, "aborted")
            cancel_all(parked.state)
            raise
        crash_point("codemode.resume-finished")
        return result

    async def _resume(self, services: RunServices, parked: SuspendedRun, call_id: str) -> Result:
        state = parked.state
        state.parent_call_id = call_id
        state.turn_id = services.scope.run_id
        deadline = anyio.current_time() + state.settings.timeout_ms / 1000
        if state.yield_request is not None:  # a yield resumes at once
            settled = state.settled()
        else:
            settled = await settled_by(state, deadline)
        if not settled and state.yield_request is None:
            parked.resuming = False
            returned(state)
            return results.waiting(
                parked.id,
                waiting_reason(state),
                [c.describe() for c in (*state.calls.values(), *state.queued)],
                state.output,
                state.catalog.telemetry(),
            )
        # Out of the store, but restorable until this wait's result is in the transcript.
        self.store.consume(parked.id, call_id)
        # Remembered so that a second wait on this id (concurrent, or after the result came
        # back) is told it was resumed, not that it is unknown and should be started over.
        self.store.mark_ended(parked.id, state.scope, "resumed")
        crash_point("codemode.resume-taken")
        handler = StepHandler(state)
        items = self._deliveries(services, state, settled)
        ref = CellRef(handoff=self._fast_lane(services, state, deadline))
        try:
            outcome = await step(
                ref,
                state,
                restore_and_pump,
                ref,
                parked.snapshot,
                handler,
                limits_for(state.settings),
                items,
            )
        except (SandboxError, RuntimeUnavailableError) as exc:
            failure: ErrorCode = (
                "runtime_unavailable"
                if isinstance(exc, RuntimeUnavailableError)
                else "internal_error"
            )
            return run_failed(state, f"could not restore the code-mode run: {exc}", failure)
        return await self._guarded_drive(services, state, ref, outcome, deadline)

    # ---- stepping -------------------------------------------------------------------------

    async def _guarded_drive(
        self,
        services: RunServices,
        state: RunState,
        ref: CellRef,
        outcome: Outcome,
        deadline: float,
    ) -> Result:
        try:
            raise_step_error(ref.handoff)
            return await self._drive(ref, services, state, outcome, deadline)
        except BaseException:
            # Aborted (the turn was cancelled) or broken: nothing of this run may keep running.
            cancel_all(state)
            raise

    async def _drive(
        self,
        ref: CellRef,
        services: RunServices,
        state: RunState,
        outcome: Outcome,
        deadline: float,
    ) -> Result:
        cell = ref.cell
        while True:
            # Overflow first: the guest usually does not catch the rejection (`Promise.all`
            # rejects at once), and whatever it did next, none of the batch may run.
            if state.overflow:
                settings = state.settings
                return run_failed(
                    state,
                    f"too many pending tool calls: at most {settings.max_pending_tool_calls} "
                    f"run at once and {settings.max_queued_tool_calls} more may wait in the "
                    "queue, so none of the new calls were started. Await calls in smaller "
                    "batches.",
                    "too_many_pending_tool_calls",
                )
            if isinstance(outcome, Completed):
                return run_completed(state, outcome, lambda: self._detach(services, state))
            if isinstance(outcome, Failed):
                return run_failure(state, outcome)
            if state.output_exceeded:
                return run_failed(state, output_too_large(state), "output_limit_exceeded")
            self._dispatch(services, state)
            settled = (
                []
                if state.yield_request
                else await settled_by(state, deadline, stop_on_approval=True)
            )
            if not settled:
                return await self._suspend(state, ref)
            items = self._deliveries(services, state, settled)
            ref.handoff = self._fast_lane(services, state, deadline)
            outcome = await step(ref, state, deliver_and_drive, ref, cell, items)
            raise_step_error(ref.handoff)

    def _fast_lane(self, services: RunServices, state: RunState, deadline: float) -> Handoff | None:
        """A `Handoff` for the next worker step (asyncio only), attached to `state`, with the
        lane that runs quick tools on the worker."""
        if sniffio.current_async_library() != "asyncio":
            return None
        loop, context = asyncio.get_running_loop(), loop_context()
        handoff = Handoff(
            loop,
            state,
            lambda: self._dispatch(services, state),
            lambda settled: self._deliveries(services, state, settled),
            time.monotonic() + (deadline - anyio.current_time()),
            quick=QuickLane(loop, services, state, context),
            context=context,
        )
        state.handoff = handoff
        return handoff

    def _dispatch(self, services: RunServices, state: RunState) -> None:
        assert self._tasks is not None, "CodeModeEngine.running() is not active"
        held = [c for c in state.new_calls if is_client_call(c)]
        if held:
            state.new_calls[:] = [c for c in state.new_calls if not is_client_call(c)]
            for call in held:
                self.client_calls.hold(services, state, call)
        fanout.start_recorded(self._tasks.start, services, state)

    def _detach(self, services: RunServices, state: RunState) -> Detached:
        assert self._tasks is not None, "CodeModeEngine.running() is not active"
        left = start_detached(self._tasks.start, services, state)
        if left.running:
            self._detached.add(state)
        return left

    def _deliveries(
        self, services: RunServices, state: RunState, settled: list[Settled]
    ) -> list[tuple[int, bool, str]]:
        assert self._tasks is not None, "CodeModeEngine.running() is not active"
        return fanout.deliveries(self._tasks.start, services, state, settled)

    async def _suspend(self, state: RunState, ref: CellRef) -> Result:
        reason = "yield" if state.yield_request is not None else waiting_reason(state)
        try:
            blob = await guest_step(ref, snapshot_and_close, ref.cell)
        except SandboxError as exc:
            return run_failed(state, f"could not suspend the program: {exc}", "internal_error")
        if len(blob) > state.settings.max_snapshot_bytes:
            return run_failed(
                state,
                f"code mode snapshot limit exceeded: the suspended program needs {len(blob)} "
                f"bytes, the limit is {state.settings.max_snapshot_bytes}. Keep less data in "
                "memory while tools run.",
                "snapshot_limit_exceeded",
            )
        try:
            parked = self.store.park(state, blob, reason)
        except RunStoreFull as exc:
            return run_failed(state, str(exc), "invalid_input")
        try:
            await self.store.saved(parked)  # the model is told `waiting` only once it is
        except RunNotSaved as exc:
            self.store.drop(parked.id)
            return run_failed(state, f"could not save the suspended run: {exc}", "internal_error")
        crash_point("codemode.park-saved")
        if debug_enabled():
            log.info("code mode run %s suspended (%s, %d bytes)", parked.id, reason, len(blob))
        returned(state)
        return results.waiting(
            parked.id,
            reason,
            [c.describe() for c in (*state.calls.values(), *state.queued)],
            state.output,
            state.catalog.telemetry(),
        )

    # ---- abort ----------------------------------------------------------------------------

    def abort_turn(self, run_id: str) -> int:
        """An agent turn was cancelled: drop the runs it left parked and cancel their calls.

        A cancelled `exec`/`wait` cleans up after itself. This covers the gap between steps: a
        turn aborted while the model is streaming after a `waiting` result would otherwise
        leave that run's nested calls running until the snapshot TTL. A later `wait` on such a
        run fails with code `aborted`. The calls of programs that returned without awaiting
        them (`codemode.detach`) are cancelled too. Returns how many runs were dropped or had
        such calls.
        """
        if self._retiring:
            return 0  # the process is stopping: the runs wait for the next start
        gone = self.store.take(lambda run: run.state.turn_id == run_id)
        for run in gone:
            self.store.mark_ended(run.id, run.state.scope, "aborted")
            cancel_all(run.state)
        return len(gone) + self._detached.abort_turn(run_id)

    # ---- expiry ---------------------------------------------------------------------------

    def _expire(self) -> None:
        for run in self.store.expire():
            cancel_all(run.state)
        self._detached.sweep()

    async def _sweeper(self) -> None:
        while True:
            await anyio.sleep(_SWEEP_SECONDS)
            self._expire()
