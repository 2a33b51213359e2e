"""How a run's last step becomes its `exec`/`wait` result: completed, or failed with a code.

Every ending cancels the nested calls the guest will never receive and records the returned
size for telemetry.
"""

from __future__ import annotations

from collections.abc import Callable

from nodmix.codemode import results
from nodmix.codemode.detach import Detached
from nodmix.codemode.locations import (
    SourceMap,
    guest_error,
    output_too_large,
    value_too_large,
)
from nodmix.codemode.nested import cancel_all
from nodmix.codemode.results import ErrorCode, Result, returned
from nodmix.codemode.runs import RunState
from nodmix.sandbox import Completed, Failed, FailureKind

FAILURE_CODES: dict[FailureKind, ErrorCode | None] = {
    FailureKind.GUEST_ERROR: "guest_error",
    FailureKind.TIMEOUT: "timeout",
    FailureKind.MEMORY: "memory_limit_exceeded",
    FailureKind.STALLED: None,
    FailureKind.ABORTED: "aborted",
    FailureKind.STACK: "stack_overflow",
    FailureKind.TRAP: "internal_error",
    FailureKind.INTERNAL: "internal_error",
}


def run_completed(
    state: RunState, outcome: Completed, detach: Callable[[], Detached] | None = None
) -> Result:
    """The program returned: `completed`, unless its value or output is over the limit.

    `detach` leaves the calls the program did not await running (see `codemode.detach`);
    without it they are cancelled."""
    if state.output_exceeded:
        return run_failed(state, output_too_large(state), "output_limit_exceeded")
    size = len(outcome.value_json.encode())
    if size > state.settings.max_output_bytes:
        return run_failed(state, value_too_large(size, state), "output_limit_exceeded")
    left = None
    if detach is not None and (state.calls or state.new_calls or state.queued):
        left = detach()
    else:
        cancel_all(state)
    returned(state, len(outcome.value_json))
    result = results.completed(outcome.value(), state.output, state.catalog.telemetry())
    warnings = unhandled_warnings(state, outcome)
    if left is not None and (left.running or left.dropped):
        if left.running:
            result["inFlightToolCalls"] = left.describe()
        warnings.append(left.warning())
    if warnings:
        result["warnings"] = warnings
    return result


def unhandled_warnings(state: RunState, outcome: Completed | Failed) -> list[str]:
    """What the model reads about promise rejections the program never handled (locations
    mapped to the program as written, like an uncaught error's)."""
    source_map = state.source_map
    lines = []
    for line in outcome.unhandled:
        mapped = source_map.rewrite(line) if isinstance(source_map, SourceMap) else None
        lines.append(
            f"Unhandled promise rejection: {line if mapped is None else mapped[0]}. Nothing "
            "awaited or caught it, so the program went on without it: await the promise "
            "(inside try/catch) or add .catch() to it."
        )
    if outcome.unhandled_more:
        lines.append(f"...and {outcome.unhandled_more} more unhandled promise rejections.")
    return lines


def run_failure(state: RunState, outcome: Failed) -> Result:
    """The sandbox step failed: `failed` with the code that says what to do about it."""
    code = FAILURE_CODES.get(outcome.kind)
    message = outcome.message
    guest = None
    if outcome.kind is FailureKind.GUEST_ERROR:
        message, guest = guest_error(state, outcome)
        if message.startswith("SyntaxError"):
            code = "invalid_input"
        elif any(message.startswith(f"Error: {e}") for e in state.nested_errors):
            code = "nested_tool_failed"
    if state.output_exceeded:
        code, message, guest = "output_limit_exceeded", output_too_large(state), None
    result = run_failed(state, message, code)
    if guest is not None:
        result["guestError"] = guest
    if outcome.unhandled or outcome.unhandled_more:
        result["warnings"] = unhandled_warnings(state, outcome)
    return result


def run_failed(state: RunState, message: str, code: ErrorCode | None) -> Result:
    """`failed` with `message` and `code`."""
    cancel_all(state)
    returned(state, len(message))
    return results.failed(message, code, state.output, state.catalog.telemetry())
