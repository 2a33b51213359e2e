"""Small value and signal types of the VM layer, and the scopes a step uses it in (kept apart
so `vm.py` and `cell.py` stay readable)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

import wasmtime

from nodmix.errors import SandboxError
from nodmix.sandbox import hostio
from nodmix.sandbox.memimage import PageRuns

#: A host function: receives the borrowed argument handles, returns an owned handle (or 0
#: after throwing into the guest with `VM.throw_string`).
HostFunction = Callable[[list[int]], int]
WASM_PAGE: Final = 65536


class GuestThrow(Exception):
    """A JavaScript exception escaped to the host; `handle` is the owned exception value."""

    def __init__(self, handle: int) -> None:
        self.handle = handle
        super().__init__("guest exception")


class VMTrapped(Exception):
    """The wasm instance trapped; the VM is dead.

    Attributes:
        message: A short description of the trap.
        interrupt: True if the epoch deadline (the timeout backstop) caused it.
    """

    def __init__(self, message: str, *, interrupt: bool) -> None:
        self.message = message
        self.interrupt = interrupt
        super().__init__(message)


class DeadlineExceeded(Exception):
    """The host noticed the deadline between jobs (the guest itself was not interrupted)."""


class VMOutOfMemory(Exception):
    """The host could not allocate inside the VM: the guest has exhausted its memory."""


@dataclass(frozen=True, slots=True)
class VMImage:
    """Everything needed to rebuild a VM: linear memory plus the few values outside it.

    The module defines exactly one mutable global (`__stack_pointer`) and a static function
    table, so memory + stack pointer + the runtime/context pointers are the whole state.
    """

    memory: bytes | memoryview
    stack_pointer: int
    runtime_ptr: int
    context_ptr: int
    scratch_ptr: int

    def start(self, fresh: bytes) -> VMStart:
        """This image as a `VMStart`: only the pages that differ from `fresh` (a fresh
        instance's memory) are kept, the rest already holds its content."""
        if len(self.memory) % WASM_PAGE:
            raise SandboxError("corrupt snapshot image")
        pages = PageRuns.diff(self.memory, fresh)
        return VMStart(
            pages, self.stack_pointer, self.runtime_ptr, self.context_ptr, self.scratch_ptr
        )


@dataclass(frozen=True, slots=True)
class VMStart:
    """A VM's starting state as the pages that differ from a fresh instance's memory (the
    memory's size is `pages.size`), plus the values outside linear memory (see `VMImage`)."""

    pages: PageRuns
    stack_pointer: int
    runtime_ptr: int
    context_ptr: int
    scratch_ptr: int


_TRAPS: Final = (wasmtime.Trap, wasmtime.WasmtimeError, hostio.OutOfBounds)


class EntryScope:
    """`VM.entry`'s scope: a wasm trap inside it becomes what `trapped` makes of it (a class
    rather than a generator-based context manager: a cell enters its VM once per guest tool
    call)."""

    __slots__ = ("_trapped",)

    def __init__(self, trapped: Callable[[BaseException], VMTrapped]) -> None:
        self._trapped = trapped

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        if exc is not None and isinstance(exc, _TRAPS):
            raise self._trapped(exc) from None


class Entering(Protocol):
    """What `StepScope` needs of a VM."""

    def entry(self, seconds: float) -> EntryScope: ...


class StepScope:
    """One use of a cell's VM: holds the cell's lock, enters the VM with `seconds` left, and
    reports the time used to `charge` (a class for the same reason as `EntryScope`).

    Raises (when created):
        SandboxError: The lock is taken (cells are not re-entrant).
    """

    __slots__ = ("_charge", "_entry", "_lock", "_start")

    def __init__(
        self,
        lock: threading.Lock,
        vm: Entering,
        seconds: float,
        charge: Callable[[float], None],
    ) -> None:
        if not lock.acquire(blocking=False):
            raise SandboxError("cell is already in use (cells are not re-entrant)")
        self._lock, self._charge = lock, charge
        self._start = time.monotonic()
        try:
            self._entry = vm.entry(seconds)
        except BaseException:
            self._end()
            raise

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        try:
            self._entry.__exit__(exc_type, exc, tb)
        finally:
            self._end()

    def _end(self) -> None:
        self._charge(time.monotonic() - self._start)
        self._lock.release()
