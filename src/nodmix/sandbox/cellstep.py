"""`CellBase`: stepping one guest program in one VM (run, deliveries, pumps, outcomes).

`Cell` (in `cell.py`) adds how a cell is made and kept: boot from a template, restore from a
snapshot, and snapshot. This part only drives a VM it is given, inside `StepScope`s that
charge the execution budget, and turns VM failures into `Failed` outcomes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from types import TracebackType
from typing import Final, Self

from nodmix.errors import SandboxError
from nodmix.sandbox import outcomes, templates
from nodmix.sandbox.base import Completed, Failed, FailureKind, Outcome, Pending
from nodmix.sandbox.bridge import Bridge
from nodmix.sandbox.prelude import wrap_async
from nodmix.sandbox.vm import PROMISE_FULFILLED, PROMISE_PENDING, VM
from nodmix.sandbox.vmcode import eval_script
from nodmix.sandbox.vmstate import (
    DeadlineExceeded,
    GuestThrow,
    StepScope,
    VMOutOfMemory,
    VMTrapped,
)

#: Describing a guest error may run guest getters; it gets this much time even when the
#: budget is spent (the error itself is what ended the step).
_DESCRIBE_GRACE: Final = 0.1
VM_FAILURES: Final = (GuestThrow, VMTrapped, DeadlineExceeded, VMOutOfMemory)
_FINAL: Final = (Completed, Failed)


class CellBase:
    """One VM running one guest program; see `cell.py` for the lifecycle."""

    def __init__(self, vm: VM, bridge: Bridge, filename: str) -> None:
        """Internal: use `Cell.boot` or `Cell.restore`."""
        self._vm = vm
        self._bridge = bridge
        self._filename = filename
        self._settle = self._finish = self._describe = self._promise = 0
        self._final: Completed | Failed | None = None
        self._used = 0.0
        self._lock = threading.Lock()
        self._stdio = b""
        self._memory_bytes = 0
        self._template: templates.Template | None = None
        bridge.attach(vm)

    # -- public API --------------------------------------------------------------------------

    def run(self, source: str, *, filename: str = "cell.js", wrapped: bool = False) -> Outcome:
        """Evaluate the guest program and drain jobs.

        Args:
            source: The program body. It is wrapped as `(async () => {<source>\\n})()` so
                top-level `await` and `return` work; its return value is the final value.
            filename: Name used in stack traces and error locations (never a host path).
            wrapped: `source` is already a complete script whose completion value is the
                result promise (e.g. TypeScript transformed after `wrap_async`).

        Raises:
            SandboxError: The cell already ran, is finished, or is in use.
        """
        if self._promise or self._final is not None:
            raise SandboxError("this cell has already run a program")
        self._check_open()
        self._filename = filename
        code = source if wrapped else wrap_async(source)
        return self._drive(lambda: self._start(code))

    def pump(self) -> Outcome:
        """Drain jobs after deliveries and report the outcome (final outcomes repeat)."""
        if self._final is not None:
            return self._final
        if not self._promise:
            raise SandboxError("pump() before run()")
        self._check_open()
        return self._drive(self._evaluate)

    def deliver(self, request_id: int, ok: bool, value: str) -> None:
        """Settle a pending request; guest reactions run at the next `pump()`.

        Args:
            request_id: An id from `HostHandler.on_request` that is still outstanding.
            ok: Resolve (True) or reject (False).
            value: JSON text of the value when `ok` (invalid JSON rejects the request), else
                the rejection message (the guest sees `new Error(message)`).

        Raises:
            SandboxError: Unknown id, or the cell is finished. A failure inside the VM (e.g.
                the budget ran out) is not raised: the next `pump()` returns it.
        """
        if self._final is not None:
            raise SandboxError("deliver() on a finished cell")
        self._check_open()
        message = self._bridge.settle_message(request_id, ok, value)
        self._drive(lambda: self._settle_request(message))

    def resume(self, deliveries: Iterable[tuple[int, bool, str]]) -> Outcome:
        """`deliver` each `(request_id, ok, value)`, then `pump`, in one entry into the VM.

        Raises:
            SandboxError: An id is not outstanding, or the cell is finished or not started.
        """
        if self._final is not None:
            raise SandboxError("resume() on a finished cell")
        if not self._promise:
            raise SandboxError("resume() before run()")
        self._check_open()
        items = deliveries if isinstance(deliveries, list) else list(deliveries)
        messages = self._bridge.settle_messages(items)

        def body() -> Outcome:
            for message in messages:
                self._settle_request(message)
            return self._evaluate()

        return self._drive(body)

    def interrupt(self) -> None:
        """Ask the running guest to stop (thread-safe); the step fails with kind ABORTED."""
        self._vm.abort_requested = True

    def close(self) -> None:
        """Free the VM now (idempotent). Finished cells do this on their own.

        Raises:
            SandboxError: The cell is running (call `interrupt()` and close it afterwards).
        """
        if not self._lock.acquire(blocking=False):
            raise SandboxError("cannot close a running cell; interrupt() it first")
        try:
            self._release()
        finally:
            self._lock.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def outstanding(self) -> tuple[int, ...]:
        """Request ids not delivered yet, ascending."""
        return tuple(sorted(self._bridge.outstanding))

    @property
    def finished(self) -> bool:
        """True once the cell reached a Completed or Failed outcome."""
        return self._final is not None

    @property
    def elapsed(self) -> float:
        """Seconds of the execution budget used so far by this Cell object."""
        return self._used

    @property
    def memory_bytes(self) -> int:
        """Size of the VM's linear memory (its last size once the VM is freed)."""
        return self._memory_bytes if self._vm.closed else self._vm.mem.size()

    @property
    def stdio(self) -> bytes:
        """What the QuickJS runtime itself printed (normally nothing; capped)."""
        return self._stdio if self._vm.closed else bytes(self._vm.stdio)

    # -- internals ---------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._vm.closed:
            raise SandboxError("the cell is closed")

    def _step(self, *, grace: float = 0.0) -> StepScope:
        vm = self._vm
        return StepScope(self._lock, vm, max(vm.limits.timeout - self._used, grace), self._charge)

    def _charge(self, seconds: float) -> None:
        self._used += seconds

    def _drive(self, body: Callable[[], Outcome | None]) -> Outcome:
        outcome: Outcome | None
        try:
            with self._step():
                outcome = body()
        except VM_FAILURES as exc:
            outcome = self._failure(exc)
        if self._vm.host_failure is not None:
            outcome = outcomes.host_failure(self._vm.host_failure)
        if isinstance(outcome, _FINAL):
            self._final = outcome
            self._release()
        return outcome if outcome is not None else Pending(self.outstanding)

    def _release(self) -> None:
        vm = self._vm
        if not vm.closed:
            self._memory_bytes = vm.mem.size()
            self._stdio = bytes(vm.stdio)
            vm.close()

    def _start(self, code: str) -> Outcome:
        vm = self._vm
        result = eval_script(vm, code, self._filename)
        if vm.promise_state(result) is None:  # a `wrapped` script that returned no promise
            try:
                return Completed(self._serialize(result))
            finally:
                vm.free(result)
        self._promise = result
        return self._evaluate()

    def _settle_request(self, message: str) -> None:
        vm = self._vm
        text = vm.new_string(message)
        try:
            self._bridge.recycle(vm, vm.call(self._settle, text))  # a boolean
        finally:
            vm.free(text)

    def _evaluate(self) -> Outcome:
        vm = self._vm
        vm.run_jobs()
        state = vm.known_promise_state(self._promise)
        if state == PROMISE_PENDING:
            return Pending(self.outstanding) if self._bridge.outstanding else outcomes.STALLED
        result = vm.promise_result(self._promise)
        outcome: Completed | Failed
        try:
            if state == PROMISE_FULFILLED:
                outcome = Completed(self._serialize(result))
            else:
                outcome = self._describe_error(result)
        finally:
            vm.free(result)
        rejections = vm.rejections
        if rejections.kept or rejections.dropped:
            more = rejections.dropped
            outcome = replace(outcome, unhandled=self._unhandled(), unhandled_more=more)
        return outcome

    def _unhandled(self) -> tuple[str, ...]:
        """One line per promise rejection nothing handled (the program's own result promise
        aside: its rejection is the failure itself). The VM is freed with the final outcome,
        so the kept boxes need no freeing here."""
        vm = self._vm
        own = vm.mem.read(self._promise, 8)
        kept, _ = vm.rejections.take()
        lines = []
        for key, (_, reason) in kept.items():
            if key == own:
                continue
            try:
                line = self._describe_error(reason).message
            except GuestThrow as exc:  # the reason's own getters threw
                vm.free(exc.handle)
                line = "a value that could not be described"
            lines.append(line.removeprefix("Uncaught "))
        return tuple(lines)

    def _serialize(self, value: int) -> str:
        text = self._vm.call(self._finish, value)
        try:
            return self._vm.to_str(text)
        finally:
            self._vm.free(text)

    def _describe_error(self, error: int) -> Failed:
        if not self._describe:  # the bridge is not installed yet (the setup failed)
            return Failed(FailureKind.GUEST_ERROR, self._vm.to_str(error))
        text = self._vm.call(self._describe, error)
        try:
            return outcomes.from_description(self._vm.to_str(text), self._filename)
        finally:
            self._vm.free(text)

    def _failure(self, exc: Exception) -> Failed:
        vm = self._vm
        if vm.abort_requested:
            return outcomes.ABORTED
        if isinstance(exc, VMTrapped):
            if exc.interrupt:
                return outcomes.timeout(vm.limits.timeout)
            return outcomes.trapped(exc.message)
        if isinstance(exc, DeadlineExceeded) or vm.deadline_passed():
            # No JS may run after a timeout (the interrupt would fire again); the VM is freed.
            return outcomes.timeout(vm.limits.timeout)
        if isinstance(exc, VMOutOfMemory):
            return outcomes.MEMORY
        assert isinstance(exc, GuestThrow)
        try:
            with self._step(grace=_DESCRIBE_GRACE):
                try:
                    return self._describe_error(exc.handle)
                finally:
                    vm.free(exc.handle)
        except (*VM_FAILURES, ValueError):
            return outcomes.UNDESCRIBABLE
