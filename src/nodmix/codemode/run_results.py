"""How a run's last step becomes its `exec`/`wait` result: completed, or failed with a code.

Every ending cancels the nested calls the guest will never receive and records the returned
size for telemetry.
"""

from __future__ import annotations

from nodmix.codemode import results
from nodmix.codemode.locations import guest_error, output_too_large, value_too_large
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


def run_completed(state: RunState, outcome: Completed) -> Result:
    """The program returned: `completed`, unless its value or output is over the limit."""
    cancel_all(state)
    if state.output_exceeded:
        return run_failed(state, output_too_large(state), "output_limit_exceeded")
    size = len(outcome.value_json.encode())
    if size > state.settings.max_output_bytes:
        return run_failed(state, value_too_large(size, state), "output_limit_exceeded")
    returned(state, len(outcome.value_json))
    return results.completed(outcome.value(), state.output, state.catalog.telemetry())


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
    return result


def run_failed(state: RunState, message: str, code: ErrorCode | None) -> Result:
    """`failed` with `message` and `code`."""
    cancel_all(state)
    returned(state, len(message))
    return results.failed(message, code, state.output, state.catalog.telemetry())
