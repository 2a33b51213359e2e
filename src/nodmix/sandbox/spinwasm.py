"""The wasm side of `rendezvous`: a small module of our own on one shared wasm memory.

Its functions spin on, block on and wake up 32-bit words of a shared memory page; wasmtime runs
them with the GIL released, which is the point (see `rendezvous`). Each thread calls them
through its own instance (a wasmtime store must not be used by two threads); the page is
divided into 16-byte slots, one per rendezvous. `Adaptive` is the shared record of whether
spinning pays off lately.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

import wasmtime

from nodmix.sandbox import wasm
from nodmix.sandbox.threads import usable_cpus
from nodmix.sandbox.wasm import Exports

#: The most waits (answers) that skip spinning (listening) after misses (see `Adaptive`).
MAX_BACKOFF: Final = 64
#: Misses beyond hits that cost nothing, and where the pressure stops growing.
FREE_MISSES: Final = 2
MAX_PRESSURE: Final = FREE_MISSES + 6
#: Words per slot: the answer counter, the loop's listening state, what the waiter does
#: (spinning or blocked), and padding.
SLOT_BYTES: Final = 16
PAGE: Final = 65536
IDLE, LISTENING, CLAIMED, RETIRED = 0, 1, 2, 3
#: What the module's `wait` returns.
CHANGED_SPINNING, CHANGED_BLOCKED, UNCHANGED = 1, 2, 3
#: What `bump_listen` returns for a retired slot, and when the waiter was blocked (both:
#: answered, not listened).
RETIRED_LISTEN: Final = 2
WAITER_ASLEEP: Final = 3

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
  ;; spinning, 2 when it changed while blocked, 3 when it did not change in time. The word
  ;; after it tells the waker what the waiter does (1 spinning, 2 blocked, 0 neither).
  (func $wait (param $addr i32) (param $old i32) (param $spins i32) (param $timeout i64)
              (result i32)
    (local $doing i32) (local $got i32)
    (local.set $doing (i32.add (local.get $addr) (i32.const 8)))
    (i32.atomic.store (local.get $doing) (i32.const 1))
    (if (i32.ne (call $spin (local.get $addr) (local.get $old) (local.get $spins))
                (local.get $old))
      (then (i32.atomic.store (local.get $doing) (i32.const 0)) (return (i32.const 1))))
    (i32.atomic.store (local.get $doing) (i32.const 2))
    (drop (memory.atomic.wait32 (local.get $addr) (local.get $old) (local.get $timeout)))
    (i32.atomic.store (local.get $doing) (i32.const 0))
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
  ;; (before: only bumped, a listen must not revive a closed slot; or meanwhile), 3 when
  ;; the waiter was blocked: only bumped, since a woken thread starts slowly and a listener
  ;; spinning meanwhile may hold the very CPU it is woken on.
  (func (export "bump_listen") (param $addr i32) (param $state i32) (param $spins i32)
                               (result i32)
    (local $seen i32)
    (if (i32.eq (i32.atomic.load (i32.add (local.get $addr) (i32.const 8))) (i32.const 2))
      (then (call $bump (local.get $addr)) (return (i32.const 3))))
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


class _SharedMemory(wasmtime.SharedMemory):
    # wasmtime-py 50 wraps the pointer once too often when a shared memory is imported.
    def _as_extern(self) -> Any:
        ffi = wasm.ffi  # (only there with the private API; then no _Module is built)
        union = ffi.wasmtime_extern_union(sharedmemory=self.ptr())
        return ffi.wasmtime_extern_t(ffi.WASMTIME_EXTERN_SHAREDMEMORY, union)


class Adaptive:
    """Whether spinning pays off lately: when the waiting thread cannot run at once (a busy
    machine, a guest computing between calls), spins only burn the CPU it needs.

    Each miss adds to a pressure and each hit takes one off; past `FREE_MISSES` more misses
    than hits, the next waits skip spinning, twice as many for every further miss (up to
    `MAX_BACKOFF`). An occasional miss (a cell's first call into a fresh instance, its last
    answer before it ends) costs nothing, while a run of them turns spinning off quickly.
    """

    __slots__ = ("pressure", "skip")

    def __init__(self) -> None:
        self.pressure = 0
        self.skip = 0

    def allow(self) -> bool:
        """Spin this time? (Counts down a backoff; shared unlocked, it may go below 0.)"""
        if self.skip > 0:
            self.skip -= 1
            return False
        return True

    def record(self, paid_off: bool) -> None:
        if paid_off:
            self.pressure = max(self.pressure - 1, 0)
            return
        self.pressure = min(self.pressure + 1, MAX_PRESSURE)
        if self.pressure > FREE_MISSES:
            self.skip = min(2 ** (self.pressure - FREE_MISSES), MAX_BACKOFF)


class SpinModule:
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
        self._free = list(range(PAGE - SLOT_BYTES, -1, -SLOT_BYTES))
        self._local = threading.local()
        self.spins_per_second = self._calibrate() if usable_cpus() > 1 else 0.0
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
        # Spin rounds per second on a word nobody changes (the last slot's padding); the
        # fastest of a few short runs, so that a preemption during one does not shorten every
        # spin of the process.
        exports = self.exports()
        rounds, word, best = 200_000, PAGE - 4, float("inf")
        for _ in range(5):
            start = time.perf_counter()
            exports.spin(word, exports.load(word), rounds)
            best = min(best, time.perf_counter() - start)
        return rounds / max(best, 1e-6)

    def spins(self, seconds: float) -> int:
        return int(min(self.spins_per_second * seconds, 2**31 - 1))

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
