"""`Cell`: one guest program in one VM, with the generic host bridge, limits and snapshots.

Lifecycle (all methods are synchronous and run guest code on the calling thread):

```
cell = Cell.boot(setup_script, handler, limits=...)     # or Cell.restore(snapshot, handler)
outcome = cell.run(source)                               # Completed | Failed | Pending
while isinstance(outcome, Pending):
    ...host work...; cell.deliver(request_id, ok, text)  # queue results
    outcome = cell.pump()                                # drain jobs, re-evaluate
    # or: blob = cell.snapshot(); cell.close(); later Cell.restore(blob, handler) + deliver
```

A Completed or Failed outcome is final and frees the VM at once. A cell that is dropped while
suspended should be `close()`d (or used as a context manager) to free its memory promptly.
A cell is thread-confined: it may move between threads, but a second concurrent (or
re-entrant, from a handler) use raises `SandboxError`.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Final

from nodmix.errors import SandboxError
from nodmix.sandbox import memimage, outcomes, templates
from nodmix.sandbox import snapshot as snapshot_format
from nodmix.sandbox.base import (
    Completed,
    Failed,
    FailureKind,
    HostHandler,
    Outcome,
    Pending,
    SandboxLimits,
    SnapshotError,
)
from nodmix.sandbox.bootstate import Probe
from nodmix.sandbox.bridge import CALL_FUNCTION, REQUEST_FUNCTION, Bridge
from nodmix.sandbox.prelude import PRELUDE, PRELUDE_FILENAME, strict_setup, wrap_async
from nodmix.sandbox.runtime import QuickJSRuntime, get_runtime
from nodmix.sandbox.vm import PROMISE_FULFILLED, PROMISE_PENDING, VM
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
_VM_FAILURES: Final = (GuestThrow, VMTrapped, DeadlineExceeded, VMOutOfMemory)
#: The same setup script boots every cell: build its strict form (the bytecode cache key) once,
#: so each boot neither rebuilds nor re-hashes it.
_strict_setup: Final = functools.lru_cache(maxsize=16)(strict_setup)


class Cell:
    """One VM running one guest program; see the module docstring for the lifecycle."""

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

    # -- construction ------------------------------------------------------------------------

    @classmethod
    def boot(
        cls,
        setup_script: str | None,
        handler: HostHandler,
        *,
        limits: SandboxLimits | None = None,
        runtime: QuickJSRuntime | None = None,
    ) -> Cell:
        """A fresh VM with the bridge installed and `setup_script` run.

        The VM is a new wasm instance holding a copy of this setup's boot template (booted
        once per process for each distinct set of answers the setup gets from `handler`, see
        `templates.py`); a setup that cannot be templated runs in the new VM itself.

        Args:
            setup_script: JS source of a function expression, e.g.
                `(cap) => { Object.defineProperty(globalThis, 'tools', {...}) }`. It receives
                the frozen capability `{call, request, requestJson, stringify, tooDeep}` and
                runs (in strict mode) before any user code. Guest code can never reach the
                capability unless the script exposes it. Keep it constant: it is compiled once
                per process and cached as bytecode; pass per-run data through the handler
                instead.
            handler: Receives the guest's calls and requests.
            limits: Resource limits (defaults: `SandboxLimits()`).
            runtime: The runtime to use (default: the process-wide `get_runtime()`).

        Raises:
            RuntimeUnavailableError: The QuickJS-WASI runtime is not installed.
            SandboxError: The VM could not start or the setup script failed.
        """
        runtime = runtime or get_runtime()
        limits = limits or SandboxLimits()
        template, boot_handler = templates.acquire(
            runtime, setup_script, handler, cls._booter(setup_script, runtime, limits)
        )
        if template is not None and template.fits(limits):
            cell = cls(template.new_vm(limits), Bridge(handler), "cell.js")
            cell._settle, cell._finish, cell._describe = template.handles
            cell._template = template
            return cell
        cell = cls._boot(setup_script, boot_handler, limits, runtime, None)
        cell._bridge.handler = handler  # the setup's answers are replayed only while it runs
        return cell

    @classmethod
    def _boot(
        cls,
        setup_script: str | None,
        handler: HostHandler,
        limits: SandboxLimits,
        runtime: QuickJSRuntime,
        probe: Probe | None,
    ) -> Cell:
        vm = VM(runtime, limits, probe=probe)
        cell = cls(vm, Bridge(handler), "cell.js")
        try:
            with cell._step():
                cell._install_bridge(setup_script)
        except _VM_FAILURES as exc:
            failure = cell._failure(exc)
            cell.close()
            raise SandboxError(f"sandbox setup failed: {failure.message}") from None
        cell._used = 0.0  # the trusted setup is not charged to the guest's budget
        return cell

    @classmethod
    def _booter(
        cls, setup_script: str | None, runtime: QuickJSRuntime, limits: SandboxLimits
    ) -> templates.Booter:
        def boot(handler: HostHandler, probe: Probe) -> tuple[VM, templates.Handles]:
            cell = cls._boot(setup_script, handler, limits, runtime, probe)
            return cell._vm, (cell._settle, cell._finish, cell._describe)

        return boot

    @classmethod
    def restore(
        cls,
        blob: bytes,
        handler: HostHandler,
        *,
        limits: SandboxLimits | None = None,
        runtime: QuickJSRuntime | None = None,
        setup_script: str | None = None,
    ) -> Cell:
        """Rebuild a cell from `snapshot()` bytes in a fresh VM, with fresh limits.

        Host callbacks are re-attached by their stable names; the guest's pending promises,
        closures and globals are exactly as they were. Snapshots are trusted input: only
        restore bytes this process produced (see `nodmix.sandbox.snapshot`).

        A snapshot holds only what differs from the boot template its cell was copied from.
        When this process does not have that template (after a restart), it is booted again
        from `setup_script`, asking `handler` what the setup asks, and must come out the same.

        Raises:
            SnapshotError: Malformed, from another build, larger than the memory limit, or its
                boot template cannot be rebuilt here.
            RuntimeUnavailableError: The QuickJS-WASI runtime is not installed.
        """
        runtime = runtime or get_runtime()
        limits = limits or SandboxLimits()
        cap = limits.memory_bytes + limits.memory_headroom_bytes
        decoded = snapshot_format.decode(blob, build_id=runtime.build_id, max_memory=cap)
        state = snapshot_format.CellState.unpack(decoded.extra)
        if max(state.settle, state.finish, state.describe, state.promise) >= decoded.size:
            raise SnapshotError("corrupt snapshot metadata")  # handles are addresses in memory
        booter = cls._booter(setup_script, runtime, limits)
        template = templates.for_snapshot(
            decoded.base_digest, runtime, setup_script, handler, booter
        )
        try:
            if template is None:
                start = decoded.start(memimage.fresh_base(runtime))
            else:
                start = decoded.start(template.base, template.dictionary)
            vm = VM(runtime, limits, start)
        except SandboxError as exc:
            raise SnapshotError(str(exc)) from None
        cell = cls(vm, Bridge(handler, state.outstanding), state.filename)
        cell._settle, cell._finish, cell._describe = state.settle, state.finish, state.describe
        cell._promise = state.promise
        cell._template = template
        return cell

    def _install_bridge(self, setup_script: str | None) -> None:
        vm = self._vm
        call_fn = vm.new_host_function(CALL_FUNCTION)
        request_fn = vm.new_host_function(REQUEST_FUNCTION)
        factory = setup = bridge = 0
        try:
            factory = vm.eval_cached(PRELUDE, PRELUDE_FILENAME)
            if setup_script:
                setup = vm.eval_cached(_strict_setup(setup_script), "<setup>")
            bridge = vm.call(factory, call_fn, request_fn, setup or vm.undefined)
            self._settle, self._finish, self._describe = (vm.item(bridge, i) for i in range(3))
        finally:
            vm.free(call_fn, request_fn, factory, bridge, setup)

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
        messages = self._bridge.settle_messages(list(deliveries))

        def body() -> Outcome:
            for message in messages:
                self._settle_request(message)
            return self._evaluate()

        return self._drive(body)

    def snapshot(self) -> bytes:
        """Serialize the whole VM (zstd-1) with the bridge state; see `snapshot.py`.

        Raises:
            SandboxError: The cell is finished or dead.
        """
        if self._final is not None:
            raise SandboxError("cannot snapshot a finished cell")
        self._check_open()
        state = snapshot_format.CellState(
            self._settle,
            self._finish,
            self._describe,
            self._promise,
            self.outstanding,
            self._filename,
        )
        extra = state.pack()
        template = self._template
        build_id = self._vm.runtime.build_id
        with self._step():
            image = self._vm.capture()
            if template is None:  # booted without a template: relative to a fresh instance
                base = memimage.fresh_base(self._vm.runtime)
                return snapshot_format.encode(image, build_id=build_id, base=base, extra=extra)
            return snapshot_format.encode(
                image,
                build_id=build_id,
                base=template.base,
                base_digest=template.digest,
                forced=template.forced,
                dictionary=template.dictionary,
                extra=extra,
            )

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

    def __enter__(self) -> Cell:
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
        except _VM_FAILURES as exc:
            outcome = self._failure(exc)
        if self._vm.host_failure is not None:
            outcome = outcomes.host_failure(self._vm.host_failure)
        if isinstance(outcome, Completed | Failed):
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
        result = vm.eval(code, self._filename)
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
            vm.free(vm.call(self._settle, text))
        finally:
            vm.free(text)

    def _evaluate(self) -> Outcome:
        vm = self._vm
        vm.run_jobs()
        state = vm.known_promise_state(self._promise)
        if state == PROMISE_PENDING:
            return Pending(self.outstanding) if self._bridge.outstanding else outcomes.STALLED
        result = vm.promise_result(self._promise)
        try:
            if state == PROMISE_FULFILLED:
                return Completed(self._serialize(result))
            return self._describe_error(result)
        finally:
            vm.free(result)

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
        except (*_VM_FAILURES, ValueError):
            return outcomes.UNDESCRIBABLE
