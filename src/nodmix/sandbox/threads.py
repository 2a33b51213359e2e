"""The event-loop side of the sandbox: run cell operations in worker threads.

Guest code must never run on the event loop: a `while(true){}` would stall every session.
Every operation runs in a worker thread. wasmtime releases the GIL while wasm runs, so the loop
keeps serving; the cell's deadline (QuickJS interrupt plus the epoch backstop) guarantees every
worker call returns.

Threads and CPU are counted apart. Guest work is CPU-bound, so at most one operation per CPU
runs at a time (a process-wide semaphore of CPU slots). A worker that only waits, such as a
code-mode step waiting briefly for a quick tool result (`codemode.handoff`), gives its slot up
meanwhile (`cpu_released()`), so waiting workers never hold up another session's guest code;
the pool has more threads than CPUs for that reason.

Cancellation: the awaiting task cannot abandon a running worker (the VM would be shared by
two threads), so cancelling waits for the current operation, which is bounded by the budget.
Call `interrupt()` (thread-safe) to make it stop sooner.

Handlers run on the worker thread. Keep them short and non-blocking: record requests and let
the event-loop side start the real work after the step returns (or use
`anyio.from_thread.run_sync` to hand work to the loop).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import threading
from collections.abc import Callable
from typing import TypeVar, cast

import anyio
import anyio.to_thread
import sniffio
from anyio.lowlevel import RunVar

from nodmix.sandbox.base import HostHandler, Outcome, SandboxLimits
from nodmix.sandbox.cell import Cell
from nodmix.sandbox.runtime import QuickJSRuntime

T = TypeVar("T")

_LIMITER: RunVar[anyio.CapacityLimiter] = RunVar("nodmix_sandbox_limiter")


def worker_limiter() -> anyio.CapacityLimiter:
    """The sandbox's thread limiter for the current event loop (one per CPU)."""
    try:
        return _LIMITER.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(max(os.cpu_count() or 1, 1))
        _LIMITER.set(limiter)
        return limiter


class CpuSlots:
    """At most `count` holders at once: a semaphore made of tokens in a queue. Taking and
    returning a token is one C call each, where `threading.Semaphore` runs a Python-level
    condition (a worker waiting for quick tools does both on every call)."""

    __slots__ = ("_tokens",)

    def __init__(self, count: int) -> None:
        self._tokens: queue.SimpleQueue[None] = queue.SimpleQueue()
        for _ in range(count):
            self._tokens.put(None)

    def acquire(self) -> None:
        """Take a slot, waiting for one to be free."""
        self._tokens.get()

    def release(self) -> None:
        """Give back a slot taken with `acquire`."""
        self._tokens.put(None)

    def free(self) -> int:
        """Slots nobody holds right now (a snapshot: it may change at once)."""
        return self._tokens.qsize()


def usable_cpus() -> int:
    """The CPUs this process may run on (`taskset` or a container may allow fewer)."""
    if hasattr(os, "sched_getaffinity"):
        return max(len(os.sched_getaffinity(0)), 1)
    return max(os.cpu_count() or 1, 1)  # pragma: no cover - platforms without affinity


_CPUS = usable_cpus()
_SLOTS = CpuSlots(_CPUS)
_held = threading.local()
_POOL: concurrent.futures.ThreadPoolExecutor | None = None


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL  # one process-wide pool; CPU use is bounded by the slots, not the threads
    if _POOL is None:
        _POOL = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(32, 4 * _CPUS), thread_name_prefix="nodmix-sandbox"
        )
    return _POOL


def _in_slot(fn: Callable[..., T], *args: object) -> T:
    _SLOTS.acquire()
    _held.slot = True
    try:
        return fn(*args)
    finally:
        _held.slot = False
        _SLOTS.release()


class _CpuLent:
    """`cpu_released()`'s context manager (a class: a generator-based one costs a worker
    waiting for quick tools another microsecond per call)."""

    __slots__ = ("_lent",)

    def __init__(self) -> None:
        self._lent = False

    def __enter__(self) -> None:
        self._lent = getattr(_held, "slot", False)
        if self._lent:
            _held.slot = False
            _SLOTS.release()

    def __exit__(self, *exc: object) -> None:
        if self._lent:
            _SLOTS.acquire()
            _held.slot = True


def free_cpu_slots() -> int:
    """CPU slots no sandbox worker holds right now (see `CpuSlots`)."""
    return _SLOTS.free()


def cpu_released() -> contextlib.AbstractContextManager[None]:
    """Lend this worker's CPU slot to other guests while the thread only waits.

    A no-op outside a sandbox worker operation.
    """
    return _CpuLent()


class Wakeup:
    """Wakes one waiting thread, like a `threading.Event` that `wait` consumes, on one raw
    lock (a fraction of an Event's cost: no condition, no per-wait lock).

    `set` and `clear` may be called from any thread; only one thread waits at a time.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()  # held = not set

    def set(self) -> None:
        """Wake the waiter (or the next `wait`); setting twice is the same as once."""
        with contextlib.suppress(RuntimeError):  # already set
            self._lock.release()

    def clear(self) -> None:
        """Forget an earlier `set` that no `wait` consumed."""
        self._lock.acquire(blocking=False)

    def wait(self, timeout: float) -> bool:
        """Block until set (True, consuming it) or until `timeout` seconds pass (False)."""
        return self._lock.acquire(timeout=max(timeout, 0.0))


async def run_in_worker(
    fn: Callable[..., T], *args: object, on_cancel: Callable[[], object] | None = None
) -> T:
    """Run a blocking sandbox function (a cell step, a TypeScript transform) off the loop.

    On asyncio (the gateway's loop) this uses a plain thread pool whose worker reports back
    with one loop callback (`_Hop`), cheaper per hop than anyio's worker threads or
    `run_in_executor`'s chained futures. Either way a cancelled caller waits for the step to
    finish: a VM must never be used by two threads, and the cell's deadline bounds the wait.
    `on_cancel` (e.g. interrupting the cell) runs on the loop as soon as the caller is
    cancelled, so that wait is short.
    """
    if sniffio.current_async_library() != "asyncio":
        if on_cancel is None:
            return await anyio.to_thread.run_sync(fn, *args, limiter=worker_limiter())
        return await _watched(on_cancel, fn, *args)
    loop = asyncio.get_running_loop()
    hop = _Hop(loop)
    _pool().submit(hop.run, fn, args)
    try:
        await hop.future
    except asyncio.CancelledError:
        if on_cancel is not None:
            on_cancel()
        with anyio.CancelScope(shield=True):
            while not hop.finished:  # the cancelled wait took its future: wait on a new one
                hop.future = loop.create_future()
                await hop.future
        raise
    if hop.error is not None:
        raise hop.error
    return cast(T, hop.result)


class _Hop:
    """One worker operation awaited on the loop: the worker settles it with one callback."""

    __slots__ = ("error", "finished", "future", "loop", "result")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.future: asyncio.Future[None] = loop.create_future()
        self.finished = False
        self.result: object = None
        self.error: BaseException | None = None

    def run(self, fn: Callable[..., object], args: tuple[object, ...]) -> None:
        """In the worker thread: run `fn` in a CPU slot and report to the loop."""
        result: object = None
        error: BaseException | None = None
        try:
            result = _in_slot(fn, *args)
        except BaseException as exc:  # handed to the awaiting task, which re-raises it
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting
            self.loop.call_soon_threadsafe(self._finish, result, error)

    def _finish(self, result: object, error: BaseException | None) -> None:
        self.finished, self.result, self.error = True, result, error
        if not self.future.done():
            self.future.set_result(None)


async def _watched(on_cancel: Callable[[], object], fn: Callable[..., T], *args: object) -> T:
    # Other backends cannot see a cancellation while the thread runs: a watcher task can.
    finished = False

    async def watch() -> None:
        try:
            await anyio.sleep_forever()
        finally:
            if not finished:
                on_cancel()

    result: list[T] = []
    error: list[Exception] = []
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            result.append(await anyio.to_thread.run_sync(fn, *args, limiter=worker_limiter()))
        except Exception as exc:  # re-raised below: a task group would wrap it in a group
            error.append(exc)
        finally:
            finished = True
            group.cancel_scope.cancel()
    if error:
        raise error[0]
    return result[0]


class AsyncCell:
    """Awaitable wrapper of a `Cell`; every method runs in a worker thread.

    Do not call its methods concurrently: like `Cell`, it is one VM used by one thread at a
    time (a concurrent call raises `SandboxError`).
    """

    def __init__(self, cell: Cell) -> None:
        self.cell = cell

    @classmethod
    async def boot(
        cls,
        setup_script: str | None,
        handler: HostHandler,
        *,
        limits: SandboxLimits | None = None,
        runtime: QuickJSRuntime | None = None,
    ) -> AsyncCell:
        """`Cell.boot` in a worker thread."""

        def boot() -> Cell:
            return Cell.boot(setup_script, handler, limits=limits, runtime=runtime)

        return cls(await run_in_worker(boot))

    @classmethod
    async def restore(
        cls,
        blob: bytes,
        handler: HostHandler,
        *,
        limits: SandboxLimits | None = None,
        runtime: QuickJSRuntime | None = None,
        setup_script: str | None = None,
    ) -> AsyncCell:
        """`Cell.restore` in a worker thread."""

        def restore() -> Cell:
            return Cell.restore(
                blob, handler, limits=limits, runtime=runtime, setup_script=setup_script
            )

        return cls(await run_in_worker(restore))

    async def run(
        self, source: str, *, filename: str = "cell.js", wrapped: bool = False
    ) -> Outcome:
        """`Cell.run` in a worker thread."""

        def run() -> Outcome:
            return self.cell.run(source, filename=filename, wrapped=wrapped)

        return await run_in_worker(run)

    async def pump(self) -> Outcome:
        """`Cell.pump` in a worker thread."""
        return await run_in_worker(self.cell.pump)

    async def deliver(self, request_id: int, ok: bool, value: str) -> None:
        """`Cell.deliver` in a worker thread."""
        await run_in_worker(self.cell.deliver, request_id, ok, value)

    async def snapshot(self) -> bytes:
        """`Cell.snapshot` in a worker thread (compression takes a few ms)."""
        return await run_in_worker(self.cell.snapshot)

    async def close(self) -> None:
        """`Cell.close` in a worker thread (freeing a large store can take a moment)."""
        await run_in_worker(self.cell.close)

    def interrupt(self) -> None:
        """Stop the running guest soon (thread-safe; the step fails with kind ABORTED)."""
        self.cell.interrupt()
