"""Approval requests over the WebSocket (the `approvals.list` / `approvals.resolve` methods;
`approval_fanout.py` sends the `approval` events) and the exec rules of `/tools/invoke`.

Every connected client (the web page, scripts) hears each batch of requests and each answer as
`{"type": "event", "event": "approval", "payload": {"kind": "approval_requested", "batchId",
"requests": [...]}}` and `{..., "payload": {"kind": "approval_resolved", "id", "decision",
"by"}}`, whatever the origin of the turn, so the owner can answer from the web page. A client
that connects later asks `approvals.list`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from nodmix import offload
from nodmix.gateway.approvals_shared import APPROVAL_ANSWER, asked_elsewhere, merged_pending
from nodmix.gateway.errors import APIError, bad_request
from nodmix.security.approvals import ANSWERS, quoted_id
from nodmix.security.turns import EXEC_TOOL_ID, TurnHandle
from nodmix.tools import Tool

if TYPE_CHECKING:
    from nodmix.gateway.state import Gateway
    from nodmix.gateway.ws import Connection
    from nodmix.runtime import Runtime


async def approvals_list(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Pending requests (of one session with `sessionKey`), oldest first."""
    key = params.get("sessionKey")
    if key is not None and not isinstance(key, str):
        raise bad_request("params.sessionKey must be a string", param="sessionKey")
    broker = conn.gateway.runtime.security.broker
    local = [r.to_json() for r in broker.pending(session_key=key)]
    shared = conn.gateway.shared_approvals
    return {"requests": await offload.call(shared, merged_pending, local, shared, key)}


async def approvals_resolve(conn: Connection, req_id: str | int, params: dict[str, Any]) -> Any:
    """Answer a request: `{id, decision: "allow-once" | "allow-always" | "deny"}`."""
    request_id = params.get("id")
    decision = params.get("decision")
    if not isinstance(request_id, str) or not request_id:
        raise bad_request("params.id is required", param="id")
    if decision not in ANSWERS:
        raise bad_request(f"params.decision must be one of {', '.join(ANSWERS)}", param="decision")
    broker = conn.gateway.runtime.security.broker
    req = broker.get(request_id)
    shared = conn.gateway.shared_approvals
    if (
        req is None
        and shared is not None
        and await offload.call(shared, asked_elsewhere, shared, request_id)
    ):
        # Asked by a turn on another replica: that replica answers it (if it is still asked).
        conn.gateway.runtime.state.coordination.publish(
            APPROVAL_ANSWER, {"id": request_id, "decision": decision}
        )
        return {"id": request_id, "decision": decision, "forwarded": True}
    if req is None or not broker.resolve(request_id, decision, by="websocket"):
        raise APIError(
            status=404,
            message=(
                f"no approval request {quoted_id(request_id)} is waiting (answered or timed out?)"
            ),
            code="unknown_approval",
        )
    return {"id": request_id, "decision": decision, "command": req.command}


# ---- /tools/invoke ------------------------------------------------------------------------------


def refuse_unauthenticated_exec(gateway: Gateway, tool: Tool) -> None:
    """`/tools/invoke` of `exec` on a gateway without a token: 403, unless allowed in config.

    Raises:
        APIError: 403 `exec_unauthenticated`.
    """
    if tool.origin.id != EXEC_TOOL_ID or gateway.settings.token:
        return
    if gateway.runtime.config.gateway.tools.allow_unauthenticated:
        return
    raise APIError(
        status=403,
        message=(
            "exec through /tools/invoke needs a gateway token (gateway.auth.token or "
            "NODMIX_GATEWAY_TOKEN); set gateway.tools.allowUnauthenticated: true to allow it "
            "without one"
        ),
        kind="permission_error",
        code="exec_unauthenticated",
    )


@contextlib.contextmanager
def owner_call(runtime: Runtime, run_id: str, session_key: str) -> Iterator[None]:
    """Register a `/tools/invoke` call as the owner's for the exec gate (not as the session's
    latest turn, so it cannot lend the owner's rules to a channel session)."""
    with runtime.security.turns.running(run_id, session_key, TurnHandle(None), latest=False):
        yield
