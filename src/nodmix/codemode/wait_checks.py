"""Checks before `wait` resumes a run: unknown, expired, aborted, already resumed, busy, or
another session's."""

from __future__ import annotations

from nodmix.codemode.results import ErrorCode
from nodmix.codemode.runs import RunScope, SuspendedRun, SuspendedRunStore


def wait_problem(
    store: SuspendedRunStore, parked: SuspendedRun | None, run_id: str, scope: RunScope
) -> tuple[str, ErrorCode] | None:
    """Why `wait` cannot resume `run_id` here, as (message for the model, error code); None
    when it can. Every message says what to do next."""
    if parked is None:
        ended = store.ended(run_id)
        if ended is not None and ended[0].session_id in (scope.session_id, ""):
            if ended[1] == "lost":
                return (
                    f"code mode run {run_id} was lost when Nodmix restarted (its saved state "
                    "could not be read back); start over with exec.",
                    "lost_in_restart",
                )
            if ended[1] == "resumed":
                return (
                    f"code mode run {run_id} was already resumed by another wait call; use "
                    "that call's result (if it is waiting again, it has a new runId).",
                    "invalid_input",
                )
            if ended[1] == "aborted":
                return (
                    f"code mode run {run_id} was aborted (its turn was cancelled) and "
                    "cannot be resumed; start over with exec.",
                    "aborted",
                )
            return (
                f"code mode run {run_id} expired and was discarded; start over with exec.",
                "snapshot_expired",
            )
        return (
            f"code mode run {run_id} is unavailable or expired. Only the runId of a "
            '"waiting" exec/wait result in this conversation can be resumed; '
            "start over with exec.",
            "invalid_input",
        )
    own = parked.state.scope
    if (own.agent_id, own.session_id) != (scope.agent_id, scope.session_id):
        return (
            f"code mode run {run_id} belongs to a different session and cannot be resumed "
            "here; start a new program with exec.",
            "invalid_input",
        )
    if parked.resuming:
        return (
            f"a wait for code mode run {run_id} is already in progress; wait for it to "
            "return instead of calling wait again.",
            "invalid_input",
        )
    return None
