"""Wake-ups between a sandbox worker and the event loop that do not sleep when the wait is short.

A guest awaiting a quick tool hands the call to the event loop and waits for the result; then
the loop waits for the guest's next call. With locks, each of those waits puts a thread to
sleep and each hand-over wakes it again: two wake-ups per call, ~25-35 µs each on a virtual
machine (the sleeping vCPU has to be woken by the host), more than the call itself costs.

A `Rendezvous` waits by spinning first, for a bounded time, and only then blocks. Spinning
has to happen with the GIL released (a Python spin loop would hold it and stall the very
thread it waits for), so both the spin and the block run inside a tiny wasm module (its source
is below) on a shared wasm memory, which wasmtime calls with the GIL released:

- `wait`: spin while a word keeps its value, then `memory.atomic.wait32` with a timeout;
- `bump`: add one to the word and `memory.atomic.notify` its waiter;
- `bump_listen` (loop side): bump, then listen for the worker's next request for a moment, so
  the worker does not have to wake the loop through its self-pipe;
- `request_wait` (worker side): claim a listening loop and wait for its answer.

A listen's store happens after the GIL is released, so the woken thread finds it free; a plain
`bump` (the loop's answer when it has other work) keeps it, or the loop queued behind woken
workers to get it back (8% of its time with eight busy guests). Spinning is off with one CPU
(machine or affinity mask), where it could only delay the thread it waits for. Without the
module (a wasmtime without shared memories), `LockRendezvous` offers the same on a plain lock.
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import Any, Final, Protocol

import wasmtime

from nodmix.sandbox import wasm
from nodmix.sandbox.threads import Wakeup
from nodmix.sandbox.wasm import Exports

#: How long a worker spins for the loop's answer before it blocks.
WORKER_SPIN_SECONDS: Final = 100e-6
#: How long the loop listens for a worker's next call after handing it a result.
LOOP_LISTEN_SECONDS: Final = 150e-6
#: After a spin or a listen that did not pay off, the next few waits (answers) skip it; the
#: count doubles with every further miss up to this, and a spin that pays off resets it.
MAX_BACKOFF: Final = 64
#: Words per slot: the answer counter, the loop's listening state, and padding.
_SLOT_BYTES: Final = 16
_PAGE: Final = 65536
_IDLE, _LISTENING, _CLAIMED, _RETIRED = 0, 1, 2, 3
#: What the module's `wait` returns.
_CHANGED_SPINNING, _CHANGED_BLOCKED, _UNCHANGED = 1, 2, 3
_RETIRED_LISTEN: Final = 2  # what `bump_listen` returns for a retired slot

WAT: Final = r"""
(module
  (import "nodmix" "memory" (memory 1 1 shared))
  ;; Spin while the word at $addr equals $old, at most $spins rounds; returns the word.
  (func $spin (param $addr i32) (param $old i32) (param $spins i32) (result i32)
    (local $v i32)
    (block $done
      (loop $again
        (local.set $v (i32.atomic.load (local.get $addr)))
        (br_if $done (i32.ne (local.get $v) (local.get $old)))
        (local.set $spins (i32.sub (local.get $spins) (i32.const 1)))
        (br_if $again (i32.gt_s (local.get $spins) (i32.const 0)))))
    (local.get $v))
  ;; Spin, then block until the word changes or $timeout ns pass: 1 when it changed while
  ;; spinning, 2 when it changed while blocked, 3 when it did not change in time.
  (func $wait (param $addr i32) (param $old i32) (param $spins i32) (param $timeout i64)
              (result i32)
    (if (i32.ne (call $spin (local.get $addr) (local.get $old) (local.get $spins))
                (local.get $old))
      (then (return (i32.const 1))))
    (drop (memory.atomic.wait32 (local.get $addr) (local.get $old) (local.get $timeout)))
    (if (result i32) (i32.ne (i32.atomic.load (local.get $addr)) (local.get $old))
      (then (i32.const 2)) (else (i32.const 3))))
  (func (export "wait") (param i32 i32 i32 i64) (result i32)
    (call $wait (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
  (func (export "spin") (param i32 i32 i32) (result i32)
    (call $spin (local.get 0) (local.get 1) (local.get 2)))
  (func (export "load") (param $addr i32) (result i32)
    (i32.atomic.load (local.get $addr)))
  (func (export "store") (param $addr i32) (param $value i32)
    (i32.atomic.store (local.get $addr) (local.get $value)))
  (func $bump (param $addr i32)
    (drop (i32.atomic.rmw.add (local.get $addr) (i32.const 1)))
    (drop (memory.atomic.notify (local.get $addr) (i32.const 1))))
  (func (export "bump") (param $addr i32)
    (call $bump (local.get $addr)))
  ;; Listen (state 0 -> 1), bump, and spin while nobody claims the listener; 1 when a
  ;; request claimed it (state 2), 0 when the time ran out, 2 when the slot was retired
  ;; (before: only bumped, a listen must not revive a closed slot; or meanwhile).
  (func (export "bump_listen") (param $addr i32) (param $state i32) (param $spins i32)
                               (result i32)
    (local $seen i32)
    (if (i32.atomic.rmw.cmpxchg (local.get $state) (i32.const 0) (i32.const 1))
      (then (call $bump (local.get $addr)) (return (i32.const 2))))
    (call $bump (local.get $addr))
    (drop (call $spin (local.get $state) (i32.const 1) (local.get $spins)))
    (local.set $seen (i32.atomic.rmw.cmpxchg (local.get $state) (i32.const 1) (i32.const 0)))
    (if (i32.eq (local.get $seen) (i32.const 2))
      (then (i32.atomic.store (local.get $state) (i32.const 0)) (return (i32.const 1))))
    (i32.shl (i32.eq (local.get $seen) (i32.const 3)) (i32.const 1)))
  ;; Claim a listening loop and wait for its answer: 0 when nobody listened (wake the loop
  ;; another way), else what $wait returns.
  (func (export "request_wait") (param $state i32) (param $addr i32) (param $old i32)
                                (param $spins i32) (param $timeout i64) (result i32)
    (if (i32.ne (i32.atomic.rmw.cmpxchg (local.get $state) (i32.const 1) (i32.const 2))
                (i32.const 1))
      (then (return (i32.const 0))))
    (call $wait (local.get $addr) (local.get $old) (local.get $spins) (local.get $timeout)))
)
"""


class Rendezvous(Protocol):
    """One waiter (a worker) and one waker (the event loop thread); see the module docstring."""

    def clear(self) -> None:
        """Forget an earlier `set` that no wait consumed (call before asking the loop)."""

    def request_wait(self, timeout: float) -> bool | None:
        """Claim a loop that listens for this worker and wait for its answer: None when no loop
        listened (wake it another way, then `wait`), else whether the answer came in time."""

    def wait(self, timeout: float) -> bool:
        """Until `set` (True) or `timeout` seconds (False)."""

    def set(self) -> None:
        """Wake the waiter (any thread)."""

    def set_and_listen(self) -> bool:
        """`set`, then listen briefly for the waiter's next request (event loop thread only);
        True when it came: the caller handles it now."""

    def close(self) -> None:
        """Stop listeners and give the slot back (idempotent)."""


class LockRendezvous:
    """`Rendezvous` on a plain lock: no spinning, no listening."""

    __slots__ = ("_wakeup",)

    def __init__(self) -> None:
        self._wakeup = Wakeup()

    def clear(self) -> None:
        self._wakeup.clear()

    def request_wait(self, timeout: float) -> bool | None:
        return None

    def wait(self, timeout: float) -> bool:
        return self._wakeup.wait(timeout)

    def set(self) -> None:
        self._wakeup.set()

    def set_and_listen(self) -> bool:
        self._wakeup.set()
        return False

    def close(self) -> None:
        pass


class _SharedMemory(wasmtime.SharedMemory):
    # wasmtime-py 50 wraps the pointer once too often when a shared memory is imported.
    def _as_extern(self) -> Any:
        ffi = wasm.ffi  # (only there with the private API; then no _Module is built)
        union = ffi.wasmtime_extern_union(sharedmemory=self.ptr())
        return ffi.wasmtime_extern_t(ffi.WASMTIME_EXTERN_SHAREDMEMORY, union)


class Adaptive:
    """Whether spinning pays off lately: when the waiting thread cannot run at once (a busy
    machine), spins only burn the CPU it needs, so misses turn them off for a while."""

    __slots__ = ("backoff", "skip")

    def __init__(self) -> None:
        self.backoff = 0
        self.skip = 0

    def allow(self) -> bool:
        """Spin this time? (Counts down a backoff; shared unlocked, it may go below 0.)"""
        if self.skip > 0:
            self.skip -= 1
            return False
        return True

    def record(self, paid_off: bool) -> None:
        if paid_off:
            self.backoff = 0
        else:
            self.backoff = min(max(2 * self.backoff, 2), MAX_BACKOFF)
            self.skip = self.backoff


class _Module:
    """The compiled module, its shared memory, the slot allocator and one instance per thread."""

    def __init__(self) -> None:
        config = wasmtime.Config()
        config.wasm_threads = True
        config.shared_memory = True
        self.engine = wasmtime.Engine(config)
        self.module = wasmtime.Module(self.engine, WAT)
        limits = wasmtime.Limits(1, 1)
        self.memory = _SharedMemory(
            self.engine, wasmtime.MemoryType(limits, is_64=False, shared=True)
        )
        self._lock = threading.Lock()
        self._free = list(range(_PAGE - _SLOT_BYTES, -1, -_SLOT_BYTES))
        self._local = threading.local()
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
        self.spins_per_second = self._calibrate() if cpus > 1 else 0.0
        self.worker_spins = Adaptive()
        self.loop_listens = Adaptive()

    def exports(self) -> Any:
        """This thread's instance (a wasmtime store must not be used by two threads)."""
        exports = getattr(self._local, "exports", None)
        if exports is None:
            store = wasmtime.Store(self.engine)
            instance = wasmtime.Instance(store, self.module, [self.memory])
            owner = _Owner(store)
            exports = Exports(instance, store, owner, quick=frozenset({"load", "store", "bump"}))
            self._local.exports, self._local.owner = exports, owner
        return exports

    def _calibrate(self) -> float:
        # Spin rounds per second, measured on a word nobody changes (the last slot's padding).
        exports = self.exports()
        rounds = 1_000_000
        word = _PAGE - 4
        start = time.perf_counter()
        exports.spin(word, exports.load(word), rounds)
        spent = time.perf_counter() - start
        return rounds / max(spent, 1e-6)

    def spins(self, seconds: float) -> int:
        return int(min(self.spins_per_second * seconds, 2**31 - 1))

    def worker_spin(self, timeout: float) -> int:
        """Spin rounds for a worker's next wait (0 while spinning does not pay off)."""
        if not self.spins_per_second or not self.worker_spins.allow():
            return 0
        return self.spins(min(WORKER_SPIN_SECONDS, timeout))

    def allocate(self) -> int | None:
        with self._lock:
            return self._free.pop() if self._free else None

    def release(self, slot: int) -> None:
        with self._lock:
            self._free.append(slot)


class _Owner:
    """What `Exports` binds its calls to (holds the thread's store alive)."""

    __slots__ = ("__weakref__", "store")

    def __init__(self, store: wasmtime.Store) -> None:
        self.store = store


class SpinRendezvous:
    """`Rendezvous` on one slot of the shared module (see the module docstring)."""

    __slots__ = (
        "__weakref__",
        "_answer",
        "_closed",
        "_module",
        "_old",
        "_slot",
        "_state",
    )

    def __init__(self, module: _Module, slot: int) -> None:
        self._module = module
        self._slot = slot
        self._answer, self._state = slot, slot + 4
        exports = module.exports()
        exports.store(self._state, _IDLE)
        self._old = exports.load(self._answer)
        self._closed = False
        weakref.finalize(self, _retire, module, slot)

    def clear(self) -> None:
        self._old = self._module.exports().load(self._answer)

    def request_wait(self, timeout: float) -> bool | None:
        module = self._module
        spins = module.worker_spin(timeout)
        got: int = module.exports().request_wait(
            self._state, self._answer, self._old, spins, _nanos(timeout)
        )
        if got == 0:
            return None
        if spins:
            module.worker_spins.record(got == _CHANGED_SPINNING)
        return got != _UNCHANGED

    def wait(self, timeout: float) -> bool:
        module = self._module
        deadline = time.monotonic() + timeout
        spins = module.worker_spin(timeout)
        while True:
            got: int = module.exports().wait(self._answer, self._old, spins, _nanos(timeout))
            if spins:
                module.worker_spins.record(got == _CHANGED_SPINNING)
            if got != _UNCHANGED:
                return True
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return False
            spins = 0

    def set(self) -> None:
        self._module.exports().bump(self._answer)

    def set_and_listen(self) -> bool:
        module = self._module
        listens = module.loop_listens
        if self._closed or not module.spins_per_second or not listens.allow():
            module.exports().bump(self._answer)
            return False
        claimed: int = module.exports().bump_listen(
            self._answer, self._state, module.spins(LOOP_LISTEN_SECONDS)
        )
        if claimed == _RETIRED_LISTEN:  # the step ended (before or during the listen)
            return False
        # A miss: the guest works longer between calls than a listen lasts, or the machine
        # is too busy for the worker to run at once; either way, stop stalling the loop.
        listens.record(claimed == 1)
        return claimed == 1

    def close(self) -> None:
        # Retired (not idle): a listener still spinning on the slot stops at once, and a
        # request made after this is not claimed.
        if not self._closed:
            self._closed = True
            self._module.exports().store(self._state, _RETIRED)


def _retire(module: _Module, slot: int) -> None:
    # Handed back only when the rendezvous is gone, so no late `set` lands on a new owner.
    module.release(slot)


def _nanos(seconds: float) -> int:
    return max(int(seconds * 1e9), 0)


_shared: _Module | None = None
_shared_state = "new"  # new -> building -> ready | failed
_shared_lock = threading.Lock()


def _build_shared() -> None:
    global _shared, _shared_state
    try:
        module = _Module()
    except Exception:  # whatever this wasmtime lacks (shared memories, threads, an API)
        with _shared_lock:
            _shared_state = "failed"  # this wasmtime cannot share memories: locks only
        return
    with _shared_lock:
        _shared, _shared_state = module, "ready"


def _shared_module() -> _Module | None:
    """The module once built. The first call starts building it on a thread of its own
    (compiling takes a few milliseconds) and callers use locks until it is ready."""
    global _shared_state
    with _shared_lock:
        if _shared_state != "new":
            return _shared
        _shared_state = "building"
    threading.Thread(target=_build_shared, name="nodmix-rendezvous-build", daemon=True).start()
    return None


def new_rendezvous() -> Rendezvous:
    """A spinning rendezvous when this process has one ready, else a lock-based one."""
    module = _shared_module() if wasm.FAST_PATH else None
    slot = None if module is None else module.allocate()
    if module is None or slot is None:
        return LockRendezvous()
    try:
        return SpinRendezvous(module, slot)
    except wasmtime.WasmtimeError:  # this thread's instance could not be made (memory)
        module.release(slot)
        return LockRendezvous()
