"""The `exec`/`wait` result union (`completed`, `waiting`, `failed`), its error codes, the
compact text the model reads, and the accounting behind `telemetry.tokensAvoided` (results
delivered into programs vs returned).

A result carries `telemetry` for hooks, events, the transcript's details and `--json`; the model
reads only what it acts on (`model_text`), unless `tools.codeMode.telemetryToModel` is on."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

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
    "lost_in_restart",
    "too_many_pending_tool_calls",
    "nested_tool_failed",
    "aborted",
    "runtime_unavailable",
    "stack_overflow",
    "source_too_large",
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
    reason: str,
    pending: list[dict[str, Any]],
    output: list[dict[str, Any]],
    telemetry: dict[str, Any],
) -> Result:
    """The program is suspended; `wait` with `run_id` resumes it.

    `reason` is `pending_tools` (tools still running), `yield` (the program yielded), or
    `client_tool` (it waits only for results the client application sends).
    """
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


MODEL_FIELDS: Final = (
    "status",
    "value",
    "output",
    "warnings",
    "runId",
    "reason",
    "pendingToolCalls",
    "error",
    "code",
)
"""What the model acts on, in the order it reads them."""


def model_view(result: Result, *, telemetry: bool = False) -> Result:
    """The fields of `result` the model reads: empty and null ones left out, except a completed
    program's `value` (null is an answer too); `telemetry` only when asked for."""
    view: Result = {}
    for key in MODEL_FIELDS:
        if key not in result:
            continue
        value = result[key]
        if key != "value" and (value is None or value == [] or value == ""):
            continue
        view[key] = value
    if telemetry and "telemetry" in result:
        view["telemetry"] = result["telemetry"]
    return view


def model_text(result: Result, *, telemetry: bool = False) -> str:
    """`model_view` as compact JSON (no indentation, no spaces): the tool result text."""
    return json.dumps(
        model_view(result, telemetry=telemetry),
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )


def returned(state: RunState, chars: int = 0) -> None:
    """Count what a result hands back to the model (its value or error, `chars`, and the
    output so far) against the run's `tokensAvoided.resultTokens`."""
    state.catalog.counters.returned_chars += chars + state.output_bytes


def delivered(state: RunState, call: NestedCall) -> None:
    """Count a nested result delivered into the program: the text a direct-mode model would
    have read for this call."""
    if call.result is not None:
        state.catalog.counters.delivered_chars += len(call.result.text_content)
