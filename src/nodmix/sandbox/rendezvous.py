"""Wake-ups between a sandbox worker and the event loop that do not sleep when the wait is short.

A guest awaiting a quick tool hands the call to the event loop and waits for the result; then
the loop waits for the guest's next call. With locks, each of those waits puts a thread to
sleep and each hand-over wakes it again: two wake-ups per call, ~25-35 µs each on a virtual
machine (the sleeping vCPU has to be woken by the host), more than the call itself costs.

A `Rendezvous` waits by spinning first, for a bounded time, and only then blocks. Spinning
has to happen with the GIL released (a Python spin loop would hold it and stall the very
thread it waits for), so both the spin and the block run inside a tiny wasm module of our own
(`spinwasm`) on a shared wasm memory, which wasmtime calls with the GIL released:

- `wait`: spin while a word keeps its value, then `memory.atomic.wait32` with a timeout;
- `bump`: add one to the word and `memory.atomic.notify` its waiter;
- `bump_listen` (loop side): bump, then listen for the worker's next request for a moment, so
  the worker does not have to wake the loop through its self-pipe;
- `request_wait` (worker side): claim a listening loop and wait for its answer.

A listen's store happens after the GIL is released, so the woken thread finds it free; a plain
`bump` (the loop's answer when it has other work) keeps it, or the loop queued behind woken
workers to get it back (8% of its time with eight busy guests). Spinning is off with one CPU
(machine or affinity mask), where it could only delay the thread it waits for, skipped while
other guests hold the CPU slots, and backs off while it does not pay off. Without the
module (a wasmtime without shared memories), `LockRendezvous` offers the same on a plain lock.
"""

from __future__ import annotations

import threading
import time
import weakref
from typing import Final, Protocol

import wasmtime

from nodmix.sandbox import wasm
from nodmix.sandbox.spinwasm import (
    CHANGED_SPINNING,
    IDLE,
    RETIRED,
    RETIRED_LISTEN,
    UNCHANGED,
    WAITER_ASLEEP,
    Adaptive,
    SpinModule,
)
from nodmix.sandbox.threads import Wakeup, free_cpu_slots

#: How long a worker spins for the loop's answer before it blocks.
WORKER_SPIN_SECONDS: Final = 100e-6
#: How long the loop listens for a worker's next call after handing it a result.
LOOP_LISTEN_SECONDS: Final = 150e-6


class WakeCounts:
    """How this process's waits for the loop ended (for benchmarks and tests; a few unlocked
    counters, so two workers may rarely lose a count): `listen` (a listening loop took the
    request), `spin` (the answer came while spinning), `lock` (the waiter slept and was woken),
    `timeout` (no answer in time)."""

    __slots__ = ("listen", "lock", "spin", "timeout")

    def __init__(self) -> None:
        self.listen = self.spin = self.lock = self.timeout = 0

    def as_dict(self) -> dict[str, int]:
        """The counts by name."""
        return {name: getattr(self, name) for name in ("listen", "spin", "lock", "timeout")}


wake_counts = WakeCounts()


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
        if self._wakeup.wait(timeout):
            wake_counts.lock += 1
            return True
        wake_counts.timeout += 1
        return False

    def set(self) -> None:
        self._wakeup.set()

    def set_and_listen(self) -> bool:
        self._wakeup.set()
        return False

    def close(self) -> None:
        pass


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

    def __init__(self, module: SpinModule, slot: int) -> None:
        self._module = module
        self._slot = slot
        self._answer, self._state = slot, slot + 4
        exports = module.exports()
        exports.store(self._state, IDLE)
        self._old = exports.load(self._answer)
        self._closed = False
        weakref.finalize(self, _retire, module, slot)

    def clear(self) -> None:
        self._old = self._module.exports().load(self._answer)

    def request_wait(self, timeout: float) -> bool | None:
        module = self._module
        spins = _worker_spin(module, timeout)
        got: int = module.exports().request_wait(
            self._state, self._answer, self._old, spins, _nanos(timeout)
        )
        if got == 0:
            return None
        if spins:
            module.worker_spins.record(got == CHANGED_SPINNING)
        if got == UNCHANGED:
            wake_counts.timeout += 1
            return False
        wake_counts.listen += 1
        return True

    def wait(self, timeout: float) -> bool:
        module = self._module
        deadline = time.monotonic() + timeout
        spins = _worker_spin(module, timeout)
        while True:
            got: int = module.exports().wait(self._answer, self._old, spins, _nanos(timeout))
            if spins:
                module.worker_spins.record(got == CHANGED_SPINNING)
            if got == CHANGED_SPINNING:
                wake_counts.spin += 1
                return True
            if got != UNCHANGED:
                wake_counts.lock += 1
                return True
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                wake_counts.timeout += 1
                return False
            spins = 0

    def set(self) -> None:
        self._module.exports().bump(self._answer)

    def set_and_listen(self) -> bool:
        module = self._module
        listens = module.loop_listens
        if self._closed or not _may_spin(module, listens):
            module.exports().bump(self._answer)
            return False
        claimed: int = module.exports().bump_listen(
            self._answer, self._state, module.spins(LOOP_LISTEN_SECONDS)
        )
        if claimed in (RETIRED_LISTEN, WAITER_ASLEEP):  # the step ended, or a sleeper to wake
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
            self._module.exports().store(self._state, RETIRED)


def _may_spin(module: SpinModule, record: Adaptive) -> bool:
    """Whether this wait (or listen) may spin: the CPU can (more than one usable), a CPU is
    spare (a spinner needs one of its own next to the loop and the guest it waits for; while
    other guests hold the CPU slots it would only take theirs), and `record` is not backing
    off."""
    return bool(module.spins_per_second) and free_cpu_slots() >= 2 and record.allow()


def _worker_spin(module: SpinModule, timeout: float) -> int:
    """Spin rounds for a worker's next wait (0 while spinning does not pay off)."""
    if not _may_spin(module, module.worker_spins):
        return 0
    return module.spins(min(WORKER_SPIN_SECONDS, timeout))


def _retire(module: SpinModule, slot: int) -> None:
    # Handed back only when the rendezvous is gone, so no late `set` lands on a new owner.
    module.release(slot)


def _nanos(seconds: float) -> int:
    return max(int(seconds * 1e9), 0)


_shared: SpinModule | None = None
_shared_state = "new"  # new -> building -> ready | failed
_shared_lock = threading.Lock()


def _build_shared() -> None:
    global _shared, _shared_state
    try:
        module = SpinModule()
    except Exception:  # whatever this wasmtime lacks (shared memories, threads, an API)
        with _shared_lock:
            _shared_state = "failed"  # this wasmtime cannot share memories: locks only
        return
    with _shared_lock:
        _shared, _shared_state = module, "ready"


def _shared_module() -> SpinModule | None:
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
