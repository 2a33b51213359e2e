"""Value types of the sandbox API: limits, step outcomes, the host handler protocol, errors."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, Protocol

from nodmix.errors import NodmixError, SandboxError

MiB: Final = 1 << 20
KiB: Final = 1 << 10


@dataclass(frozen=True, slots=True)
class SandboxLimits:
    """Resource limits of one `Cell`, applied afresh on every boot and restore.

    Attributes:
        timeout: Guest execution budget in seconds for this `Cell` object, summed over every
            call into the VM (`run`, `deliver`, `pump`, ...). Time spent waiting for host work
            between calls is not counted; time spent inside synchronous host handlers is.
            The QuickJS interrupt handler enforces it (catchable by nobody); a wasmtime epoch
            deadline at 1.5x plus two ticks backs it up for long native builtins.
        memory_bytes: QuickJS heap limit. Allocations past it throw a catchable
            `InternalError: out of memory`; linear memory is hard-capped at this plus
            `memory_headroom_bytes`.
        memory_headroom_bytes: Extra linear memory beyond the heap limit (allocator slack,
            stack, static data) before wasmtime refuses to grow memory.
        stack_bytes: QuickJS stack limit; deep recursion throws a catchable `RangeError`.
    """

    timeout: float = 10.0
    memory_bytes: int = 64 * MiB
    memory_headroom_bytes: int = 8 * MiB
    stack_bytes: int = 128 * KiB

    def __post_init__(self) -> None:
        if not 0 < self.timeout <= 3600:
            raise ValueError("timeout must be in (0, 3600] seconds")
        if not 1 * MiB <= self.memory_bytes <= 1024 * MiB:
            raise ValueError("memory_bytes must be between 1 MiB and 1 GiB")
        if not 0 <= self.memory_headroom_bytes <= 256 * MiB:
            raise ValueError("memory_headroom_bytes must be between 0 and 256 MiB")
        # The native wasm stack is 2 MiB; keep QuickJS's own check well inside it (pitfall 4).
        if not 16 * KiB <= self.stack_bytes <= 256 * KiB:
            raise ValueError("stack_bytes must be between 16 KiB and 256 KiB")


class FailureKind(StrEnum):
    """Why a step failed.

    - GUEST_ERROR: an uncaught exception or a syntax error in guest code.
    - TIMEOUT: the execution budget ran out (interrupt, or the epoch backstop trapped).
    - MEMORY: the guest ran out of memory (uncaught `InternalError: out of memory`).
    - STALLED: the program awaits a promise that nothing can settle (no host request pending).
    - ABORTED: the host called `Cell.interrupt()`.
    - STACK: the guest's own fault, too deep: an uncaught `Maximum call stack size exceeded`
      (runaway recursion), a value nesting deeper than the bridge allows, or a native stack
      overflow trap (e.g. the guest's own `JSON.stringify` of a 100k-deep object; the VM is
      dead).
    - TRAP: the wasm instance trapped for another reason; the VM is dead.
    - INTERNAL: a host-side failure (a handler raised, a bridge invariant broke).
    """

    GUEST_ERROR = "guest_error"
    TIMEOUT = "timeout"
    MEMORY = "memory"
    STALLED = "stalled"
    ABORTED = "aborted"
    STACK = "stack"
    TRAP = "trap"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Completed:
    """The program's result promise fulfilled.

    Attributes:
        value_json: The final value as JSON text, always valid JSON: `undefined` becomes
            `null`, bigint/symbol/function values become strings, nested errors become
            `{"name", "message"}` and unserializable values (cycles) a descriptive string.
    """

    value_json: str
    unhandled: tuple[str, ...] = ()
    """Promise rejections nothing handled by the time the program ended, each one line
    (`Error: boom (at cell.js:2:9)`); see `VM.promise_rejection`."""
    unhandled_more: int = 0
    """Further unhandled rejections, past the ones the VM keeps, only counted."""

    def value(self) -> Any:
        """The decoded final value."""
        return json.loads(self.value_json)


@dataclass(frozen=True, slots=True)
class Failed:
    """The step failed; the cell is finished.

    Attributes:
        kind: The failure category.
        message: One readable line, e.g. `TypeError: x is not a function (at cell.js:3:7)`.
            It never contains host paths or host stack traces.
    """

    kind: FailureKind
    message: str
    error_name: str = ""
    """For a guest exception: its `name` (`TypeError`...), empty for a thrown non-error."""
    error_message: str = ""
    """For a guest exception: its `message` alone (no name, no location)."""
    unhandled: tuple[str, ...] = ()
    """Promise rejections nothing handled by the time the program ended (as in `Completed`)."""
    unhandled_more: int = 0
    """Further unhandled rejections, only counted."""


@dataclass(frozen=True, slots=True)
class Pending:
    """The result promise is still pending and host requests are outstanding.

    Attributes:
        request_ids: Every request id that has not been delivered yet, ascending.
    """

    request_ids: tuple[int, ...]


Outcome = Completed | Failed | Pending


class HostCallError(Exception):
    """Raise from a handler to make the guest's `call`/`request` fail with `Error(message)`.

    Only the message crosses into the guest; the exception object never does.
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)


@dataclass(frozen=True, slots=True)
class TrustedScript:
    """A `HostHandler.on_call` reply that the guest receives as the value of a trusted script.

    `source` (a function expression, typically) is compiled once per process and cached as
    bytecode like the prelude, then evaluated in the guest's VM; the guest's `call` returns the
    resulting function. For embedding code that is loaded on first use instead of at boot.
    Only host-owned source may be returned this way (it runs with the bytecode cache's trust).
    """

    source: str
    filename: str


class HostHandler(Protocol):
    """The embedding's side of the guest bridge.

    Methods run synchronously on the thread that is executing the cell, while the guest is
    paused inside the call: keep them short (their time counts against the budget) and never
    call back into the cell from them (cells are not re-entrant). Raise `HostCallError` to
    fail the guest's call; any other exception is logged, the guest sees a generic error and
    the step fails with kind INTERNAL.
    """

    def on_call(self, op: str, payload_json: str) -> str | TrustedScript | None:
        """A synchronous guest `call(op, payloadJson)`.

        Returns:
            A string returned to the guest as is, None for `undefined`, or a `TrustedScript`
            whose completion value (a function) the guest receives.

        Raises:
            HostCallError: The guest call throws `Error(message)`.
        """
        ...

    def on_request(self, request_id: int, op: str, payload_json: str) -> tuple[bool, str] | None:
        """An asynchronous guest `request(op, payload)`; the payload arrives as JSON text.

        Returns:
            `(True, value_json)` or `(False, error_message)` to settle the promise at once,
            or None to leave it pending until `Cell.deliver(request_id, ...)`.

        Raises:
            HostCallError: The request's promise rejects with `Error(message)`.
        """
        ...


class SnapshotError(SandboxError):
    """A snapshot is malformed, from another build, or does not fit the limits."""


class TypeScriptTransformError(NodmixError):
    """The TypeScript transform rejected a cell; `str(err)` is the readable diagnostic."""

    def __init__(self, message: str, *, diagnostics: str | None = None) -> None:
        self.diagnostics = diagnostics or message
        super().__init__(message)
