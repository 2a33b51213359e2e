"""The `exec`/`wait` result union (`completed`, `waiting`, `failed`) and its error codes."""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

ErrorCode: TypeAlias = Literal[
    "invalid_input",
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
