"""Turning guest exceptions and VM failures into `Failed` outcomes with readable messages."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from nodmix.sandbox.base import Failed, FailureKind
from nodmix.sandbox.prelude import MAX_VALUE_DEPTH, TOO_DEEP

# A stack frame as QuickJS prints it: "    at fn (cell.js:3:9)" or "    at cell.js:3:9".
_FRAME: Final = re.compile(r"\(?([^\s():]+):(\d+)(?::(\d+))?\)?\s*$")
OUT_OF_MEMORY: Final = "InternalError: out of memory"
_STACK_EXCEEDED: Final = "Maximum call stack size exceeded"


def location(stack: str, filename: str) -> str | None:
    """`file:line:column` of the first stack frame in the guest's own file, if any.

    Frames of the prelude (`<nodmix>`) and setup script (`<setup>`) are skipped, and since the
    filename is chosen by the embedding, no host path can appear.
    """
    for line in stack.splitlines():
        match = _FRAME.search(line.strip())
        if match and match.group(1) == filename:
            return ":".join(group for group in match.groups() if group)
    return None


def from_description(description: str, filename: str) -> Failed:
    """The failure for a guest exception, from the prelude's `describe(error)` JSON.

    Errors read `Name: message (at cell.js:3:7)`; thrown non-errors read `Uncaught <value>`.
    An uncaught out-of-memory error is a MEMORY failure; runaway recursion or a value nesting
    too deeply (a `RangeError` the VM or the bridge threw) is a STACK failure; everything else is
    a GUEST_ERROR.
    """
    info: dict[str, Any] = json.loads(description)
    name, message = str(info.get("name", "")), str(info.get("message", ""))
    if name == "InternalError" and message == "out of memory":
        return Failed(FailureKind.MEMORY, OUT_OF_MEMORY)
    text = (f"{name}: {message}" if message else name) if name else f"Uncaught {message}"
    where = location(str(info.get("stack", "")), filename)
    kind = FailureKind.GUEST_ERROR
    if info.get("error") and name == "RangeError" and message in (_STACK_EXCEEDED, TOO_DEEP):
        kind = FailureKind.STACK
        if message == _STACK_EXCEEDED:
            text = f"{text}: the program recursed too deeply"
    return Failed(
        kind,
        f"{text} (at {where})" if where else text,
        error_name=name,
        error_message=message,
    )


def timeout(budget: float) -> Failed:
    """The failure for an exhausted execution budget."""
    return Failed(FailureKind.TIMEOUT, f"the program exceeded its {budget:g} s execution budget")


def trapped(message: str) -> Failed:
    """The failure for a wasm trap other than the epoch deadline (the VM is dead)."""
    if "out of memory" in message:
        return Failed(FailureKind.MEMORY, f"the VM ran out of memory ({message})")
    if "stack overflow" in message:
        return Failed(
            FailureKind.STACK,
            "the program's value or recursion nests too deeply: the VM's native stack ran out "
            f"(values leaving the program may nest at most {MAX_VALUE_DEPTH} levels)",
        )
    return Failed(FailureKind.TRAP, f"the VM crashed ({message})")


ABORTED: Final = Failed(FailureKind.ABORTED, "the run was interrupted by the host")
STALLED: Final = Failed(
    FailureKind.STALLED, "the program is waiting for a promise that nothing can settle"
)
UNDESCRIBABLE: Final = Failed(FailureKind.INTERNAL, "the guest error could not be described")
MEMORY: Final = Failed(FailureKind.MEMORY, OUT_OF_MEMORY)


def host_failure(exc: BaseException) -> Failed:
    """The failure for a handler that raised something other than `HostCallError`."""
    return Failed(FailureKind.INTERNAL, f"host handler failed: {type(exc).__name__}")
