"""The `exec`/`wait` result union (`completed`, `waiting`, `failed`), its error codes, and the
accounting behind `telemetry.tokensAvoided` (results delivered into programs vs returned)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, TypeAlias

if TYPE_CHECKING:
    from nodmix.codemode.runs import NestedCall, RunState

ErrorCode: TypeAlias = Literal[
    "invalid_input",
    "guest_error",
    "unsupported_language",
    "typescript_transform_failed",
    "module_access_denied",
    "timeout",
    "memory_limit_exceeded",
    "output_limit_exceeded",
    "snapshot_limit_exceeded",
    "snapshot_expired",
    "too_many_pending_tool_calls",
    "nested_tool_failed",
    "aborted",
    "runtime_unavailable",
    "internal_error",
]

Result: TypeAlias = dict[str, Any]


def completed(value: Any, output: list[dict[str, Any]], telemetry: dict[str, Any]) -> Result:
    """The program finished; `value` is its return value."""
    out: Result = {"status": "completed", "value": value}
    if output:
        out["output"] = output
    out["telemetry"] = telemetry
    return out


def waiting(
    run_id: str,
    reason: Literal["pending_tools", "yield"],
    pending: list[dict[str, Any]],
    output: list[dict[str, Any]],
    telemetry: dict[str, Any],
) -> Result:
    """The program is suspended; `wait` with `run_id` resumes it."""
    out: Result = {"status": "waiting", "runId": run_id, "reason": reason}
    if pending:
        out["pendingToolCalls"] = pending
    if output:
        out["output"] = output
    out["telemetry"] = telemetry
    return out


def failed(
    error: str,
    code: ErrorCode | None,
    output: list[dict[str, Any]],
    telemetry: dict[str, Any],
) -> Result:
    """The program (or the request) failed; `error` says what to do about it."""
    out: Result = {"status": "failed", "error": error}
    if code is not None:
        out["code"] = code
    if output:
        out["output"] = output
    out["telemetry"] = telemetry
    return out


def returned(state: RunState, chars: int = 0) -> None:
    """Count what a result hands back to the model (its value or error, `chars`, and the
    output so far) against the run's `tokensAvoided.resultTokens`."""
    state.catalog.counters.returned_chars += chars + state.output_bytes


def delivered(state: RunState, call: NestedCall) -> None:
    """Count a nested result delivered into the program: the text a direct-mode model would
    have read for this call."""
    if call.result is not None:
        state.catalog.counters.delivered_chars += len(call.result.text_content)
