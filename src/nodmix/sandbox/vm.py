"""One QuickJS VM: a wasmtime Store plus one `quickjs.wasm` instance with its own linear memory.

This layer speaks in JSValue "handles" (pointers to heap boxes allocated by quickjs-wasi's C
interface layer) and knows no bridge protocol; `vmcode.py` runs scripts, `cell.py` builds on it.

Rules that keep it safe:

- Every use of the VM happens inside `with vm.entry(seconds):`, which sets the QuickJS
  interrupt deadline and the epoch backstop, and turns any wasm trap into `VMTrapped` (the VM
  is dead from then on: its state may be half-updated).
- Guest code can run during almost any call (getters, `toJSON`, Proxy traps), so nothing runs
  outside an entry, including the final serialization.
- Host functions never let exceptions unwind through wasm (see `dispatch_host_call`).
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import time
from typing import Final

import wasmtime

from nodmix.errors import SandboxError
from nodmix.sandbox import hostio, memimage, wasm
from nodmix.sandbox.base import SandboxLimits
from nodmix.sandbox.bootstate import REALTIME, Probe
from nodmix.sandbox.rejections import Rejections
from nodmix.sandbox.runtime import QuickJSRuntime
from nodmix.sandbox.vmstate import (
    WASM_PAGE,
    DeadlineExceeded,
    EntryScope,
    GuestThrow,
    HostFunction,
    VMImage,
    VMOutOfMemory,
    VMStart,
    VMTrapped,
)

log = logging.getLogger("nodmix.sandbox")

PROMISE_PENDING: Final = 0
PROMISE_FULFILLED: Final = 1
PROMISE_REJECTED: Final = 2
_STDIO_CAP: Final = 64 << 10
U32: Final = struct.Struct("<I")
# Scratch block (allocated once per VM, kept in snapshots): a length out-parameter, the VM's
# `undefined` box, an argv array for calls, and a buffer that saves a malloc/free pair for
# every small string.
_SCRATCH_SIZE: Final = 16 << 10
SCRATCH_LEN, _SCRATCH_UNDEFINED, _SCRATCH_ARGV, _SCRATCH_TEXT = 0, 4, 8, 32
_SCRATCH_MAX_ARGS: Final = (_SCRATCH_TEXT - _SCRATCH_ARGV) // 4
_SCRATCH_TEXT_MAX: Final = _SCRATCH_SIZE - _SCRATCH_TEXT - 1

#: Exports that only inspect, box, copy or free values: no guest code, no parsing, no GC run.
#: They keep the GIL (see `wasm.Exports`); copies larger than `_QUICK_MAX_BYTES` release it.
_QUICK_MAX_BYTES: Final = 64 << 10
_QUICK_EXPORTS: Final = frozenset(
    "qjs_is_exception qjs_is_promise qjs_is_job_pending qjs_promise_state qjs_get_undefined"
    " qjs_new_string qjs_get_string_len qjs_free_cstring qjs_free_value wasm_malloc wasm_free"
    "".split()
)


class VM:
    """A QuickJS runtime+context in a fresh wasm instance (booted, or loaded from an image or
    a `VMStart`: a template's or a snapshot's pages).

    Thread rules: a VM may move between threads but must only be used by one at a time.
    """

    def __init__(
        self,
        runtime: QuickJSRuntime,
        limits: SandboxLimits,
        image: VMImage | VMStart | None = None,
        *,
        probe: Probe | None = None,
    ) -> None:
        self.runtime = runtime
        self.probe = probe
        self.limits = limits
        self.dead = False
        self.abort_requested = False
        self.deadline = float("inf")
        self.host_functions: dict[bytes, HostFunction] = {}
        self.host_failure: BaseException | None = None
        self.stdio = bytearray()
        self.rejections = Rejections()
        """Promises rejected with no handler yet (`sandbox.rejections`)."""
        self._nested_trap: VMTrapped | None = None
        self._host_depth = 0
        self.closed = False
        self.store = wasmtime.Store(runtime.engine)
        self.store.set_limits(memory_size=limits.memory_bytes + limits.memory_headroom_bytes)
        # With epoch interruption on, a new store's deadline is "now": set one before any call.
        self.store.set_epoch_deadline(wasm.epoch_ticks(limits.timeout))
        instance = runtime.pre.instantiate(self.store)
        self.x = wasm.Exports(
            instance, self.store, owner=self, signatures=runtime.signatures, quick=_QUICK_EXPORTS
        )
        self.mem = hostio.LinearMemory(self.x.extern("memory"), self.store)
        self._stack_pointer = hostio.I32Global(self.x.extern("__stack_pointer"), self.store)
        try:
            if image is None:
                self.x._initialize()
                if self.x.qjs_init() != 0:
                    raise SandboxError("QuickJS failed to initialize")
                # Part of the runtime's state: templates and snapshots carry it.
                self.x.qjs_set_promise_rejection_handler(1)
                self.scratch = self.x.wasm_malloc(_SCRATCH_SIZE)
                self.undefined = self.x.qjs_get_undefined()  # a box kept for the VM's life
                self.mem.write(self.scratch + _SCRATCH_UNDEFINED, U32.pack(self.undefined))
            else:
                if isinstance(image, VMImage):  # a full image: write only the pages that differ
                    image = image.start(memimage.fresh_memory(runtime))
                self._load(image)
                self.scratch = image.scratch_ptr
                self.undefined = U32.unpack(self.mem.read(self.scratch + _SCRATCH_UNDEFINED, 4))[0]
            self.x.qjs_set_memory_limit(limits.memory_bytes)
            self.x.qjs_set_max_stack_size(limits.stack_bytes)
            self.x.qjs_set_interrupt_handler(1)
        except (wasmtime.Trap, wasmtime.WasmtimeError, hostio.OutOfBounds) as exc:
            self.dead = True
            raise SandboxError(f"QuickJS VM failed to start: {wasm.trap_summary(exc)}") from None

    def close(self) -> None:
        """Free the store and its memory now (idempotent). Never while the VM is running: the
        exports hold raw pointers into the store (`entry` refuses a closed VM).
        """
        if self.closed:
            return
        self.closed = self.dead = True
        self.host_functions.clear()
        del self.x, self.mem, self._stack_pointer
        self.store.close()

    # -- entries, deadlines, traps -----------------------------------------------------------

    def entry(self, seconds: float) -> EntryScope:
        """Scope for using the VM with a deadline `seconds` from now (`with vm.entry(s):`).

        Raises:
            VMTrapped: A wasm trap happened inside the scope (or the VM was already dead).
        """
        if self.dead:
            raise VMTrapped("the VM is dead", interrupt=False)
        seconds = max(seconds, 0.0)
        self.deadline = time.monotonic() + seconds
        self.store.set_epoch_deadline(wasm.epoch_ticks(seconds))
        return EntryScope(self.trapped)

    def trapped(self, exc: BaseException) -> VMTrapped:
        """The VM is dead after trap `exc` inside an entry: what to raise instead."""
        self.dead = True
        nested, self._nested_trap = self._nested_trap, None
        if nested is not None:
            return nested
        return VMTrapped(wasm.trap_summary(exc), interrupt=wasm.trap_is_interrupt(exc))

    def clock_ns(self, clock_id: int) -> int:
        """Import callback: the realtime or monotonic clock (a probe's, while one is set)."""
        if self.probe is not None:
            return self.probe.clock_ns(clock_id)
        return time.time_ns() if clock_id == REALTIME else time.monotonic_ns()

    def random_bytes(self, size: int) -> bytes:
        """Import callback: entropy for `random_get`."""
        return self.probe.random_bytes(size) if self.probe is not None else os.urandom(size)

    def should_interrupt(self) -> bool:
        """Polled by QuickJS's interrupt hook: stop once past the deadline or aborted."""
        return self.abort_requested or self.deadline_passed()

    def deadline_passed(self) -> bool:
        """True once the current entry's deadline has passed."""
        return time.monotonic() > self.deadline

    def write_stdio(self, data: bytes) -> None:
        """Import callback: keep what the C runtime prints (capped); nothing reaches stdout."""
        room = _STDIO_CAP - len(self.stdio)
        if room > 0:
            self.stdio += data[:room]

    def dispatch_host_call(
        self, name_ptr: int, name_len: int, this: int, argc: int, argv: int
    ) -> int:
        """Run the host function named by the bytes at `name_ptr` for the C trampoline (which
        owns the arguments).

        Nothing may unwind through wasm: guest-side problems become guest exceptions, host
        bugs are recorded in `host_failure` (the step then fails as INTERNAL), and a trap in
        a nested call kills the VM via `_kill`.
        """
        self._host_depth += 1
        try:
            base, size = self.mem.bounds()  # one look-up for the name and the argv array
            fits = name_ptr >= 0 and name_len >= 0 and name_ptr + name_len <= size
            name = ctypes.string_at(base + name_ptr, name_len) if fits else b"?"
            fn = self.host_functions.get(name)
            if fn is None:
                return self.throw_string(f"host function {name.decode(errors='replace')} is gone")
            try:
                if argv < 0 or argc < 0 or argv + 4 * argc > size:
                    raise hostio.OutOfBounds(argv, 4 * argc)
                raw = ctypes.string_at(base + argv, 4 * argc)
                args = [U32.unpack(raw)[0]] if argc == 1 else list(struct.unpack(f"<{argc}I", raw))
                return fn(args)
            except GuestThrow as exc:  # e.g. a string conversion failed: rethrow in the guest
                self.x.qjs_throw(exc.handle)
                self.x.qjs_free_value(exc.handle)
                return 0
            except VMOutOfMemory:
                return self.throw_string("out of memory")
            except (wasmtime.Trap, wasmtime.WasmtimeError, hostio.OutOfBounds):
                raise
            except Exception as exc:  # a host bug: record it, never let it unwind through wasm
                log.exception("sandbox host function %r failed", name)
                if self.host_failure is None:
                    self.host_failure = exc
                return self.throw_string("internal host error")
        except (wasmtime.Trap, wasmtime.WasmtimeError, hostio.OutOfBounds) as exc:
            # A nested call trapped (typically the epoch deadline passed while the host was
            # busy), or a pointer was bad. Make the outer call trap as well.
            return self._kill(wasm.trap_summary(exc), interrupt=wasm.trap_is_interrupt(exc))
        except (VMOutOfMemory, GuestThrow):
            return self._kill("out of memory while reporting an error", interrupt=False)
        finally:
            self._host_depth -= 1

    def promise_rejection(self, promise: int, reason: int, handled: int) -> None:
        """Import callback of QuickJS's rejection tracker (see `sandbox.rejections`)."""
        try:
            self.rejections.track(self, promise, reason, handled)
        except (wasmtime.Trap, wasmtime.WasmtimeError) as exc:
            self._kill(wasm.trap_summary(exc), interrupt=wasm.trap_is_interrupt(exc))

    def _kill(self, message: str, *, interrupt: bool) -> int:
        # We cannot raise through wasm: mark the VM dead and set the epoch deadline to "now",
        # so the outer call traps at its next function entry or loop back-edge.
        if self._nested_trap is None:
            self._nested_trap = VMTrapped(message, interrupt=interrupt)
        self.dead = True
        self.store.set_epoch_deadline(0)
        return 0

    # -- values ------------------------------------------------------------------------------

    def alloc_bytes(self, data: bytes) -> int:
        ptr = self.x.wasm_malloc(len(data) + 1)
        if not ptr:
            raise VMOutOfMemory()
        self.mem.write(ptr, data + b"\0")
        return ptr

    def new_string(self, text: str) -> int:
        """A new string handle (WTF-8, so lone surrogates round-trip)."""
        data = text.encode("utf-8", "surrogatepass")
        if len(data) <= _SCRATCH_TEXT_MAX:  # JS_NewStringLen copies: the scratch is reusable
            ptr = self.scratch + _SCRATCH_TEXT
            self.mem.write(ptr, data)
            return self._new_string_checked(ptr, len(data))
        ptr = self.alloc_bytes(data)
        try:
            return self._new_string_checked(ptr, len(data))
        finally:
            self.x.wasm_free(ptr)

    def _new_string_checked(self, ptr: int, size: int) -> int:
        new_string = self.x.qjs_new_string
        if size > _QUICK_MAX_BYTES:  # copying it takes long enough to let other threads run
            new_string = self.x.releasing("qjs_new_string")
        handle = new_string(ptr, size)
        if self.x.qjs_is_exception(handle):
            self.x.qjs_free_value(handle)
            raise GuestThrow(self.x.qjs_get_exception())
        return handle

    def new_undefined(self) -> int:
        """A new `undefined` handle (to return from a host function, which consumes it)."""
        return self.x.qjs_get_undefined()

    def to_str(self, handle: int) -> str:
        """The string value of a string handle (use only on values known to be strings)."""
        len_ptr = self.scratch + SCRATCH_LEN
        cptr = self.x.qjs_get_string_len(handle, len_ptr)
        if not cptr:
            raise GuestThrow(self.x.qjs_get_exception())
        try:
            base, length = self.mem.bounds()
            size = U32.unpack(ctypes.string_at(base + len_ptr, 4))[0]
            if cptr + size > length:
                raise hostio.OutOfBounds(cptr, size)
            return ctypes.string_at(base + cptr, size).decode("utf-8", "surrogatepass")
        finally:
            self.x.qjs_free_cstring(cptr)

    def throw_string(self, message: str) -> int:
        """Throw a string into the guest from a host function; returns 0 for the trampoline."""
        handle = self.new_string(message)
        self.x.qjs_throw(handle)
        self.x.qjs_free_value(handle)
        return 0

    def checked(self, handle: int) -> int:
        if self.x.qjs_is_exception(handle):
            self.x.qjs_free_value(handle)
            raise GuestThrow(self.x.qjs_get_exception())
        return handle

    def call(self, fn: int, *args: int) -> int:
        """Call `fn(...args)` with `this` undefined.

        Raises:
            GuestThrow: The function threw.
        """
        packed = U32.pack(args[0]) if len(args) == 1 else struct.pack(f"<{len(args)}I", *args)
        # The scratch argv is only safe when no other call is in flight on this VM.
        shared = self._host_depth == 0 and len(args) <= _SCRATCH_MAX_ARGS
        argv = self.scratch + _SCRATCH_ARGV if shared else self.alloc_bytes(packed)
        self.mem.write(argv, packed)
        try:
            handle = self.x.qjs_call(fn, self.undefined, len(args), argv)
        finally:
            if not shared and not self.dead:
                self.x.wasm_free(argv)
        return self.checked(handle)

    def item(self, array: int, index: int) -> int:
        """`array[index]` (a new handle)."""
        return self.checked(self.x.qjs_get_prop_uint32(array, index))

    def free(self, *handles: int) -> None:
        """Free handles (0 is ignored)."""
        for handle in handles:
            if handle:
                self.x.qjs_free_value(handle)

    def new_host_function(self, name: str) -> int:
        """A JS function that calls `host_functions[name]`; the name survives snapshots."""
        ptr = self.alloc_bytes(name.encode())
        handle = self.x.qjs_new_host_function(ptr, len(name.encode()), 0)
        self.x.wasm_free(ptr)
        return handle

    def promise_state(self, handle: int) -> int | None:
        """PROMISE_PENDING, PROMISE_FULFILLED, PROMISE_REJECTED, or None for a non-promise."""
        return self.x.qjs_promise_state(handle) if self.x.qjs_is_promise(handle) else None

    def known_promise_state(self, handle: int) -> int:
        """`promise_state` of a handle already known to be a promise (one crossing fewer)."""
        return self.x.qjs_promise_state(handle)

    def promise_result(self, handle: int) -> int:
        """The settled value or reason (a new handle)."""
        return self.x.qjs_promise_result(handle)

    def run_jobs(self) -> None:
        """Drain the microtask queue within the current deadline.

        Raises:
            GuestThrow: A job failed uncatchably (interrupt, out of memory).
            DeadlineExceeded: The deadline passed between jobs.
        """
        # `qjs_execute_pending_job` returns 0 when the queue is empty, so the common case needs
        # no separate `qjs_is_job_pending` crossing per job.
        execute = self.x.qjs_execute_pending_job
        while True:
            if self.abort_requested or time.monotonic() > self.deadline:  # should_interrupt()
                if self.x.qjs_is_job_pending():
                    raise DeadlineExceeded()
                return
            ran = execute()
            if ran == 0:
                return
            if ran < 0:
                raise GuestThrow(self.x.qjs_get_exception())

    def capture(self) -> VMImage:
        """A zero-copy view of the current state, valid until the VM next runs. Call it inside
        an entry, with no guest code on the stack (true whenever control is back in Python).
        """
        base, size = self.mem.bounds()
        view = (ctypes.c_char * size).from_address(base)
        return VMImage(
            memory=memoryview(view).cast("B"),
            stack_pointer=self._stack_pointer.get(),
            runtime_ptr=self.x.qjs_get_runtime_ptr(),
            context_ptr=self.x.qjs_get_context_ptr(),
            scratch_ptr=self.scratch,
        )

    def _load(self, start: VMStart) -> None:
        # A fresh instance, deliberately not `_initialize`d: the pages hold the initialized libc
        # and QuickJS state, and every page they leave out already holds its content (see
        # `memimage`).
        size = start.pages.size
        if size % WASM_PAGE or start.scratch_ptr + _SCRATCH_SIZE > size:
            raise SandboxError("corrupt snapshot image")
        try:
            self.mem.grow_to(size)
        except wasmtime.WasmtimeError:
            raise SandboxError("snapshot does not fit the memory limit") from None
        start.pages.write(*self.mem.bounds())
        self._stack_pointer.set(start.stack_pointer)
        self.x.qjs_set_runtime_and_context(start.runtime_ptr, start.context_ptr)
